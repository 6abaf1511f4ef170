"""Microbenchmarks into the graph (DESIGN.md 4): run each probe's sweep through the Target, record
every device run, fit the parameters, record each as a Measurement of a HardwareParam with its
interval, and judge the doc claims about the same parameter: CONFIRMS when the claim falls inside
the interval (with slack for claims that say "about"), CONTRADICTS otherwise.

Device time is spent against a budget: a probe whose sweep would start past it is skipped, and a
probe that fails (a fault that retries cannot clear, a program the toolchain refuses) is recorded
as failed and skipped. A parameter already measured under the version is not measured again.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.ids import content_sha
from chiplore.core.target import DeviceJob, DeviceResult, ProbeTemplate, Target
from ingest.fits import FITS, Bench, Estimate, Fit, noise_sigma, run_fit
from kg.models import Activity, HardwareParam, KernelVersion, Measurement
from kg.repo.knowledge import record_activity, record_measurement
from kg.repo.nodes import upsert
from kg.repo.runs import device_run, record_device_runs
from kg.store import GraphStore

# fit name -> (chiplore's parameter key, unit): the keys the librarian's claims use.
PARAMS: dict[str, tuple[str, str]] = {
    "empty_kernel_cycles": ("kernel.empty_cycles", "cycles"),
    "engine_rate_4k": ("dma.engine_rate_4k_bytes_per_cycle", "B/cycle"),
    "dma_chain_startup": ("dma.queued_start_cycles", "cycles"),
    "engine_bw": ("dma.engine_bytes_per_cycle", "B/cycle"),
    "pkt_overhead": ("dma.packet_overhead_cycles", "cycles"),
    "dmn_bw": ("noc.dmn_bytes_per_cycle", "B/cycle"),
    "cluster_ingress": ("noc.cluster_port_bytes_per_cycle", "B/cycle"),
    "roof": ("noc.chip_bytes_per_cycle", "B/cycle"),
    "hbm_unit": ("hbm.unit_bytes", "B"),
    "rmw_factor": ("hbm.partial_store_factor", "x"),
    "dm2dm_rate": ("dma.dm_to_dm_bytes_per_cycle", "B/cycle"),
    "xcluster_factor": ("dma.cross_cluster_factor", "x"),
    "lut_bpc": ("decode.bytes_per_cycle", "B/cycle"),
    "lut_bpc_f4": ("decode.f4_bytes_per_cycle", "B/cycle"),
    "fetch_read_main": ("fetch.read_bytes_main", "B/cycle"),
    "fetch_read_sub": ("fetch.read_bytes_sub", "B/cycle"),
    "sync_cycles": ("queue.handoff_cycles", "cycles"),
    "launch_cycles": ("kernel.launch_cycles", "cycles"),
    "pass_fixed_cycles": ("pass.fixed_cycles", "cycles"),
    "dma_start_cycles": ("dma.start_cycles", "cycles"),
    "ve_trans_cycles": ("vector.transcendental_cycles_per_flit", "cycles/flit"),
    "ve_max_chain": ("vector.max_chain_ops", "ops"),
    "switch_per_ring_flit": ("switch.cycles_per_ring_flit", "cycles"),
    "switch_per_ring": ("switch.cycles_per_ring_slice", "cycles"),
    "reducer_per_slice": ("reducer.cycles_per_slice", "cycles"),
    "reducer_throughput": ("reducer.throughput_factor", "x"),
    "dm_usable_per_slice": ("dm.usable_bytes_per_slice", "B"),
    "interference": ("dma.interference_factor", "x"),
    "bank_run_limit": ("dm.bank_run_limit", "accesses"),
}
NOISE = ("device.noise_sigma", "log-ratio")
NOISE_JOBS = 20  # x 50 runs of one long kernel: the noise within 5 %
HEDGED = re.compile(r"\b(about|roughly|around|approximately|nearly)\b|~", re.IGNORECASE)
HEDGE_SLACK = 0.10  # "about 280" agrees with anything within 10 %
EXACT_SLACK = 0.02  # a plain number still gets the noise of its own measurement


class MeasureSummary(BaseModel):
    version: str
    probes_run: int
    probes_skipped: list[str]  # already measured, or past the budget
    probes_failed: list[str]
    measurements: int
    confirmed: int
    contradicted: int
    device_s: float


class ProbeRecorder:
    """Every device result of a probe run into the graph, as it comes: its KernelVersion and
    DeviceRun, under one runner activity (recorded with the first result, so a run that does
    nothing adds nothing). Keeps what the noise estimate and the fits' provenance need."""

    def __init__(self, store: GraphStore, version: str, activity: Activity, spent_s: float = 0.0) -> None:
        self.store, self.version, self.activity = store, version, activity
        self.spent = spent_s
        self.started = False
        self.runs: list[str] = []  # of the probe now running
        self.every_job: list[tuple[str, np.ndarray]] = []  # (run id, timed cycles) of the noise runs
        self.noise_jobs: dict[DeviceJob, float] = {}  # every job run, by its median: the longest measures the noise

    def begin(self) -> None:
        if not self.started:
            record_activity(self.store, self.activity)
            self.started = True

    def __call__(self, job: DeviceJob, result: DeviceResult) -> None:
        self.spent += result.device_s
        run = device_run(job, result)
        version_node = KernelVersion(sha=content_sha(job.program), kernel=job.kernel, source=job.program,
                                     toolchain=self.version)  # fmt: skip
        upsert(self.store, [version_node])
        record_device_runs(self.store, [(run, version_node.sha)], activity=self.activity)
        self.runs.append(run.id)
        if run.status == "ok" and run.cycles:
            self.every_job.append((run.id, np.asarray(run.cycles, dtype=np.float64)))
            self.noise_jobs[job] = max(self.noise_jobs.get(job, 0.0), float(np.median(run.cycles)))

    def finish(self, failed: list[str]) -> None:
        if self.started:
            outcome = f"failed probes: {', '.join(failed)}" if failed else "ok"
            upsert(self.store, [self.activity.model_copy(update={"ended_at": utc_now(), "outcome": outcome})])


def measure(store: GraphStore, target: Target, version: str, *, budget_s: float, repeats_scale: float = 0.25,
            rounds: int = 2, on_probe: Callable[[str, float], None] | None = None) -> MeasureSummary:  # fmt: skip
    """Run the target's microbenchmarks under `version` until the budget is spent.

    `repeats_scale` and `rounds` make the sweeps leaner than the probes state (learning wants every
    parameter within 5 %, not 2 %, in a quarter of an hour of device time)."""
    probes = {p.id: p for p in target.microbenchmarks()}
    recorder = ProbeRecorder(store, version, Activity(id=f"runner-{uuid.uuid4().hex[:12]}", role="runner",
                                                  policy="builtin"))  # fmt: skip
    measured = {row["p"] for row in store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $v}) RETURN DISTINCT m.param AS p",
        {"v": version})}  # fmt: skip
    bench = Bench(target, on_result=recorder)
    given: dict[str, float] = {}
    ran, skipped, failed = 0, [], []
    written = confirmed = contradicted = 0
    for probe_id, spec in FITS.items():
        keys = [PARAMS[name][0] for name in spec.params if name in PARAMS]
        probe = probes.get(probe_id.split("/")[0])
        if probe is None:
            continue
        if keys and all(key in measured for key in keys):
            skipped.append(probe_id)
            given |= known_values(store, version, spec.params)
            continue
        if spend_limit_reached(recorder.spent, budget_s):
            skipped.append(probe_id)
            continue
        before = recorder.spent
        estimates = run_probe(recorder, spec, probe, version, bench, given, repeats_scale, rounds)
        if estimates is None:
            failed.append(probe_id)
            continue
        ran += 1
        given |= {name: e.value for name, e in estimates.items()}
        for name, estimate in estimates.items():
            if name not in PARAMS:
                continue
            _, agreed, disagreed = record_estimate(store, target.name, version, probe, spec.probe, name, estimate,
                                                   list(recorder.runs), recorder.activity)  # fmt: skip
            written += 1
            confirmed += agreed
            contradicted += disagreed
        if on_probe is not None:
            on_probe(probe_id, recorder.spent - before)
    if NOISE[0] not in measured and not spend_limit_reached(recorder.spent, budget_s):
        spread = sample_noise(version, recorder, bench, probes)
        if spread is None:
            failed.append("noise")
        else:
            record_noise(store, target.name, version, spread, recorder)
            written += 1
    recorder.finish(failed)
    return MeasureSummary(
        version=version,
        probes_run=ran,
        probes_skipped=skipped,
        probes_failed=failed,
        measurements=written,
        confirmed=confirmed,
        contradicted=contradicted,
        device_s=recorder.spent,
    )


def run_probe(recorder: ProbeRecorder, spec: Fit, probe: ProbeTemplate, version: str, bench: Bench,
               given: dict[str, float], repeats_scale: float, rounds: int) -> dict[str, Estimate] | None:  # fmt: skip
    """One probe's sweep and fit; None when it failed (a fault retries cannot clear, a refused program)."""
    recorder.begin()
    recorder.runs.clear()
    try:
        return run_fit(spec, probe, version, bench, given, repeats=max(3, round(probe.repeats * repeats_scale)),
                       rounds=rounds)  # fmt: skip
    except (RuntimeError, KeyError, ValueError, ZeroDivisionError, IndexError):
        return None


def sample_noise(version: str, recorder: ProbeRecorder, bench: Bench, probes: dict[str, ProbeTemplate],
                 ) -> Estimate | None:  # fmt: skip
    """The noise: many runs of one long kernel (the longest the sweeps ran, or the first probe's
    first point when nothing ran this time), in jobs of fifty. None when no job was long enough."""
    recorder.begin()
    if recorder.noise_jobs:
        longest = max(recorder.noise_jobs, key=lambda job: recorder.noise_jobs[job])
    else:
        first = next(iter(probes.values()))
        longest = DeviceJob(kernel=first.kernel, program=first.instantiate(first.points[0], version),
                            toolchain=version, fixtures="smoke", agent="harness")  # fmt: skip
    recorder.every_job.clear()
    recorder.runs.clear()
    try:
        for _ in range(NOISE_JOBS):
            bench.run(longest.model_copy(update={"repeats": 50}))
        return noise_sigma([[cycles for _, cycles in recorder.every_job]])
    except ValueError:
        return None


def record_noise(store: GraphStore, target: str, version: str, spread: Estimate, recorder: ProbeRecorder,
                 ) -> Measurement:  # fmt: skip
    key, unit = NOISE
    runs = list(recorder.runs)
    return record_measurement(
        store,
        Measurement(id=content_sha(f"{target}|{version}|{key}|{'|'.join(runs)}")[:32], param=key,
                    value=spread.value, ci_low=spread.low, ci_high=spread.high, n=len(recorder.every_job),
                    fit="spread of log cycles around each job's median, outliers cut", unit=unit, toolchain=version),
        param=HardwareParam(key=key, unit=unit, description="run-to-run noise (sigma of log cycles)"),
        run_ids=runs, activity=recorder.activity, target=target,
    )  # fmt: skip


def spend_limit_reached(spent: float, budget_s: float) -> bool:
    return spent >= budget_s


def known_values(store: GraphStore, version: str, names: tuple[str, ...]) -> dict[str, float]:
    """Earlier measurements of these parameters, as givens for the fits that need them."""
    out = {}
    for name in names:
        if name not in PARAMS:
            continue
        rows = store.read(
            "MATCH (m:Measurement {param: $p})-[:UNDER]->(:Toolchain {version: $v}) RETURN m.value AS value "
            "ORDER BY m.measured_at DESC",
            {"p": PARAMS[name][0], "v": version},
        )
        if rows:
            out[name] = float(rows[0]["value"])
    return out


def record_estimate(store: GraphStore, target: str, version: str, probe: ProbeTemplate, fit_name: str, name: str,
            estimate: Estimate, run_ids: list[str], activity: Activity) -> tuple[Measurement, int, int]:  # fmt: skip
    key, unit = PARAMS[name]
    claims = store.read(
        "MATCH (c:Claim {param: $key})-[:UNDER]->(:Toolchain {version: $v}) RETURN c.id AS id, c.value AS value, "
        "c.text AS text, c.unit AS unit",
        {"key": key, "v": version},
    )
    converting = any(claim["unit"] not in (None, unit) for claim in claims)
    clock = clock_hz(store, version) if converting else None  # read once, and only when a unit differs
    confirms, contradicts = [], []
    for claim in claims:
        claimed = in_unit(float(claim["value"]), claim["unit"], unit, clock)
        if claimed is None:  # a unit this judge cannot convert: no verdict
            continue
        (confirms if agrees(estimate, claimed, claim["text"]) else contradicts).append(claim["id"])
    measurement = Measurement(
        id=content_sha(f"{target}|{version}|{key}|{fit_name}|{'|'.join(sorted(run_ids))}")[:32], param=key,
        value=estimate.value, ci_low=estimate.low, ci_high=estimate.high, n=max(1, len(run_ids)),
        fit=f"{fit_name}: {probe.name}", unit=unit, toolchain=version,
    )  # fmt: skip
    record_measurement(
        store, measurement, param=HardwareParam(key=key, unit=unit, description=probe.measures), run_ids=run_ids,
        activity=activity, target=target, confirms=confirms, contradicts=contradicts,
    )  # fmt: skip
    return measurement, len(confirms), len(contradicts)


def in_unit(value: float, unit: str | None, wanted: str, clock_hz: float | None) -> float | None:
    """A claimed value in the measurement's unit; rates per second need the documented clock."""
    if unit in (None, wanted):
        return value
    if unit == "TB/s" and wanted == "B/cycle" and clock_hz:
        return value * 1e12 / clock_hz
    return None


def clock_hz(store: GraphStore, version: str) -> float | None:
    """The chip's clock as the version's docs state it (rates per second are converted with it)."""
    rows = store.read(
        "MATCH (c:Claim {param: 'chip.clock_hz'})-[:UNDER]->(:Toolchain {version: $v}) RETURN c.value AS value",
        {"v": version},
    )
    return float(rows[0]["value"]) if rows else None


def agrees(estimate: Estimate, claimed: float, text: str) -> bool:
    """Whether a documented value is consistent with the measurement's interval."""
    slack = HEDGE_SLACK if HEDGED.search(text) else EXACT_SLACK
    low, high = min(estimate.low, estimate.value), max(estimate.high, estimate.value)
    return low * (1 - slack) <= claimed <= high * (1 + slack)
