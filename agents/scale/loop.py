"""The loop on many devices (`optimize --workers N`): the executor that runs every kernel at once, and
every design of a round at once, under the same schedule, lifecycle and judge as the sequential loop
(`chiplore.agents.loop.optimize` with a `PooledExecutor`).

Per kernel, a thread runs the kernel's schedule: the baseline, the designs an earlier run left (all
at once), then rounds of proposals. A round's designs are screened on CPU workers and measured on
whichever devices are free, side by side; they are judged in the order they were proposed (a
design's comparison waits for those before it, since BEST may have changed), and the next round is
proposed once the round is decided, as the sequential loop does. A comparison's A/B pairs hold one
device. Every graph write is the driver's, under the design's lease, which the heartbeat renews
while a design waits.

The summary adds the run's calendar (simulated device-clock seconds on a simulated target), each
device's use, and when each BEST was decided on that calendar.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from chiplore.agents.lifecycle import Decider
from chiplore.agents.loop import BestAt, Executor, KernelOutcome, KernelRun, OptimizeRun, OptimizeSummary, Screens
from chiplore.agents.proposers import KernelView
from chiplore.agents.runner import DeviceRunner, RecordRun
from chiplore.agents.scale.calendar import Calendar, Turns
from chiplore.agents.scale.engine import Engine, Served
from chiplore.agents.scale.pool_runner import FAILED, Pool, PoolRunner
from chiplore.agents.scale.screening import RemoteScreener
from chiplore.agents.scale.slots import DeviceSlots
from chiplore.agents.schedule import Result
from chiplore.agents.screens import CheckSetScreen, Screener, ScreenResult
from chiplore.core.errors import KernelStop
from chiplore.core.target import KernelSpec, Target
from chiplore.kg.models import BUDGET_END, DesignNode
from chiplore.kg.repo.designs import best_of
from chiplore.kg.repo.devices import device_usage, record_device_job

_turn = threading.local()  # the round and place of the design this thread works on


class PooledExecutor(Executor):
    """Runs an optimize's work on the engine's devices and CPU workers, every kernel in a thread of its
    own. One executor serves one run."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        devices = engine.devices()
        self.slots = DeviceSlots(d.id for d in devices)
        self.kinds = {d.id: d.kind for d in devices}  # device -> kind
        self.calendar = Calendar()
        self.progress: list[BestAt] = []  # each BEST as it was decided on the calendar
        self._proposing = threading.Lock()  # one proposer call at a time
        self._run: OptimizeRun | None = None

    @contextmanager
    def session(self, run: OptimizeRun, specs: Sequence[KernelSpec]) -> Iterator[None]:
        self._run = run
        # on simulated devices, jobs go out in calendar order (a conservative discrete-event order)
        self.calendar = Calendar(ordered=run.context.target.simulated_clock() is not None)
        yield

    def make_runner(self, target: Target, record: RecordRun, *, budget_s: float, spent_s: float,
                    charged: Callable[[], float]) -> DeviceRunner:  # fmt: skip
        pool = Pool(self.engine, self.slots, self.calendar, self._record_use)
        return PoolRunner(target, record, pool, budget_s=budget_s, spent_s=spent_s, charged=charged)

    def make_screener(self, view: KernelView, screens: Screens,
                      recording: list[Callable[[str, ScreenResult], None]]) -> Screener:  # fmt: skip
        # the standard screens run on a CPU worker with its own target; the check sets (they read the graph
        # for whether they are armed) and the roles' own screens run here after
        here = [s for s in screens.standard if isinstance(s, CheckSetScreen)]
        return RemoteScreener(self.engine, view, recording, local=[*here, *screens.extra])

    def decider(self, kernel: KernelRun, inner: Decider) -> Decider:
        return _InTurn(inner, self, kernel)

    def each_kernel(self, specs: Sequence[KernelSpec],
                    work: Callable[[KernelSpec], KernelOutcome]) -> list[KernelOutcome]:  # fmt: skip
        with ThreadPoolExecutor(len(specs)) as pool:
            try:
                return list(pool.map(work, specs))
            except KeyboardInterrupt:
                self.slots.close()  # the threads stop at their next job; the leases go with this process
                self.calendar.close()
                raise

    @contextmanager
    def kernel_active(self, kernel: KernelRun) -> Iterator[None]:
        self.calendar.join(0.0)
        try:
            yield
        finally:
            self.calendar.leave()

    def proposing(self) -> AbstractContextManager[None]:
        return self._proposing

    def run_round(self, kernel: KernelRun, jobs: Sequence[Callable[[], bool]],
                  incumbent: str | None) -> list[Result]:  # fmt: skip
        """The round's designs side by side, from this thread's place on the calendar, judged in turn
        (against `incumbent` while they wait; None: each only in its turn); this thread goes on from
        when the last was decided."""
        if not jobs:
            return []
        start, turns = self.calendar.now(), Turns(len(jobs))
        places = [self.calendar.hold(start) for _ in jobs]  # held before this thread waits: no job slips ahead

        def one(index: int, job: Callable[[], bool]) -> bool:
            self.calendar.adopt(places[index])
            _turn.place = (turns, index, incumbent)
            try:
                return job()
            finally:
                _turn.place = None
                turns.end(index, self.calendar.now())
                self.calendar.leave()

        with self.calendar.blocked(), ThreadPoolExecutor(len(jobs), thread_name_prefix="chiplore-design") as pool:
            futures = [pool.submit(one, index, job) for index, job in enumerate(jobs)]
        results: list[Result] = []
        for future in futures:
            error = future.exception()
            if error is not None and not isinstance(error, KernelStop):
                raise error
            results.append(error if error is not None else future.result())
        self.calendar.advance(turns.last())
        return results

    def accepted(self, kernel: KernelRun) -> None:
        """Its BEST as decided now on the calendar (the summary's progress)."""
        best = best_of(kernel.store, kernel.name)
        if best is not None:
            self.progress.append(BestAt(kernel=kernel.name, clock_s=self.calendar.now(), design=best.id,
                                        cycles=best.measured_cycles))  # fmt: skip

    def summary(self, run: OptimizeRun, summary: OptimizeSummary) -> OptimizeSummary:
        used = device_usage(run.context.store, run.activity.id)
        return summary.model_copy(update={"calendar_s": max((u.clock_s for u in used), default=0.0), "devices": used,
                                          "progress": sorted(self.progress, key=lambda b: b.clock_s)})  # fmt: skip

    def _record_use(self, served: Served) -> None:
        """A job's DeviceRun is recorded: add it to its device's use in this run."""
        assert self._run is not None
        record_device_job(self._run.context.store, activity=self._run.activity.id, device=served.device,
                          kind=self.kinds[served.device], device_s=served.result.device_s, held_s=served.held_s,
                          clock_s=served.clock_s, failed=served.result.status in FAILED
                          and BUDGET_END not in {f.code for f in served.result.faults})  # fmt: skip


@dataclass
class _InTurn(Decider):
    """A kernel's decider, taken in turn: a design is judged after the designs proposed before it in
    its round, from when they were decided on the calendar. While it waits, a design compares itself
    with the round's BEST when a device is idle (side by side with theirs; never holding up a job
    that is not a guess); its turn applies that verdict if BEST is still the same, and judges it
    against the new BEST if not."""

    inner: Decider
    executor: PooledExecutor
    kernel: KernelRun

    def decide(self, node: DesignNode, source: str) -> bool:
        place: tuple[Turns, int, str | None] | None = getattr(_turn, "place", None)
        calendar = self.executor.calendar
        if place is not None:
            turns, index, incumbent = place
            if index > 0 and incumbent is not None and self.executor.slots.idle() > 0:
                self.inner.prejudge(node, source, incumbent)
            with calendar.blocked():
                decided_s = turns.wait(index)
            calendar.advance(decided_s)
        accepted = self.inner.decide(node, source)
        if accepted:
            self.executor.accepted(self.kernel)
        return accepted
