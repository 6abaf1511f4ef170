"""Targets for the scale-out tests, built again in Ray's worker processes (so they live in a module,
not in a test): the toy chip whose device jobs take real time, as a real device's do, so that a job
can be caught running and its runner killed."""

from __future__ import annotations

import time
from pathlib import Path

from chiplore.core.ids import content_sha
from chiplore.core.settings import Settings
from chiplore.core.target import ChipIdentity, DeviceJob, JobHandle
from tests.toy import ToyChip

JOB_S = 0.4  # wall seconds a job of the slow toy takes


class SlowToyChip(ToyChip):
    """The toy chip, each device job taking `job_s` of wall time; with `marks`, each job first leaves
    a file there named `<device>.<program sha prefix>.<ns>`, so a test sees which job runs where."""

    def __init__(self, seed: int = 0, devices: int = 1, job_s: float = JOB_S, marks: Path | None = None,
                 flaky: dict[str, float] | None = None) -> None:  # fmt: skip
        super().__init__(seed, devices, flaky)
        self.job_s, self.marks = job_s, marks

    def submit(self, job: DeviceJob, device: str | None = None) -> JobHandle:
        if self.marks is not None:
            (self.marks / f"{device or 'toy-0'}.{content_sha(job.program)[:16]}.{time.time_ns()}").touch()
        time.sleep(self.job_s)
        return super().submit(job, device)


def slow_toy(settings: Settings) -> SlowToyChip:
    """`CHIPLORE_TARGET=tests.agents.scale_targets:slow_toy`: the slow toy with the settings' seed and devices."""
    return SlowToyChip(seed=settings.seed, devices=settings.devices)


class ChippedToy(SlowToyChip):
    """The slow toy whose devices say which chip they are (`chip_id`), as a cluster node set up for
    another board would."""

    def __init__(self, chip_id: str, devices: int = 1, job_s: float = JOB_S) -> None:
        super().__init__(devices=devices, job_s=job_s)
        self.chip_id = chip_id

    def chip(self) -> ChipIdentity:
        return ChipIdentity(id=self.chip_id, note="a test's toy")


def chipped_toy_leaving(mark: Path, chip_id: str) -> ChippedToy:
    """A factory of ChippedToy that first creates `mark`: a test sees whether a device actor was built."""
    mark.touch()
    return ChippedToy(chip_id, job_s=0.0)
