"""SimRNGD's fixture sets; the job and result models are the Target interface's (chiplore.core.target)."""

from __future__ import annotations

from chiplore.core.target import DeviceJob

GRADED_SETS = tuple(f"g{i}" for i in range(7))
ALL_SETS = (*GRADED_SETS, "exact", "cancel")
SMOKE_SET = "g0"


def fixture_sets(job: DeviceJob) -> tuple[str, ...]:
    """The fixture sets a job runs on: the 7 graded ones, the smoke one, or those it names."""
    if job.fixtures == "graded":
        return GRADED_SETS
    if job.fixtures == "smoke":
        return (SMOKE_SET,)
    unknown = [s for s in job.fixtures if s not in ALL_SETS]
    if unknown or not job.fixtures:
        raise ValueError(f"unknown fixture sets {unknown}; choose from {', '.join(ALL_SETS)}")
    return job.fixtures
