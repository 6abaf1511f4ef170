"""The shared, scarce, noisy device (docs/simrngd.md §8.1-§8.5).

One simulated RNGD with two job slots, shared with background tenants that arrive as a Poisson
process. Time is a simulated clock (seconds), so a 12-day campaign runs in minutes; every result
reports simulated device seconds and the real wall time the simulation took. Everything random
comes from generators seeded by (project seed, device id): replaying the same job sequence gives
the same queue waits, cycles and faults.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from chiplore.core.errors import ChiploreError
from chiplore.core.settings import MAX_SEED
from chiplore.core.target import (
    Correctness,
    DeviceJob,
    DeviceResult,
    Fault,
    JobHandle,
    Profile,
    ProfileEntry,
    Rejection,
    RunSample,
)
from chiplore.simulator._truth import ChipTruth, load_truth
from chiplore.simulator.cost import CostReport, NotCompiled, estimate
from chiplore.simulator.device.models import DeviceState, InvalidState, declared_kernels, fixture_sets, unknown_kernel
from chiplore.simulator.device.noise import MeasurementModel
from chiplore.simulator.toolchain.check import check

log = logging.getLogger(__name__)

DAY_S = 86_400.0

# (program, kernel, toolchain, fixture sets) -> correctness, or None when it cannot be checked
Grader = Callable[[str, str, str, tuple[str, ...]], Correctness | None]


class DeviceConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    device_id: str = "rngd-sim-0"
    slots: int = Field(2, ge=1)
    tenant_load: float = Field(0.4, ge=0.0, lt=1.0)  # fraction of slot time background tenants fill
    tenant_mean_s: float = Field(30.0, gt=0)
    max_pending_per_agent: int = Field(2, ge=1)
    job_cap_s: float = 70.0
    load_s: float = 1.5
    upload_bytes_per_s: float = 2e9
    host_sync_s: float = 0.02  # per run
    reset_s: float = 20.0  # NOC_TIMEOUT + CLUSTER_RESET
    hang_reset_s: float = 30.0  # after a hang is killed at the cap
    idle_warm_s: float = 60.0
    agent_budget_s_per_day: float = 3600.0
    project_budget_s: float | None = None  # None: unlimited
    p_transient: float = 0.01  # per job
    p_hang: float = 0.002  # per job
    p_noc_timeout: float = 1e-4  # per run
    p_job_fault: float = Field(0.0, ge=0.0, le=1.0)  # per job: a flaky device's NOC_TIMEOUT, the design not to blame


class DeviceHang(RuntimeError):
    """Raised by a grader when the program can never finish on the device (a run-time index outside
    its axis): the job hangs until the wall-time cap."""


class InvalidJob(ValueError):
    """A request the device cannot accept as written (an unknown fixture set, or a job id it never issued)."""


@dataclass
class _Ledger:
    per_agent_day: dict[tuple[str, int], float] = field(default_factory=dict)
    project: float = 0.0


class SimDevice:
    def __init__(
        self,
        seed: int,
        config: DeviceConfig | None = None,
        *,
        input_bytes: Callable[[str, str], int] | None = None,
        grader: Grader | None = None,
        truth: ChipTruth | None = None,
        own_sets: Callable[[str], tuple[str, ...]] | None = None,
    ) -> None:
        if not 0 <= seed <= MAX_SEED:  # numpy's generators take no negative seed: say so, not a numpy traceback
            raise ValueError(f"seed {seed} is not an integer from 0 to 2^63 - 1")
        self.config = config or DeviceConfig()
        self.seed = seed
        self.truth_override = truth
        self.input_bytes = input_bytes or (lambda kernel, program: 0)
        self.grader = grader
        self.own_sets = own_sets or (lambda kernel: ())  # a kernel pack's sets of its own, by kernel
        streams = np.random.SeedSequence([seed, zlib.crc32(self.config.device_id.encode())]).spawn(2)
        self.rng = np.random.Generator(np.random.PCG64(streams[0]))  # runs and faults, in job order
        self._tenant_rng = np.random.Generator(np.random.PCG64(streams[1]))
        self.noise = MeasurementModel(truth or load_truth(), self.rng)
        self.now = 0.0
        self._slot_free = [0.0] * self.config.slots
        self._last_busy = -math.inf
        self._next_tenant = self._tenant_gap()
        self._jobs: dict[str, tuple[DeviceResult, float]] = {}  # id -> (result, finish time)
        self._pending: dict[str, list[float]] = {}  # agent -> finish times of its jobs
        self._ledger = _Ledger()
        self._count = 0
        # job ids are <device>/<session>-<count>: unique for good, as a process starts a new session
        # (fe-run's saved state continues its session), not only within one process
        self._session = uuid.uuid4().hex[:8]

    # ---- public surface ----------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Let simulated time pass (an agent thinking, a campaign sleeping)."""
        self.now += max(0.0, seconds)

    def submit(self, job: DeviceJob) -> JobHandle:
        wall = time.perf_counter()
        try:
            sets = fixture_sets(job, self.own_sets(job.kernel))
        except ValueError as error:
            raise InvalidJob(str(error)) from None
        self._count += 1  # a refused request takes no job id
        job_id = f"{self.config.device_id}/{self._session}-{self._count:06d}"
        result, finish = self._run(job_id, job, sets)
        result = result.model_copy(update={"wall_s": time.perf_counter() - wall})
        self._jobs[job_id] = (result, finish)
        if result.status not in ("compile_error", "queue_rejected"):
            self._pending.setdefault(job.agent, []).append(finish)
        return JobHandle(job_id=job_id, device_id=self.config.device_id, submitted_s=self.now)

    def result(self, handle: JobHandle) -> DeviceResult:
        """Wait (in simulated time) for the job and return its result."""
        try:
            result, finish = self._jobs[handle.job_id]
        except KeyError:
            raise InvalidJob(f"no job {handle.job_id} on {self.config.device_id}") from None
        self.now = max(self.now, finish)
        return result

    def spent(self, agent: str | None = None) -> float:
        """Device seconds charged so far: to one agent today, or to the project."""
        if agent is None:
            return self._ledger.project
        return self._ledger.per_agent_day.get((agent, self._day(self.now)), 0.0)

    def snapshot(self) -> dict[str, object]:
        """Everything needed to continue this device in another process (fe-run keeps it on disk)."""
        return {
            "device_id": self.config.device_id,
            "seed": self.seed,
            "now": self.now,
            "count": self._count,
            "session": self._session,
            "slot_free": list(self._slot_free),
            "last_busy": self._last_busy if math.isfinite(self._last_busy) else None,
            "next_tenant": self._next_tenant if math.isfinite(self._next_tenant) else None,
            "rng": self.rng.bit_generator.state,
            "tenant_rng": self._tenant_rng.bit_generator.state,
            "noise": {"phase": self.noise.phase, "bias": self.noise.bias},
            "ledger": {
                "project": self._ledger.project,
                "per_agent_day": [[a, d, s] for (a, d), s in self._ledger.per_agent_day.items()],
            },
            "pending": {agent: list(times) for agent, times in self._pending.items()},
        }

    def restore(self, state: dict[str, object]) -> None:
        """Continue from a `snapshot`; raises InvalidState (and changes nothing) when it cannot."""
        saved = DeviceState.checked(state)
        if (saved.device_id, saved.seed) != (self.config.device_id, self.seed):
            raise InvalidState(f"it belongs to device {saved.device_id} with seed {saved.seed}, not "
                               f"{self.config.device_id} with seed {self.seed}")  # fmt: skip
        if len(saved.slot_free) != self.config.slots:
            raise InvalidState(f"it has {len(saved.slot_free)} slots, the device {self.config.slots}")
        rng, tenant_rng = self.rng.bit_generator.state, self._tenant_rng.bit_generator.state
        try:
            self.rng.bit_generator.state = saved.rng
            self._tenant_rng.bit_generator.state = saved.tenant_rng
        except (TypeError, ValueError, KeyError) as error:
            self.rng.bit_generator.state, self._tenant_rng.bit_generator.state = rng, tenant_rng
            raise InvalidState(f"rng: not a generator state ({error})") from None
        self.now = saved.now
        self._count = saved.count
        self._session = saved.session or self._session
        self._slot_free = list(saved.slot_free)
        self._last_busy = -math.inf if saved.last_busy is None else saved.last_busy
        self._next_tenant = math.inf if saved.next_tenant is None else saved.next_tenant
        self.noise.phase, self.noise.bias = saved.noise.phase, saved.noise.bias
        self._ledger = _Ledger(
            per_agent_day={(agent, day): spent for agent, day, spent in saved.ledger.per_agent_day},
            project=saved.ledger.project,
        )
        self._pending = {agent: list(times) for agent, times in saved.pending.items()}

    # ---- one job -------------------------------------------------------------------------------

    def _run(self, job_id: str, job: DeviceJob, sets: tuple[str, ...]) -> tuple[DeviceResult, float]:
        checked = check(job.program, job.toolchain)
        version = checked.version
        base = {"job_id": job_id, "kernel": job.kernel, "toolchain": version, "device_id": self.config.device_id,
                "diagnostics": checked.diagnostics}  # fmt: skip
        if not checked.ok:  # compiled on the host: free, never queued
            first = next((f": {d.code} {d.message}" for d in checked.diagnostics if d.is_error), "")
            message = f"the program does not compile{first}"  # the first error says why
            return DeviceResult(status="compile_error", message=message, **base), self.now
        kernels = declared_kernels(job.program) or ()
        if job.kernel not in kernels:  # the harness cannot load it: as free as a compile error
            return DeviceResult(status="compile_error", message=unknown_kernel(job.kernel, kernels), **base), self.now
        try:
            report = estimate(job.program, version, self.truth_override)
        except NotCompiled as error:  # an internal lowering refusal surfaces as a compile error
            return DeviceResult(status="compile_error", message=str(error), **base), self.now
        except ChiploreError:
            raise  # the user's configuration (a truth file, a pack): one line from the caller, as it was meant
        except Exception as error:  # the device answers every job; a simulator bug is its one-line message
            log.debug("estimate failed", exc_info=True)
            message = f"the host toolchain failed on the program ({_one_line(error)})"
            return DeviceResult(status="compile_error", message=message, **base), self.now
        planned = self._planned_seconds(job, sets, report.cycles)
        rejection = self._refusal(job, planned)
        if rejection is not None:
            reason, refusal = rejection
            return DeviceResult(status="queue_rejected", message=refusal, rejected_for=reason, **base), self.now
        start = self._queue(self.now)
        wait = start - self.now
        correctness: Correctness | None = None
        hang = ""
        if self.grader is not None:
            try:  # outputs do not depend on timing, so grading first tells whether the job can finish
                correctness = self.grader(job.program, job.kernel, version, sets)
            except DeviceHang as error:
                hang = str(error)
            except ChiploreError:
                raise  # a pack whose reference fails names itself in one line (chiplore.core.errors)
            except Exception as error:  # a grader's bug must not pass a program ungraded, nor crash the device
                log.debug("grading failed", exc_info=True)
                correctness = Correctness(passed=False, message=f"the grader failed ({_one_line(error)})")
        outcome = self._hang(hang, job) if hang else self._execute(job, sets, report, start, planned)
        device_s = outcome.device_s
        finish = start + device_s + outcome.extra_busy_s
        slot = min(range(self.config.slots), key=lambda i: self._slot_free[i])
        self._slot_free[slot] = finish
        self._last_busy = max(self._last_busy, finish)
        self._charge(job.agent, start, device_s)
        timed = [r.cycles for r in outcome.runs if not r.warmup]
        if outcome.status != "ok":
            correctness = None
        result = DeviceResult(
            status=outcome.status,
            queue_wait_s=wait,
            device_s=device_s,
            runs=tuple(outcome.runs),
            median_cycles=int(statistics.median(timed)) if timed and outcome.status == "ok" else None,
            correctness=correctness,
            faults=tuple(outcome.faults),
            profile=self._profile(report) if job.profile and outcome.status == "ok" else None,
            retryable=outcome.status == "transient",
            message=outcome.message,
            **base,
        )
        return result, finish

    @property
    def _hz(self) -> float:
        return self.noise.truth.clock_ghz * 1e9

    def _planned_seconds(self, job: DeviceJob, sets: tuple[str, ...], cycles: float) -> float:
        runs = len(sets) * self._runs_per_set(job)
        upload = len(sets) * self.input_bytes(job.kernel, job.program) / self.config.upload_bytes_per_s
        per_run = self.config.host_sync_s + cycles / self._hz
        return (self.config.load_s + upload + runs * per_run) * (2 if job.profile else 1)

    def _runs_per_set(self, job: DeviceJob) -> int:
        return job.repeats if job.fixtures == "smoke" else 1 + job.repeats  # graded sets get a warm-up

    def _refusal(self, job: DeviceJob, planned: float) -> tuple[Rejection, str] | None:
        """Why the queue refuses the job, and the message saying so (None: it takes it)."""
        cfg = self.config
        left_today = cfg.agent_budget_s_per_day - self.spent(job.agent)
        if planned > left_today:
            left = max(left_today, 0.0)
            return "budget", (f"device budget exhausted for {job.agent}: the job needs {planned:.1f} s, "
                              f"{left:.1f} s of {cfg.agent_budget_s_per_day:.0f} s are left today")  # fmt: skip
        if cfg.project_budget_s is not None and planned > cfg.project_budget_s - self._ledger.project:
            left = max(cfg.project_budget_s - self._ledger.project, 0.0)
            return "budget", f"project device budget exhausted: the job needs {planned:.1f} s, {left:.1f} s are left"
        pending = [f for f in self._pending.get(job.agent, []) if f > self.now]
        self._pending[job.agent] = pending
        if len(pending) >= cfg.max_pending_per_agent:
            return (
                "queue_full",
                f"{job.agent} already has {len(pending)} jobs pending (at most {cfg.max_pending_per_agent})",
            )
        return None

    def _charge(self, agent: str, start: float, seconds: float) -> None:
        key = (agent, self._day(start))
        self._ledger.per_agent_day[key] = self._ledger.per_agent_day.get(key, 0.0) + seconds
        self._ledger.project += seconds

    @staticmethod
    def _day(t: float) -> int:
        return int(t // DAY_S)

    # ---- the queue -----------------------------------------------------------------------------

    def _tenant_gap(self) -> float:
        rate = self.config.tenant_load * self.config.slots / self.config.tenant_mean_s
        return float(self._tenant_rng.exponential(1 / rate)) if rate > 0 else math.inf

    def _queue(self, arrival: float) -> float:
        """FIFO: tenants that arrived before this job take their slots first."""
        while self._next_tenant <= arrival:
            at = self._next_tenant
            duration = float(np.clip(self._tenant_rng.exponential(self.config.tenant_mean_s), 1.0,
                                     self.config.job_cap_s))  # fmt: skip
            slot = min(range(self.config.slots), key=lambda i: self._slot_free[i])
            begin = max(at, self._slot_free[slot])
            self._slot_free[slot] = begin + duration
            self._last_busy = max(self._last_busy, begin + duration)
            self._next_tenant = at + self._tenant_gap()
        return max(arrival, min(self._slot_free))

    # ---- running ---------------------------------------------------------------------------------

    def _cap(self, job: DeviceJob) -> tuple[float, str]:
        """Where the job is stopped: the device's cap, or the job's own limit when that is less."""
        if job.limit_s is not None and job.limit_s < self.config.job_cap_s:
            return job.limit_s, f"the job's limit of {job.limit_s:.1f} s"
        return self.config.job_cap_s, f"the {self.config.job_cap_s:.0f} s cap"

    def _hang(self, reason: str, job: DeviceJob) -> _Outcome:
        cap, named = self._cap(job)
        out = _Outcome(status="timeout", device_s=cap, extra_busy_s=self.config.hang_reset_s)
        out.faults.append(Fault(code="HANG"))
        out.message = f"the job hung and was killed at {named} (device reset follows)"
        if reason:
            out.message += f": {reason}"
        return out

    def _execute(
        self, job: DeviceJob, sets: tuple[str, ...], report: CostReport, start: float, planned: float
    ) -> _Outcome:
        cfg = self.config
        out = _Outcome()
        if self.rng.random() < cfg.p_hang:
            return self._hang("", job)
        transient_at = self.rng.random() if self.rng.random() < cfg.p_transient else None
        # drawn only on a flaky device, so a healthy one's stream (its every run and fault) is unchanged
        flaky_at = self.rng.random() if cfg.p_job_fault and self.rng.random() < cfg.p_job_fault else None
        cap, named = self._cap(job)
        if planned > cap:
            out.status, out.device_s = "timeout", cap
            out.message = f"the job needs {planned:.1f} s of device time, over {named}"
            return out
        scale = 2 if job.profile else 1
        elapsed = cfg.load_s * scale
        first = start - self._last_busy > cfg.idle_warm_s
        run_index = 0
        for fixture in sets:
            elapsed += self.input_bytes(job.kernel, job.program) / cfg.upload_bytes_per_s * scale
            for k in range(self._runs_per_set(job)):
                if transient_at is not None and elapsed >= transient_at * planned:
                    out.status, out.device_s, out.retryable = "transient", elapsed, True
                    out.faults.append(Fault(code="TRANSIENT"))
                    out.message = "transient device error (PCIe replay); the job can be retried"
                    return out
                flaky = flaky_at is not None and run_index >= int(flaky_at * len(sets) * self._runs_per_set(job))
                fault = (Fault(code="NOC_TIMEOUT", cluster=0, cycle=int(report.cycles // 2)) if flaky else None) or (
                    self._bank_fault(report)
                ) or (
                    Fault(code="NOC_TIMEOUT", cluster=int(self.rng.integers(0, self.noise.truth.shape.clusters)),
                          cycle=int(report.cycles // 2))
                    if self.rng.random() < cfg.p_noc_timeout else None
                )  # fmt: skip
                if fault is not None:
                    out.status = "fault"
                    reset = Fault(code="CLUSTER_RESET", cluster=fault.cluster)
                    out.faults += [fault.model_copy(update={"run": run_index}), reset]
                    out.device_s = elapsed + cfg.reset_s
                    out.message = f"NOC_TIMEOUT on cluster {fault.cluster} at cycle {fault.cycle} of run {run_index}"
                    self.noise.redraw_bias()
                    return out
                t = start + elapsed
                cycles = self.noise.measure(report.cycles, t, first)
                first = False
                warmup = job.fixtures != "smoke" and k == 0
                out.runs.append(RunSample(fixture=fixture, cycles=cycles, warmup=warmup))
                elapsed += (cfg.host_sync_s + cycles / self._hz) * scale
                run_index += 1
        out.device_s = elapsed
        return out

    @staticmethod
    def _bank_fault(report: CostReport) -> Fault | None:
        """0.5.0 schedules a bank-run violation as written and the NoC times out at its start."""
        if not report.bank_faults:
            return None
        first = min(report.bank_faults, key=lambda f: f.cycle)
        return Fault(code="NOC_TIMEOUT", cluster=first.cluster, cycle=int(first.cycle))

    def _profile(self, report: CostReport) -> Profile:
        busy = {queue: round(cycles / report.cycles, 3) for queue, cycles in report.per_queue_busy.items()}
        longest = sorted(report.per_op, key=lambda op: op.end - op.start, reverse=True)[:8]
        entries = tuple(
            ProfileEntry(
                line=op.line, label=op.label, cycles=int((op.end - op.start) * float(self.rng.uniform(0.95, 1.05)))
            )
            for op in longest
        )
        return Profile(busy_fraction=busy, longest=entries)


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"


@dataclass
class _Outcome:
    status: str = "ok"
    device_s: float = 0.0
    extra_busy_s: float = 0.0  # the slot stays unavailable (a reset) without charging the job
    runs: list[RunSample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    retryable: bool = False
    message: str = ""
