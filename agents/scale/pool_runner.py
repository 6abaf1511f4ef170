"""The runner on a pool of devices: `DeviceRunner`'s budget, retries, quarantine and recording, with
each job sent to a device the slots choose. A job that faulted or timed out is retried on another
device (a fault that repeats on a second device is the design's, not the device's); an A/B
comparison holds one device for all its pairs; a job whose device's runner died is run again
elsewhere, and nothing of it was recorded."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from chiplore.agents.runner import DeviceRunner, Fixtures, Outcome, RecordRun
from chiplore.agents.scale.calendar import Calendar
from chiplore.agents.scale.engine import DeviceLost, Engine, Served
from chiplore.agents.scale.slots import DeviceSlots
from chiplore.core.target import DeviceJob, DeviceResult, Target

FAILED = ("fault", "timeout", "transient")
OnServed = Callable[[Served], None]  # told of each job served, once its DeviceRun is recorded


@dataclass(frozen=True)
class Pool:
    """What a pool's runners share: the engine, its device slots, the run's calendar, and who is told
    of each job served."""

    engine: Engine
    slots: DeviceSlots
    calendar: Calendar
    on_served: OnServed


class PoolRunner(DeviceRunner):
    """Shared by the threads of one kernel; each thread's pinned device and calendar are its own."""

    def __init__(self, target: Target, record: RecordRun, pool: Pool, *, budget_s: float, spent_s: float = 0.0,
                 charged: Callable[[], float] | None = None) -> None:  # fmt: skip
        super().__init__(target, self._record_served, budget_s=budget_s, spent_s=spent_s, charged=charged)
        self.record_run, self.on_served = record, pool.on_served
        self.engine, self.slots, self.calendar = pool.engine, pool.slots, pool.calendar
        # per thread: the device a comparison holds, where this job faulted, the job served last
        self._local = threading.local()

    def run(self, kernel: str, sha: str, source: str, version: str, *, fixtures: Fixtures = "graded",
            repeats: int = 7, finishing: bool = False) -> Outcome:  # fmt: skip
        self._local.avoid = set()
        return super().run(kernel, sha, source, version, fixtures=fixtures, repeats=repeats, finishing=finishing)

    @contextmanager
    def same_device(self) -> Iterator[None]:
        """Hold one device for the block (an A/B comparison's pairs); nested blocks share it."""
        if getattr(self._local, "pinned", None) is not None:
            yield
            return
        self.calendar.await_turn()  # taking a device for many jobs is itself due at this time
        self._local.pinned = self._take()
        try:
            yield
        finally:
            device, self._local.pinned = self._local.pinned, None
            if device is not None:
                self.slots.give_back(device, self.calendar.now())

    def _serve(self, job: DeviceJob) -> DeviceResult:
        while True:
            self.calendar.await_turn()  # on simulated devices: jobs go out in calendar order
            pinned = getattr(self._local, "pinned", None)
            device = pinned or self._take(getattr(self._local, "avoid", ()))
            try:
                served = self.engine.serve(device, job, self.calendar.now())
            except DeviceLost:
                self._lost(device, pinned=pinned is not None)
                getattr(self._local, "avoid", set()).add(device)  # this job goes elsewhere, later ones may not
                continue
            if pinned is None:
                self.slots.give_back(device, served.clock_s)
            self.calendar.advance(served.clock_s)
            if served.result.status in FAILED:
                getattr(self._local, "avoid", set()).add(device)
            self._local.served = served
            return served.result

    def _take(self, avoid: Iterable[str] = ()) -> str:
        """A device for this thread's job; while it waits for one, it holds no other job back."""
        device = self.slots.try_take(avoid)
        if device is None:
            with self.calendar.blocked():
                device = self.slots.take(avoid)
        return device

    def _record_served(self, job: DeviceJob, sha: str, result: DeviceResult) -> str:
        run_id = self.record_run(job, sha, result)
        served: Served | None = getattr(self._local, "served", None)
        if served is not None and served.result.job_id == result.job_id:
            self.on_served(replace(served, result=result))  # as recorded: with the budget's end, where it stopped it
        return run_id

    def _lost(self, device: str, *, pinned: bool) -> None:
        """The device's runner died mid-job: keep the device if it comes back, else retire it; a
        comparison moves to another device."""
        back = self.engine.alive(device)
        if pinned:
            self._local.pinned = None
            if back:
                self.slots.give_back(device, self.calendar.now())
            else:
                self.slots.retire(device)
            self._local.pinned = self._take()
        elif back:
            self.slots.give_back(device, self.calendar.now())
        else:
            self.slots.retire(device)
