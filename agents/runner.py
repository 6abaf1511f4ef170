"""The runner: device jobs under a device-second budget, retried on transient faults, a design that
faults the same way twice quarantined, a full queue waited out with backoff. Every job's result is
handed to a recording callback (the graph's DeviceRun, linked to the KernelVersion it ran), so the
budget can be read back from the graph after a restart."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal, Protocol

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from chiplore.core.errors import BudgetExhausted
from chiplore.core.target import DeviceJob, DeviceResult, Fault, Target
from chiplore.kg.models import BUDGET_END

ATTEMPTS = 3
Fixtures = Literal["graded", "smoke"] | tuple[str, ...]  # tuple: the fixture sets by name
# (the job, the sha of the program it ran, the result) -> the id the run is recorded under
RecordRun = Callable[[DeviceJob, str, DeviceResult], str]


@dataclass(frozen=True)
class Outcome:
    result: DeviceResult
    run_ids: tuple[str, ...]
    quarantined: bool = False  # faulted the same way on every attempt: the design, not the device

    @property
    def ok(self) -> bool:
        return self.result.status == "ok"


class Runner(Protocol):
    """Runs a program on the device; called for graded runs of a design and for each side of an A/B pair."""

    spent_s: float
    budget_s: float

    def run(self, kernel: str, sha: str, source: str, version: str, *, fixtures: Fixtures = "graded",
            repeats: int = 7, finishing: bool = False) -> Outcome:  # fmt: skip
        """One job (retried as the faults allow); raises BudgetExhausted once the budget is used up,
        unless the job is `finishing` a decision already made (a design the judge accepted: its graded
        run and its check sets), which runs past the budget as a started job does."""
        ...

    def same_device(self) -> AbstractContextManager[None]:
        """Every job run inside the block runs on one device (an A/B comparison's pairs: drift is
        per device). A runner with one device has nothing to do."""
        ...


class DeviceRunner:
    """`spent_s` counts what this runner's jobs cost; `charged`, when given, reads what the ledger
    holds for the same consumer, so runs of several processes share one budget."""

    def __init__(self, target: Target, record: RecordRun, *, budget_s: float, spent_s: float = 0.0,
                 backoff_s: float = 0.05, charged: Callable[[], float] | None = None) -> None:  # fmt: skip
        self.target, self.record, self.charged = target, record, charged
        self.budget_s, self.spent_s, self.backoff_s = budget_s, spent_s, backoff_s
        self.started_at_s = spent_s  # what earlier runs spent: the budget runs on top of it

    def same_device(self) -> AbstractContextManager[None]:
        return nullcontext()  # one device: every job runs on it

    def spent_by_all(self) -> float:
        """Device time spent, by this runner or (through the ledger) by any other process."""
        return max(self.spent_s, self.charged()) if self.charged is not None else self.spent_s

    def _budget_text(self) -> str:
        """This run's budget, with the total where earlier runs spent some of it on the same consumer, and
        what another run on the graph spent of it meanwhile."""
        own = self.budget_s - self.started_at_s
        notes = []
        if own <= 0 and self.started_at_s >= 0.5:  # earlier work (an upgrade's re-measurements) left it nothing
            head = f"of {_seconds(self.budget_s)} s"
            notes.append(f"earlier work spent {_seconds(self.started_at_s)} s of it")
        elif self.started_at_s >= 0.5:
            head = f"of {_seconds(own)} s"
            notes.append(f"{_seconds(self.budget_s)} s with earlier runs'")
        else:
            head = f"of {_seconds(self.budget_s)} s"
        others = self.charged() - self.spent_s if self.charged is not None else 0.0
        if others >= 0.5:
            notes.append(f"another run on the graph spent {_seconds(others)} s of it meanwhile")
        return f"{head} ({'; '.join(notes)})" if notes else head

    def exhausted(self) -> bool:
        """Whether the budget is spent, by this runner or (through the ledger) by any other process."""
        return self.spent_by_all() >= self.budget_s

    def run(self, kernel: str, sha: str, source: str, version: str, *, fixtures: Fixtures = "graded",
            repeats: int = 7, finishing: bool = False) -> Outcome:  # fmt: skip
        job = DeviceJob(kernel=kernel, program=source, toolchain=version, fixtures=fixtures, repeats=repeats,
                        agent=f"runner/{kernel}")  # fmt: skip
        runs: list[str] = []
        faults: list[str] = []

        def attempt() -> DeviceResult:
            left = self.budget_s - self.spent_by_all()  # the ledger is read once a job
            if left <= 0 and not finishing:
                raise BudgetExhausted(f"device budget {self._budget_text()} spent")
            limit = left if math.isfinite(left) and left > 0 else None  # a finishing job past it: the device's own
            result = self._submit(job.model_copy(update={"limit_s": limit}))
            self.spent_s += result.device_s
            # stopped at what was left of the budget (a hang, or a job longer than that): the budget's end,
            # not the design's fault nor the device's, and recorded so (status counts no failed run)
            stopped = result.status == "timeout" and limit is not None and result.device_s >= limit * (1 - 1e-9)
            if stopped:
                result = result.model_copy(update={"faults": (*result.faults, Fault(code=BUDGET_END))})
            runs.append(self.record(job, sha, result))
            if stopped:
                raise BudgetExhausted(f"device budget {self._budget_text()} spent (a job was stopped at its end)")
            if result.status in ("fault", "timeout"):
                faults.append(",".join(sorted(f.code for f in result.faults)) or result.status)
            return result

        retrying = Retrying(stop=stop_after_attempt(ATTEMPTS), retry=retry_if_result(self._worth_retrying(faults)),
                            wait=wait_exponential(multiplier=self.backoff_s, max=1.0), reraise=True,
                            retry_error_callback=lambda state: state.outcome.result())  # fmt: skip
        result = retrying(attempt)
        quarantined = result.status in ("fault", "timeout") and len(faults) >= 2 and len(set(faults)) == 1
        return Outcome(result, tuple(runs), quarantined)

    @staticmethod
    def _worth_retrying(faults: list[str]) -> Callable[[DeviceResult], bool]:
        def predicate(result: DeviceResult) -> bool:
            if result.status == "transient":
                return True
            # a second identical fault says the design faults, not the device: stop there
            return result.status in ("fault", "timeout") and not (len(faults) >= 2 and faults[-1] == faults[-2])

        return predicate

    def _submit(self, job: DeviceJob) -> DeviceResult:
        for backoff in range(6):  # a full queue (the agent's pending allowance) clears as jobs finish
            result = self._serve(job)
            if result.status != "queue_rejected":
                return result
            if result.rejected_for == "budget":  # the device's own allowance is spent: no design is to blame
                raise BudgetExhausted(result.message)
            time.sleep(self.backoff_s * 2**backoff)
        return result

    def _serve(self, job: DeviceJob) -> DeviceResult:
        """One submission of a job and its result (a runner over several devices chooses one)."""
        return self.target.result(self.target.submit(job))


def _seconds(value: float) -> str:
    """Whole seconds, but a tenth under one (`--budget 0.4` is not "a budget of 0 s")."""
    return f"{value:.1f}" if abs(value) < 1 else f"{value:.0f}"
