"""The loop on many devices (`optimize --workers N`): every kernel at once, and every design of a
round at once, with the same schedule, lifecycle and judge as `chiplore.agents.loop`.

Per kernel, a thread does what the sequential loop does: the baseline, the designs an earlier run
left (all at once), then rounds of proposals. A round's designs are screened on CPU workers and
measured on whichever devices are free, side by side; they are judged in the order they were
proposed (a design's comparison waits for those before it, since BEST may have changed), and the
next round is proposed once the round is decided, as the sequential loop does. A comparison's A/B
pairs hold one device. Every graph write is the driver's, under the design's lease, which the
heartbeat renews while a design waits.

The summary adds the run's calendar (simulated device-clock seconds on a simulated target), each
device's use, and when each BEST was decided on that calendar.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel

from chiplore.agents.acceptance import JudgeAgainstBest
from chiplore.agents.callbacks import Events, Note
from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.judge import Judge, SequentialJudge
from chiplore.agents.knowledge import Knowledge, read_knowledge
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import Decider
from chiplore.agents.loop import (
    ARCHITECT_ROUND,
    DEFAULT_BUDGET_S,
    PATIENCE,
    REFINER_ROUND,
    TARGET_RATIO,
    KernelState,
    KernelStopped,
    OptimizeSummary,
    choose_kernels,
    claim,
    handle_proposal,
    measure_root,
    open_kernel,
    params_of,
    refresh_view,
    target_reached,
)
from chiplore.agents.proposers import BuiltinArchitect, BuiltinRefiner, Proposer
from chiplore.agents.runner import BudgetSpent
from chiplore.agents.scale.calendar import Calendar, CalendarClosed, Turns
from chiplore.agents.scale.engine import Engine, NoDevices, Served
from chiplore.agents.scale.heartbeat import Heartbeat
from chiplore.agents.scale.pool_runner import FAILED, PoolRunner
from chiplore.agents.scale.screening import RemoteScreener
from chiplore.agents.scale.slots import DeviceSlots
from chiplore.core.clock import utc_now
from chiplore.core.pack import TargetPack
from chiplore.core.target import KernelSpec, SimulatedClock, Target
from chiplore.kg.models import Activity, DesignNode
from chiplore.kg.repo.designs import ClaimLost, architected_under, best_of, proposals_since_accept, unfinished_designs
from chiplore.kg.repo.devices import DeviceUsage, device_usage, record_device_job
from chiplore.kg.repo.knowledge import finish_activity, record_activity
from chiplore.kg.repo.runs import ledger_seconds
from chiplore.kg.store import GraphStore

STOPS = (BudgetSpent, KernelStopped, NoDevices, CalendarClosed)  # what ends a kernel's run (the others go on)


class BestAt(BaseModel):
    """A kernel's BEST as decided at `clock_s` on the run's calendar (its measured cycles then)."""

    kernel: str
    clock_s: float
    design: str
    cycles: float | None


class PoolSummary(OptimizeSummary):
    calendar_s: float  # the run's calendar at its end: the latest clock of any device
    devices: list[DeviceUsage]
    progress: list[BestAt]


@dataclass
class _Run:
    """What the kernel threads share: the graph, the engine, the devices and the run's records."""

    store: GraphStore
    target: Target
    pack: TargetPack
    version: str
    knowledge: Knowledge
    model: CalibratedCostModel
    judge: Judge
    architect: Proposer
    refiner: Proposer
    activity: Activity
    events: Events
    lease: Lease
    engine: Engine
    slots: DeviceSlots
    budget_s: float  # per kernel
    seed: int
    patience: int
    target_ratio: float
    kinds: dict[str, str]  # device -> kind
    calendar: Calendar = field(default_factory=Calendar)
    proposing: threading.Lock = field(default_factory=threading.Lock)  # one proposer call at a time
    progress: list[BestAt] = field(default_factory=list)

    def record_use(self, served: Served) -> None:
        """A job's DeviceRun is recorded: add it to its device's use in this run."""
        record_device_job(self.store, activity=self.activity.id, device=served.device, kind=self.kinds[served.device],
                          device_s=served.result.device_s, held_s=served.held_s, clock_s=served.clock_s,
                          failed=served.result.status in FAILED)  # fmt: skip

    def note_best(self, kernel: str) -> None:
        best = best_of(self.store, kernel)
        if best is not None:
            self.progress.append(BestAt(kernel=kernel, clock_s=self.calendar.now(), design=best.id,
                                        cycles=best.measured_cycles))  # fmt: skip


_turn = threading.local()  # the round and place of the design this thread works on


@dataclass
class _InTurn:
    """A kernel's decider, taken in turn: a design is judged after the designs proposed before it in
    its round, from when they were decided on the calendar. While it waits, a design compares itself
    with the round's BEST when a device is idle (side by side with theirs; never holding up a job
    that is not a guess); its turn applies that verdict if BEST is still the same, and judges it
    against the new BEST if not."""

    inner: Decider
    run: _Run
    kernel: str

    def decide(self, node: DesignNode, source: str) -> bool:
        place: tuple[Turns, int, str | None] | None = getattr(_turn, "place", None)
        if place is not None:
            turns, index, incumbent = place
            if (index > 0 and incumbent is not None and isinstance(self.inner, JudgeAgainstBest)
                    and self.run.slots.idle() > 0):  # fmt: skip
                self.inner.prejudge(node, source, incumbent)
            with self.run.calendar.blocked():
                decided_s = turns.wait(index)
            self.run.calendar.advance(decided_s)
        accepted = self.inner.decide(node, source)
        if accepted:
            self.run.note_best(self.kernel)
        return accepted


def optimize_on_devices(store: GraphStore, target: Target, version: str, engine: Engine, *,
                        kernels: list[str] | None = None, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0,
                        patience: int = PATIENCE, target_ratio: float = TARGET_RATIO,
                        architect: Proposer | None = None, refiner: Proposer | None = None,
                        judge: Judge | None = None, on_event: Note | None = None) -> PoolSummary:  # fmt: skip
    """`chiplore.agents.loop.optimize` on the engine's devices: the same arguments and stop rules."""
    specs = choose_kernels(target, kernels)
    pack = target.pack()
    devices = engine.devices()
    activity = record_activity(store, Activity(id=f"optimize-{uuid.uuid4().hex[:12]}", role="runner",
                                               policy="builtin"))  # fmt: skip
    run = _Run(store, target, pack, version, read_knowledge(store, version, pack.capabilities),
               CalibratedCostModel(pack.cost_model), judge or SequentialJudge(), architect or BuiltinArchitect(),
               refiner or BuiltinRefiner(), activity, Events([on_event] if on_event else []), Lease(), engine,
               DeviceSlots(d.id for d in devices), budget_s / len(specs), seed, patience, target_ratio,
               {d.id: d.kind for d in devices},
               calendar=Calendar(ordered=isinstance(target, SimulatedClock)))  # fmt: skip
    before = {spec.name: ledger_seconds(store, spec.name) for spec in specs}
    with Heartbeat(store, run.lease, [spec.name for spec in specs]), ThreadPoolExecutor(len(specs)) as pool:
        try:
            outcomes = list(pool.map(partial(_kernel, run), specs))
        except KeyboardInterrupt:
            run.slots.close()  # the threads stop at their next job; the leases go with this process
            run.calendar.close()
            raise
    proposals = sum(o[1] for o in outcomes)
    accepted = sum(o[2] for o in outcomes)
    stopped = {spec.name: outcome[0] for spec, outcome in zip(specs, outcomes, strict=True)}
    finish_activity(store, activity.id, utc_now(), f"{proposals} proposals, {accepted} accepted")
    used = device_usage(store, activity.id)
    return PoolSummary(kernels=[s.name for s in specs], proposals=proposals, accepted=accepted,
                       device_s=sum(ledger_seconds(store, s.name) - before[s.name] for s in specs), stopped=stopped,
                       calendar_s=max((u.clock_s for u in used), default=0.0), devices=used,
                       progress=sorted(run.progress, key=lambda b: b.clock_s))  # fmt: skip


def _kernel(run: _Run, spec: KernelSpec) -> tuple[str, int, int]:
    """One kernel's run: why it stopped, its proposals and accepted designs."""
    store, events = run.store, run.events
    state = open_kernel(store, run.target, run.pack, spec, run.version, run.knowledge, run.model, run.judge,
                        run.activity, events, run.budget_s, run.seed, run.lease,
                        make_runner=partial(PoolRunner, engine=run.engine, slots=run.slots, calendar=run.calendar,
                                            on_served=run.record_use),
                        make_screener=partial(RemoteScreener, run.engine))  # fmt: skip
    state.lifecycle.decider = _InTurn(state.lifecycle.decider, run, spec.name)
    run.calendar.join(0.0)
    proposals = accepted = 0
    stopped = ""
    try:
        measure_root(store, run.target, run.pack, state, run.version, run.activity, events)
        run.note_best(spec.name)
        _resume(run, state)
        # as the sequential loop: whole designs until the architect has had its round under this toolchain
        role_round = 1 if architected_under(store, spec.name, run.version) else 0
        state.since_accept = proposals_since_accept(store, spec.name)
        while not stopped:
            proposer, count = (run.architect, ARCHITECT_ROUND) if role_round == 0 else (run.refiner, REFINER_ROUND)
            with run.proposing:
                view = refresh_view(store, state)
                batch = proposer.propose(view, count)
                if not batch and proposer.role == "refiner":  # nothing left next to BEST: a new whole design
                    batch = run.architect.propose(refresh_view(store, state), 1)
                why = "" if batch else proposer.why_empty(view) or "the design space is exhausted"
            if not batch:
                stopped = why
                break
            role_round += 1
            jobs = [partial(handle_proposal, store, state, run.version, p, run.activity, events) for p in batch]
            best = best_of(store, spec.name)
            results = _in_round(run, jobs, incumbent=best.id if best is not None else None)
            proposals += len(results)
            for result in results:
                if isinstance(result, BaseException):
                    stopped = stopped or str(result)
                elif result:
                    accepted += 1
                    state.since_accept = 0
                else:
                    state.since_accept += 1
            if not stopped and state.since_accept >= run.patience:
                stopped = f"no accepted change in {state.since_accept} proposals"
            stopped = stopped or target_reached(store, spec, run.knowledge, run.pack, run.target_ratio) or ""
    except STOPS as error:
        stopped = str(error)
    finally:
        run.calendar.leave()
    events.note(spec.name, f"stopped: {stopped}")
    return stopped, proposals, accepted


def _resume(run: _Run, state: KernelState) -> None:
    """The designs an earlier run left half-way that no live process holds, all at once, decided
    oldest first; a live run's are left to it."""
    kernel, lease, events = state.view.kernel, state.lifecycle.lease, run.events
    jobs: list[Callable[[], bool]] = []
    for node, source in unfinished_designs(run.store, kernel):
        if not claim(run.store, node, lease):
            events.note(kernel, f"{node.id} is held by another run ({node.owner}); left to it")
            continue
        events.note(kernel, f"resuming {node.id} ({node.status})")
        jobs.append(partial(_advance, state, node, source))
    for result in _in_round(run, jobs):
        if isinstance(result, BaseException):
            raise result


def _advance(state: KernelState, node: DesignNode, source: str) -> bool:
    try:
        return state.lifecycle.advance(node, source, params_of(node))
    except ClaimLost as lost:
        state.lifecycle.events.note(state.view.kernel, f"{node.id}: {lost}")
        return False


def _in_round(run: _Run, jobs: Sequence[Callable[[], bool]], *,
              incumbent: str | None = None) -> list[bool | BaseException]:  # fmt: skip
    """Run a round's designs side by side, from this thread's place on the calendar, judged in turn
    (against `incumbent`, BEST when the round was proposed, while they wait; None: each only in its
    turn); this thread goes on from when the last was decided. A design a stop ended gives its
    exception."""
    if not jobs:
        return []
    start, turns = run.calendar.now(), Turns(len(jobs))
    places = [run.calendar.hold(start) for _ in jobs]  # held before this thread waits: no job slips ahead

    def one(index: int, job: Callable[[], bool]) -> bool:
        run.calendar.adopt(places[index])
        _turn.place = (turns, index, incumbent)
        try:
            return job()
        finally:
            _turn.place = None
            turns.end(index, run.calendar.now())
            run.calendar.leave()

    with run.calendar.blocked(), ThreadPoolExecutor(len(jobs), thread_name_prefix="chiplore-design") as pool:
        futures = [pool.submit(one, index, job) for index, job in enumerate(jobs)]
    results: list[bool | BaseException] = []
    for future in futures:
        error = future.exception()
        if error is not None and not isinstance(error, STOPS):
            raise error
        results.append(error if error is not None else future.result())
    run.calendar.advance(turns.last())
    return results
