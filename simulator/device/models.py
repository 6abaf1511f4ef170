"""What goes in and out of the shared device (SIMULATOR.md 5.2): job requests and results."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.diagnostics import Diagnostic

Status = Literal["ok", "compile_error", "fault", "timeout", "transient", "queue_rejected"]
GRADED_SETS = tuple(f"g{i}" for i in range(7))
ALL_SETS = (*GRADED_SETS, "exact", "cancel")
SMOKE_SET = "g0"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DeviceJob(Frozen):
    kernel: str
    program: str
    toolchain: str | None = None  # else the program's header, else the harness default
    fixtures: Literal["graded", "smoke"] | tuple[str, ...] = "graded"
    repeats: int = Field(1, ge=1, le=50)  # timed runs per fixture set
    profile: bool = False  # a coarse timeline; doubles device time
    agent: str = "agent"  # whose budget and pending-job allowance it uses

    def fixture_sets(self) -> tuple[str, ...]:
        if self.fixtures == "graded":
            return GRADED_SETS
        if self.fixtures == "smoke":
            return (SMOKE_SET,)
        unknown = [s for s in self.fixtures if s not in ALL_SETS]
        if unknown or not self.fixtures:
            raise ValueError(f"unknown fixture sets {unknown}; choose from {', '.join(ALL_SETS)}")
        return self.fixtures


class JobHandle(Frozen):
    job_id: str
    device_id: str
    submitted_s: float  # device clock at submission


class RunSample(Frozen):
    fixture: str
    cycles: int
    warmup: bool


class Fault(Frozen):
    code: Literal["NOC_TIMEOUT", "CLUSTER_RESET", "HANG", "TRANSIENT"]
    cluster: int | None = None
    cycle: int | None = None
    run: int | None = None


class WorstElement(Frozen):
    fixture: str
    output: str
    index: int
    abs_err: float
    tol: float


class Correctness(Frozen):
    passed: bool
    worst: WorstElement | None = None
    sets: tuple[str, ...] = ()
    message: str = ""


class ProfileEntry(Frozen):
    line: int | None
    label: str
    cycles: int


class Profile(Frozen):
    """A schedule viewer's coarse picture: busy fractions and the longest ops, durations +-5 %."""

    busy_fraction: dict[str, float]
    longest: tuple[ProfileEntry, ...]


class DeviceResult(Frozen):
    job_id: str
    status: Status
    kernel: str
    toolchain: str
    device_id: str
    queue_wait_s: float = 0.0
    device_s: float = 0.0  # simulated device seconds charged to the budget
    wall_s: float = 0.0  # real seconds the simulation took
    diagnostics: tuple[Diagnostic, ...] = ()
    runs: tuple[RunSample, ...] = ()
    median_cycles: int | None = None
    correctness: Correctness | None = None  # None: no grader is attached to this device
    faults: tuple[Fault, ...] = ()
    profile: Profile | None = None
    retryable: bool = False
    message: str = ""
