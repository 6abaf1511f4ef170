"""Side effects of the loop as small callbacks (the way TVM MetaSchedule's measure callbacks add
results to its database): recording device runs and screenings in the graph, and telling the user
what happened."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from chiplore.agents.screens import ScreenResult
from chiplore.core.ids import content_sha
from chiplore.core.target import DeviceJob, DeviceResult
from chiplore.kg.models import Activity, Screening
from chiplore.kg.repo.runs import device_run, record_device_runs, record_screening
from chiplore.kg.store import GraphStore

Note = Callable[[str, str], None]  # (kernel, message): progress for the user


@dataclass(frozen=True)
class RecordRuns:
    """The runner's recording callback: each device job becomes a DeviceRun of the KernelVersion it
    ran, charged to the ledger in the same statement; returns the run's id."""

    store: GraphStore
    activity: Activity

    def __call__(self, job: DeviceJob, sha: str, result: DeviceResult) -> str:
        run = device_run(job, result)
        record_device_runs(self.store, [(run, sha)], activity=self.activity)
        return run.id


@dataclass(frozen=True)
class RecordScreenings:
    """The screener's recording callback: each screen's result becomes a Screening of the design."""

    store: GraphStore
    activity: Activity

    def __call__(self, design_id: str, result: ScreenResult) -> None:
        screening = Screening(id=content_sha(f"{design_id}|{result.check}")[:32], design=design_id,
                              check=result.check, passed=result.passed, detail=result.detail[:500],
                              predicted_cycles=result.predicted_cycles)  # fmt: skip
        record_screening(self.store, screening, activity=self.activity)


@dataclass
class Events:
    """Who hears of the loop's progress (a CLI's progress line, a log, a test)."""

    notes: list[Note] = field(default_factory=list)

    def note(self, kernel: str, message: str) -> None:
        for hear in self.notes:
            hear(kernel, message)
