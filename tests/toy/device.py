"""The toy chip's device: a simulated clock, log-normal run-to-run noise, and device seconds charged
per job (a fixed load cost plus the runs' cycles). Nothing sleeps; everything random comes from one
generator seeded once, consumed in job order, so the same jobs give the same results.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np

from chiplore.core.target import Correctness, DeviceJob, DeviceResult, Fault, JobHandle, RunSample
from tests.toy.compiler import Program, analyse
from tests.toy.timing import cycles
from tests.toy.toyl import header_of
from tests.toy.truth import TRUTH
from tests.toy.versions import DEFAULT_VERSION

JOB_S = 0.5  # loading a program and its fixtures onto the device
FIXTURE_SETS = {"graded": ("graded-a", "graded-b"), "smoke": ("smoke",)}
# (the program, the kernel it claims to be, the fixture sets) -> correctness, or None for no reference
Grader = Callable[[Program, str, tuple[str, ...]], Correctness | None]


class ToyDevice:
    def __init__(self, seed: int, grader: Grader, index: int = 0, p_fault: float = 0.0) -> None:
        """Device `index` of the chip's devices (`toy-<index>`), with a noise stream of its own; a flaky
        one (`p_fault`) faults that share of its jobs after loading them, whatever the program."""
        self.device_id = f"toy-{index}"
        self.rng = np.random.default_rng(seed if index == 0 else [seed, index])
        self.grader, self.p_fault = grader, p_fault
        self.now = 0.0  # device seconds since the device came up
        self._results: dict[str, DeviceResult] = {}

    def submit(self, job: DeviceJob) -> JobHandle:
        """Run the job at once on the simulated clock; `result` hands the answer back."""
        job_id = f"{self.device_id}/{len(self._results)}"
        handle = JobHandle(job_id=job_id, device_id=self.device_id, submitted_s=self.now)
        version = job.toolchain or header_of(job.program) or DEFAULT_VERSION
        checked, program = analyse(job.program, version)
        base = {"job_id": job_id, "kernel": job.kernel, "toolchain": version, "device_id": self.device_id}
        if not checked.ok:
            self._results[job_id] = DeviceResult(**base, status="compile_error", diagnostics=checked.diagnostics,
                                                 message="the program does not compile")  # fmt: skip
            return handle
        if self.p_fault and self.rng.random() < self.p_fault:  # drawn only on a flaky device
            self.now += JOB_S
            hung = f"{self.device_id}: a lane hung; the device reset"
            self._results[job_id] = DeviceResult(**base, status="fault", device_s=JOB_S, message=hung,
                                                 faults=(Fault(code="LANE_HANG"),))  # fmt: skip
            return handle
        sets = FIXTURE_SETS[job.fixtures] if isinstance(job.fixtures, str) else job.fixtures
        truth = TRUTH[version]
        expected = cycles(program, truth)
        runs: list[RunSample] = []
        for name in sets:
            for index in range(1 + job.repeats):  # a cold first run, then the timed ones
                cold = truth.warmup_factor if index == 0 else 1.0
                noisy = expected * cold * float(np.exp(self.rng.normal(0.0, truth.noise_sigma)))
                runs.append(RunSample(fixture=name, cycles=round(noisy), warmup=index == 0))
        device_s = JOB_S + sum(r.cycles for r in runs) / truth.clock_hz
        self.now += device_s
        self._results[job_id] = DeviceResult(
            **base, status="ok", device_s=device_s, diagnostics=checked.diagnostics, runs=tuple(runs),
            median_cycles=round(statistics.median(r.cycles for r in runs if not r.warmup)),
            correctness=self.grader(program, job.kernel, tuple(sets)),
        )  # fmt: skip
        return handle

    def advance_to(self, clock_s: float) -> None:
        """Let the clock run on to `clock_s` (idle); nothing when it is already past."""
        self.now = max(self.now, clock_s)

    def result(self, handle: JobHandle) -> DeviceResult:
        found = self._results.get(handle.job_id)
        if found is None:
            raise ValueError(f"job {handle.job_id!r} was never submitted to {self.device_id}")
        return found
