"""The acceptance loop of one `chiplore optimize`: per kernel, a Design Tree rooted at the official
baseline, grown by the schedule (`chiplore.agents.schedule`); each proposal goes through the design
lifecycle (screens for free, a graded device run, the judge against BEST).

One routine (`optimize_kernel`) runs a kernel's whole schedule; an `Executor` says how its work runs:
`SequentialExecutor` (here) one kernel and one design after another, `PooledExecutor`
(`chiplore.agents.scale`) every kernel and every design of a round at once on many devices.

All state is in the graph: a design's id is its kernel and source, its status moves along the
lifecycle, and a run that was killed picks up every unfinished design first, so nothing is
duplicated or lost.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial

from pydantic import BaseModel, Field

from chiplore.agents.acceptance import JudgeAgainstBest
from chiplore.agents.budget_shares import BudgetShares
from chiplore.agents.callbacks import Events, Note, RecordRuns, RecordScreenings
from chiplore.agents.cost_model import CalibratedCostModel, GraphPredictionMemory
from chiplore.agents.heartbeat import Heartbeat
from chiplore.agents.knowledge import Knowledge, read_knowledge
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import Decider, DesignLifecycle
from chiplore.agents.proposers import DesignProposal, KernelView
from chiplore.agents.repair import repair
from chiplore.agents.runner import DeviceRunner, RecordRun
from chiplore.agents.schedule import KernelSchedule, OptimizeConfig, Result, Roles
from chiplore.agents.screens import Candidate, Screen, Screener, ScreenResult, skip_margin, standard_screens
from chiplore.core.clock import utc_now
from chiplore.core.errors import BudgetExhausted, ConfigError, KernelStop
from chiplore.core.ids import content_sha
from chiplore.core.pack import Params, TargetPack, points
from chiplore.core.target import CheckResult, KernelSpec, Target
from chiplore.ingest.chip import chip_refusal
from chiplore.kg.models import Activity, DesignNode, Kernel, KernelVersion
from chiplore.kg.repo.designs import (
    ClaimLost,
    add_design,
    architected_under,
    best_of,
    claim_design,
    get_design,
    prediction_pairs,
    proposals_since_accept,
    register_kernel,
    release_held,
    retire_root,
    root_of,
    set_best,
    source_of,
    tried,
    unfinished_designs,
    update_design,
)
from chiplore.kg.repo.devices import DeviceUsage
from chiplore.kg.repo.knowledge import RUNNING, ended_if_raised, finish_activity, record_activity
from chiplore.kg.repo.nodes import Link, Ref, link
from chiplore.kg.repo.runs import graded_median, ledger_seconds, wrong_on_check_sets
from chiplore.kg.repo.targets import active_toolchain
from chiplore.kg.repo.upgrades import best_left_unchecked
from chiplore.kg.repo.work_marks import FACTS_MARK, UPGRADE_WORK, work_under_way
from chiplore.kg.store import GraphStore

ROOT_POLL_S = 1.0  # how often a run waiting for another's baseline looks again


class UnknownKernel(ConfigError):
    """A kernel the target does not offer was asked for."""


class KernelStopped(KernelStop):
    """A kernel cannot go on in this run (its baseline does not run); the others do."""


class BestAt(BaseModel):
    """A kernel's BEST as decided at `clock_s` on the run's calendar (its measured cycles then)."""

    kernel: str
    clock_s: float
    design: str
    cycles: float | None


class OptimizeSummary(BaseModel):
    """What one optimize did. On many devices it also holds the run's calendar (simulated device-clock
    seconds on a simulated target), each device's use, and when each BEST was decided."""

    kernels: list[str]
    proposals: int
    accepted: int
    device_s: float
    repeated: int = 0  # proposals whose program a design of the tree already holds (no new design)
    stopped: dict[str, str]  # kernel -> why it stopped
    # kernels stopped before they ran anything: no baseline measured and nothing standing in, or a BEST
    # an unfinished upgrade left to re-validate (the CLI exits 1 when no kernel started)
    unstarted: list[str] = Field(default_factory=list)
    calendar_s: float | None = None  # the run's calendar at its end: the latest clock of any device
    devices: list[DeviceUsage] = Field(default_factory=list)
    progress: list[BestAt] = Field(default_factory=list)


@dataclass(frozen=True)
class OptimizeContext:
    """Where an optimize runs: the graph, the target, and the toolchain version it designs for."""

    store: GraphStore
    target: Target
    version: str


@dataclass(frozen=True)
class RootChoice:
    """A kernel's root program and how the tree records it."""

    source: str
    change: str
    policy: str
    rationale: str
    unreplaced: str = ""  # why nothing stands in for an official baseline this chip refuses


@dataclass
class OptimizeRun:
    """What every kernel of one optimize shares: the config and roles, the knowledge of the version,
    the cost model, the run's activity and lease, and who hears of its progress."""

    context: OptimizeContext
    config: OptimizeConfig
    roles: Roles
    events: Events
    pack: TargetPack = field(init=False)
    knowledge: Knowledge = field(init=False)
    model: CalibratedCostModel = field(init=False)
    activity: Activity = field(init=False)
    lease: Lease = field(default_factory=Lease)
    shares: BudgetShares = field(default_factory=lambda: BudgetShares.split(0.0, 0))
    # each kernel's device time in the ledger as the run began: its budget runs on top, and what another run
    # on the graph spends meanwhile counts against it (a kernel's start would count it as an earlier run's)
    ledger_s: dict[str, float] = field(default_factory=dict)
    active_at_start: str | None = field(init=False)  # the graph's toolchain as the run began: an upgrade moves it

    def __post_init__(self) -> None:
        store, target = self.context.store, self.context.target
        self.pack = target.pack()
        self.active_at_start = active_toolchain(store, target.name)
        self.knowledge = read_knowledge(store, self.context.version, self.pack.capabilities)
        self.model = CalibratedCostModel(self.pack.cost_model, GraphPredictionMemory(store))
        policies = sorted({getattr(role, "name", "builtin") for role in (self.roles.architect, self.roles.refiner)})
        # leased, as its designs are: an upgrade on another machine sees this run while its heartbeat beats
        self.activity = record_activity(store, Activity(id=f"optimize-{uuid.uuid4().hex[:12]}", role="runner",
                                                        policy="+".join(policies), outcome=RUNNING,
                                                        lease_until=self.lease.until()))  # fmt: skip


def design_id(kernel: str, sha: str) -> str:
    return content_sha(f"{kernel}|{sha}")[:24]


def choose_kernels(target: Target, names: Sequence[str] | None) -> list[KernelSpec]:
    """The kernels to optimize (all the target offers by default); an unknown name is an error."""
    specs = {spec.name: spec for spec in target.kernels()}
    unknown = [name for name in names or [] if name not in specs]
    if unknown:
        raise UnknownKernel(f"unknown kernel {', '.join(unknown)}; {target.name} offers {', '.join(specs)}")
    return [specs[name] for name in names] if names else list(specs.values())


class Executor:
    """How an optimize's work runs. This base runs it in this thread: one kernel after another, a
    round's designs one after another, each job on the target's device, the screens here. The loop on
    many devices (`chiplore.agents.scale.PooledExecutor`) overrides what it runs elsewhere. Each hook
    says when the loop calls it."""

    def session(self, run: OptimizeRun, specs: Sequence[KernelSpec]) -> AbstractContextManager[None]:
        """Around the whole run, once its kernels are chosen."""
        return nullcontext()

    def make_runner(self, target: Target, record: RecordRun, *, budget_s: float, spent_s: float,
                    charged: Callable[[], float]) -> DeviceRunner:  # fmt: skip
        """Each kernel's runner, when the kernel opens (its budget on top of what the ledger holds)."""
        return DeviceRunner(target, record, budget_s=budget_s, spent_s=spent_s, charged=charged)

    def make_screener(self, view: KernelView, screens: Screens,
                      recording: list[Callable[[str, ScreenResult], None]]) -> Screener:  # fmt: skip
        """Each kernel's screener, when the kernel opens: the standard screens, then the roles' own."""
        return Screener([*screens.standard, *screens.extra], recording)

    def decider(self, kernel: KernelRun, inner: Decider) -> Decider:
        """What decides a kernel's measured designs (the judge against BEST, unless wrapped)."""
        return inner

    def each_kernel(self, specs: Sequence[KernelSpec],
                    work: Callable[[KernelSpec], KernelOutcome]) -> list[KernelOutcome]:  # fmt: skip
        """Every kernel's schedule, in the order given."""
        return [work(spec) for spec in specs]

    def kernel_active(self, kernel: KernelRun) -> AbstractContextManager[None]:
        """Around one kernel's work, from its baseline to its stop."""
        return nullcontext()

    def proposing(self) -> AbstractContextManager[None]:
        """Around each call of a proposer (the loop on many devices makes them one at a time)."""
        return nullcontext()

    def run_round(self, kernel: KernelRun, jobs: Sequence[Callable[[], bool]],
                  incumbent: str | None) -> list[Result]:  # fmt: skip
        """A round's designs (or a resume's), each job taking one design as far as it goes; their
        outcomes in order. `incumbent` is BEST when the round was proposed (None for a resume). A stop
        (the budget) ends the round: its exception is the last outcome."""
        results: list[Result] = []
        for job in jobs:
            try:
                results.append(job())
            except KernelStop as stop:
                results.append(stop)
                break
        return results

    def accepted(self, kernel: KernelRun) -> None:
        """A kernel's BEST was set (its baseline measured, or a design accepted)."""

    def summary(self, run: OptimizeRun, summary: OptimizeSummary) -> OptimizeSummary:
        """The run's summary, once every kernel stopped."""
        return summary


SequentialExecutor = Executor  # the base is the sequential executor


@dataclass(frozen=True)
class Screens:
    """A kernel's screens: the standard ones (parse, rules, compile, host test, estimate) and the roles'."""

    standard: tuple[Screen, ...]
    extra: tuple[Screen, ...]


@dataclass
class KernelOutcome:
    stopped: str
    proposals: int = 0
    accepted: int = 0
    spent_s: float = 0.0
    repeated: int = 0
    started: bool = True  # whether it ran anything: a schedule, a device job, an earlier run's design


def optimize(context: OptimizeContext, config: OptimizeConfig | None = None, roles: Roles | None = None,
             on_event: Note | None = None, executor: Executor | None = None) -> OptimizeSummary:  # fmt: skip
    """Optimize the configured kernels (all the target offers by default) with the roles (the builtin
    policies by default), on the executor (this thread by default)."""
    config = config or OptimizeConfig()
    executor = executor or SequentialExecutor()
    specs = choose_kernels(context.target, config.kernels)
    run = OptimizeRun(context, config, roles or Roles(), Events([on_event] if on_event else []))
    facts = run.knowledge.facts
    mismatch = chip_refusal(context.store, context.target, facts, context.version) or _upgrading(context.store)
    if mismatch:  # every design would be refused, or recorded under a toolchain being left: say so first
        finish_activity(context.store, run.activity.id, utc_now(), f"stopped: {mismatch}")
        raise ConfigError(mismatch)
    run.shares = BudgetShares.split(config.budget_s, len(specs))
    run.ledger_s = {spec.name: ledger_seconds(context.store, spec.name) for spec in specs}
    # the heartbeat keeps this run's claims while a step outlasts a lease (a graded job on a busy host)
    # Ctrl-C, a model that never answers, a dead database: the run's record says so
    heartbeat = Heartbeat(context.store, run.lease, [s.name for s in specs], activity=run.activity.id)
    with ended_if_raised(context.store, run.activity.id), heartbeat, executor.session(run, specs):
        outcomes = executor.each_kernel(specs, partial(optimize_kernel, run, executor))
    run.model.keep()  # the predictions of the last searches, for a later run
    proposals, accepted = sum(o.proposals for o in outcomes), sum(o.accepted for o in outcomes)
    repeated = sum(o.repeated for o in outcomes)
    finish_activity(context.store, run.activity.id, utc_now(),
                    f"{proposals} proposals{f' ({repeated} repeated a design)' if repeated else ''}, "
                    f"{accepted} accepted")  # fmt: skip
    summary = OptimizeSummary(kernels=[s.name for s in specs], proposals=proposals, accepted=accepted,
                              repeated=repeated, device_s=sum(o.spent_s for o in outcomes),
                              stopped={s.name: o.stopped for s, o in zip(specs, outcomes, strict=True)},
                              unstarted=[s.name for s, o in zip(specs, outcomes, strict=True)
                                         if not o.started])  # fmt: skip
    return executor.summary(run, summary)


def _upgrading(store: GraphStore) -> str:
    """Why optimize waits for a toolchain upgrade under way on the graph ("" when none is). This run's
    activity is recorded before it asks, and the upgrade asks for live optimize runs after it marks the
    graph: of two that start together, one sees the other (another machine's run by its activity's lease;
    a kernel also checks the toolchain has not moved before its baseline)."""
    held = work_under_way(store, FACTS_MARK)
    if held is None or not held[1].startswith(UPGRADE_WORK):
        return ""
    owner, work, since = held
    return (f"a {work} is under way on this graph (process {owner}, since {since}): let it finish, then run "
            "`chiplore optimize` again (under the new toolchain)")  # fmt: skip


def optimize_kernel(run: OptimizeRun, executor: Executor, spec: KernelSpec) -> KernelOutcome:
    """One kernel's run: its baseline, the designs an earlier run left, then the schedule's rounds."""
    kernel = KernelRun(run, executor, spec)
    schedule: KernelSchedule | None = None
    start_spent = kernel.runner.spent_s
    stopped = ""
    resumed = 0  # designs an earlier run left half-way that this one accepted
    if run.knowledge.stale:
        run.events.note(spec.name, f"{len(run.knowledge.stale)} measurement(s) are not re-checked under "
                        f"{run.context.version} (an upgrade's budget ran out; `chiplore toolchain upgrade "
                        f"{run.context.version} --budget S` re-measures them): the model prices with the old "
                        "values, calibrated on the baseline's run")  # fmt: skip
    with executor.kernel_active(kernel):
        try:
            _not_moved(run)  # an upgrade another machine's run did not see: nothing recorded under the old version
            kernel.measure_root()
            executor.accepted(kernel)
            for result in executor.run_round(kernel, kernel.resume_jobs(), None):
                if isinstance(result, BaseException):
                    raise result
                resumed += result is True
            store, version = run.context.store, run.context.version
            schedule = KernelSchedule(kernel, run.roles, run.config,
                                      architected=architected_under(store, spec.name, version) > 0,
                                      since_accept=proposals_since_accept(store, spec.name))  # fmt: skip
            while True:
                _not_moved(run)  # an upgrade ran meanwhile: its designs are closed
                with executor.proposing():
                    batch = schedule.next_batch()
                if not batch:
                    break
                best = best_of(run.context.store, spec.name)
                jobs = [partial(kernel.handle, proposal) for proposal in batch]
                schedule.notify(executor.run_round(kernel, jobs, best.id if best is not None else None))
            stopped = schedule.stopped
        except KernelStop as error:
            stopped = str(error)
    run.events.note(spec.name, f"stopped: {stopped}")
    release_held(run.context.store, spec.name, run.lease.owner)  # claimed, never reached: free for the next run
    run.shares.give_back(kernel.budget_s, kernel.runner.spent_by_all() - start_spent)  # others' spending too
    accepted = resumed + (schedule.accepted if schedule else 0)
    spent = kernel.runner.spent_s - start_spent
    return KernelOutcome(stopped, schedule.proposals if schedule else 0, accepted, spent, len(kernel.repeats),
                         started=schedule is not None or resumed > 0 or spent > 0)  # fmt: skip


def _not_moved(run: OptimizeRun) -> None:
    """KernelStopped when the graph's toolchain is no longer what it was as the run began (an upgrade ran
    meanwhile; a run of another version than the active one, on a graph with no BEST yet, is not moved)."""
    moved = active_toolchain(run.context.store, run.context.target.name)
    if moved is not None and run.active_at_start is not None and moved != run.active_at_start:
        raise KernelStopped(f"the toolchain moved to {moved} under this run (an upgrade): run `chiplore optimize` "
                            f"again to go on under {moved}")  # fmt: skip


class KernelRun:
    """One kernel in one optimize: registered, with its view, runner (its budget on top of what the
    ledger holds) and design lifecycle; what the schedule reads of it between rounds."""

    def __init__(self, run: OptimizeRun, executor: Executor, spec: KernelSpec) -> None:
        store, target, version = run.context.store, run.context.target, run.context.version
        self.run, self.spec = run, spec
        self.repeats: list[str] = []  # designs a proposal's program repeated (appended from the round's threads)
        register_kernel(store, Kernel(name=spec.name, target=target.name, weight_bytes=spec.weight_bytes,
                                      bound_cycles=spec.bound_cycles))  # fmt: skip
        spent = run.ledger_s[spec.name]  # earlier runs' time (as the run began): this run gets its budget on top
        self.budget_s = run.shares.take()
        self.runner = executor.make_runner(target, RecordRuns(store, run.activity),
                                           budget_s=self.budget_s + spent, spent_s=spent,
                                           charged=lambda: ledger_seconds(store, spec.name))  # fmt: skip
        space = run.pack.design_space(spec, run.knowledge.facts)
        no_space = "" if space is not None else run.pack.no_space_reason(spec, run.knowledge.facts)
        self._view = KernelView(spec=spec, version=version, knowledge=run.knowledge, space=space, model=run.model,
                                seed=run.config.seed, no_space=no_space,
                                note=lambda text: run.events.note(spec.name, text))  # fmt: skip
        screens = Screens(tuple(standard_screens(target, version, run.pack.compiler, run.knowledge.rules,
                                                 self._predict, spec.check_sets,
                                                 lambda: wrong_on_check_sets(store, spec.name))),
                          run.roles.screens)  # fmt: skip
        screener = executor.make_screener(self._view, screens, [RecordScreenings(store, run.activity)])
        judge = JudgeAgainstBest(store, spec.name, version, self.runner, run.roles.judge, run.knowledge.noise_sigma,
                                 run.activity, run.events, run.lease, spec.check_sets)  # fmt: skip
        self.lifecycle = DesignLifecycle(store, spec.name, version, screener, self.runner, judge, self._candidate,
                                         run.events, run.lease)  # fmt: skip
        self.lifecycle.decider = executor.decider(self, judge)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def store(self) -> GraphStore:
        return self.run.context.store

    # ---- what the schedule reads (chiplore.agents.schedule.KernelProgress) ----------------------------

    def view(self) -> KernelView:
        """The proposers' view after the last decision: known sources, BEST, the model's calibration."""
        view = self._view
        view.tried = lambda shas: tried(self.store, self.name, shas)
        view.best = best = best_of(self.store, self.name)
        view.architect_designs = architected_under(self.store, self.name, self.run.context.version)
        self._calibrate(best)
        return view

    def _calibrate(self, best: DesignNode | None) -> None:
        """The model's calibration for this kernel from its run designs and BEST (priced under today's facts)."""
        at_best = None
        if best is not None and best.measured_cycles:
            raw = self._model_cycles(source_of(self.store, best.id), params_of(best))
            at_best = (raw, best.measured_cycles) if raw else None
        self._view.model.update(self.name, prediction_pairs(self.store, self.name), at_best)

    def ratio_to_bound(self) -> float | None:
        bound = self.run.knowledge.measured_bound(self.spec.weight_bytes, self.run.pack.roof)
        best = best_of(self.store, self.name)
        if not bound or best is None or not best.measured_cycles:
            return None
        return best.measured_cycles / bound

    def designing(self, role: str) -> None:
        self.run.events.note(self.name, f"the {role} designs")

    # ---- the screens' view of a design ---------------------------------------------------------------

    def _candidate(self, node: DesignNode, source: str, params: Params | None) -> Candidate:
        space, facts = self._view.space, self.run.knowledge.facts
        features = space.features(params, facts) if params is not None and space else {}
        best = best_of(self.store, self.name)
        self._calibrate(best)  # BEST may have changed since the round was proposed: price against today's
        return Candidate(node.id, self.name, source, features, params,
                         best.measured_cycles if best is not None else None,
                         margin=skip_margin(self._view.model.errors.get(self.name)))  # fmt: skip

    def _stand_in(self, checked: CheckResult) -> RootChoice | str:
        """The design space's first design, where the official baseline cannot be compiled for this
        chip nor ported (written for another shape, say), as the root, or why nothing
        stands in (no space, no valid design). The speedups are then against it, and the tree says so."""
        space, facts, version = self._view.space, self.run.knowledge.facts, self.run.context.version
        why = next((f"{d.code}: {d.message}" for d in checked.diagnostics if d.is_error), "it does not compile")
        # a large space that holds no valid design is walked whole (40 s for 270,904 settings): the progress
        # line says so, not the previous kernel's "stopped"
        self.run.events.note(self.name, "the official baseline does not compile here: looking for a design to stand in")
        first = next(points(space, facts), None) if space is not None else None
        if space is None or first is None:
            # the kernel ends here: say why in one line, the space's own refusals where it gives them
            empty = getattr(space, "why_empty", None)
            reason = "the target pack has no design space for it" + (f" ({self._view.no_space})"
                                                                      if self._view.no_space else "")  # fmt: skip
            if space is not None:
                reason = (empty(facts) if callable(empty) else "") or "its design space has no valid design"
            nothing = f"the official baseline does not compile here ({why}), and nothing stands in for it: {reason}"
            self.run.events.note(self.name, nothing)
            return nothing
        source = space.source(first, facts, version)
        if not self.run.context.target.check(source, version).ok:  # the space is not for this chip either
            nothing = f"the official baseline does not compile here ({why}), nor does the design space's first design"
            self.run.events.note(self.name, nothing)
            return nothing
        self.run.events.note(self.name, f"the official baseline does not compile here ({why}): the design "
                             "space's first design stands in for it")  # fmt: skip
        return RootChoice(
            source,
            f"root, generated: the official baseline does not compile ({why})",
            "generated",
            f"the design space's first design, standing in for an official baseline this chip refuses ({why})",
        )

    def _predict(self, candidate: Candidate) -> float | None:
        # a program written whole (an LLM's) is priced from its text like a design of the space
        return self._view.predicted(candidate.source, candidate.params)

    def _model_cycles(self, source: str, params: Params | None = None) -> float | None:
        """The pack's own price of a program, before the kernel's calibration: recorded on its design so
        that the calibration is fitted on the model's error (None: the model cannot price it)."""
        view = self._view
        return view.model.raw(self.name, source, params, view.knowledge.facts)

    def _with_bottleneck(self, rationale: str, source: str) -> str:
        """A rationale with what bounds the program by the pack's model (status says it of a BEST far
        from its bound, and the root is the BEST of a kernel nothing beats)."""
        return "; ".join(filter(None, (rationale, self._view.bottleneck(source, None))))

    # ---- the baseline, resumed designs, proposals -------------------------------------------------

    def _root_choice(self) -> RootChoice:
        """What the tree's root is on this chip and toolchain: the official baseline, ported when it was
        written for another toolchain, else the design space's first design standing in for it."""
        target, version = self.run.context.target, self.run.context.version
        source = self.spec.baseline_source
        checked = target.check(source, version)
        if checked.ok:
            return RootChoice(source, "root", "official", "the vendor's official baseline")
        fixed = repair(source, version, target.check, self.run.pack.repairs)
        if fixed.ok:
            return RootChoice(fixed.source, f"root, ported to {version}: {', '.join(fixed.changes)}", "official",
                              "the vendor's official baseline")  # fmt: skip
        stand_in = self._stand_in(checked)
        if isinstance(stand_in, RootChoice):
            return stand_in
        return RootChoice(source, "root", "official", f"the vendor's official baseline; {stand_in}", stand_in)

    def measure_root(self) -> None:
        """The official baseline is the tree's root and the first BEST, once measured. Written for
        another toolchain, it is ported first, from the compiler's diagnostics."""
        store, version = self.store, self.run.context.version
        spec, lease = self.spec, self.run.lease
        root = self._root_measured_or_free()
        unreplaced = ""  # why nothing stands in for a baseline this chip refuses
        if (older := best_left_unchecked(store, spec.name, version)) is not None:
            raise KernelStopped(f"its BEST is a {older} program that the upgrade to {version} has not re-validated "
                                f"yet (its budget ran out, or it was stopped): `chiplore toolchain upgrade {version} "
                                "--budget S` finishes it")  # fmt: skip
        if root is not None and root.status == "accepted":
            if best_of(store, spec.name) is None:
                set_best(store, spec.name, root.id)
            return
        superseded, choice = None, None
        if root is not None and root.status == "failed":
            # A root an earlier run could not compile gives way to what stands in for it now (the pack, the
            # learnt shape or chiplore changed since); a root that faulted on the device is measured again.
            choice = self._root_choice()
            if content_sha(choice.source) != content_sha(source_of(store, root.id)):
                retire_root(store, spec.name, root.id, held_by=lease.owner)
                self.run.events.note(spec.name, f"the root {root.id[:10]} ({root.reason}) gives way to a new one")
                superseded, root = root.id, None
            unreplaced = choice.unreplaced
        if root is not None:  # a root a killed or faulted run left unmeasured
            root_id, source = root.id, source_of(store, root.id)
            update_design(store, root_id, held_by=lease.owner, status="queued", lease_until=lease.until())
        else:
            choice = choice or self._root_choice()
            source, unreplaced = choice.source, choice.unreplaced
            root_id = design_id(spec.name, content_sha(source))
            # the baseline's price calibrates the model from the first device run on: a model whose
            # facts are off for this kernel (stale after an upgrade, say) does not screen out every design
            node = DesignNode(id=root_id, kernel=spec.name, role="baseline", policy=choice.policy, depth=0,
                              rationale=self._with_bottleneck(choice.rationale, source), change=choice.change,
                              status="queued", model_cycles=self._model_cycles(source),
                              owner=lease.owner, lease_until=lease.until())  # fmt: skip
            add_design(store, node, version=KernelVersion(sha=content_sha(source), kernel=spec.name, source=source,
                                                          toolchain=version),
                       parent=None, activity=self.run.activity)  # fmt: skip
            if superseded is not None:
                link(store, [Link(Ref("DesignNode", root_id), "SUPERSEDES", Ref("DesignNode", superseded))])
            if not holds(store, root_id, lease):  # another run added it a moment earlier: it measures it
                self.measure_root()
                return
        if unreplaced:  # a baseline this chip refuses, nothing to stand in: the device would only refuse it too
            update_design(store, root_id, held_by=lease.owner, status="failed", reason=unreplaced, owner="",
                          lease_until="")  # fmt: skip
            raise KernelStopped(unreplaced)
        recorded = graded_median(store, root_id, version)  # measured before a kill: not measured again
        if recorded is not None:
            set_best(store, spec.name, root_id, held_by=lease.owner, status="accepted", owner="", lease_until="",
                     measured_cycles=recorded)  # fmt: skip
            return
        try:
            outcome = self.runner.run(spec.name, content_sha(source), source, version)
        except BudgetExhausted:
            update_design(store, root_id, held_by=lease.owner, owner="", lease_until="")
            raise
        if not outcome.ok or outcome.result.median_cycles is None:
            why = f"the baseline did not run: {outcome.result.status} {outcome.result.message}".strip()
            # recorded; the next run measures it again
            update_design(store, root_id, held_by=lease.owner, status="failed", reason=why, owner="", lease_until="")
            raise KernelStopped(why)
        try:
            set_best(store, spec.name, root_id, held_by=lease.owner, status="accepted", owner="", lease_until="",
                     measured_cycles=float(outcome.result.median_cycles))  # fmt: skip
        except ClaimLost:  # another run took the baseline over (this run's lease ran out): join its work
            self.run.events.note(spec.name, "another run took over the baseline's measurement: joining it")
            self.measure_root()
            return
        self.run.events.note(spec.name, f"baseline {outcome.result.median_cycles:,} cycles")

    def _root_measured_or_free(self) -> DesignNode | None:
        """The kernel's root once it is measured or this run holds it (None: no root yet). While another
        live run measures it, this run waits and then joins the work from its BEST."""
        store, lease, said = self.store, self.run.lease, False
        while True:
            root = root_of(store, self.name)
            if root is None or root.status == "accepted" or claim(store, root, lease):
                return root
            if not said:
                self.run.events.note(self.name, f"waiting for another run ({root.owner}) to measure the baseline")
                said = True
            time.sleep(ROOT_POLL_S)

    def resume_jobs(self) -> list[Callable[[], bool]]:
        """The designs an earlier run left half-way (killed, or stopped by its budget) that no live
        process holds, oldest first, each claimed for this run; a live run's are left to it."""
        jobs: list[Callable[[], bool]] = []
        for node, source in unfinished_designs(self.store, self.name):
            if not claim(self.store, node, self.run.lease):
                self.run.events.note(self.name, f"{node.id} is held by another run ({node.owner}); left to it")
                continue
            self.run.events.note(self.name, f"resuming {node.id} ({node.status})")
            jobs.append(partial(self._advance, node, source))
        return jobs

    def _advance(self, node: DesignNode, source: str) -> bool:
        try:
            return self.lifecycle.advance(node, source, params_of(node))
        except ClaimLost as lost:
            self.run.events.note(self.name, f"{node.id}: {lost}")
            return False

    def handle(self, proposal: DesignProposal) -> bool:
        """Add one proposal to the tree and take it as far as it goes; True when it became BEST."""
        store, lease, kernel = self.store, self.run.lease, self.name
        node_id = design_id(kernel, proposal.sha)
        if get_design(store, node_id) is not None:  # the same source is never a new design
            self._repeated(proposal, node_id)
            return False
        best = best_of(store, kernel)
        parent = best if proposal.role == "refiner" and best is not None else root_of(store, kernel)
        node = DesignNode(id=node_id, kernel=kernel, role=proposal.role, policy=proposal.policy,
                          rationale=proposal.rationale, change=proposal.change,
                          depth=(parent.depth + 1) if parent else 0, params=proposal.params_json,
                          predicted_cycles=proposal.predicted_cycles,
                          model_cycles=None if proposal.error else self._model_cycles(proposal.source, proposal.params),
                          status="failed" if proposal.error else "proposed", reason=proposal.error[:500],
                          owner="" if proposal.error else lease.owner,
                          lease_until="" if proposal.error else lease.until())  # fmt: skip
        add_design(store, node, version=KernelVersion(sha=proposal.sha, kernel=kernel, source=proposal.source,
                                                      toolchain=self.run.context.version),
                   parent=parent.id if parent else None, activity=self.run.activity,
                   consulted=proposal.consulted)  # fmt: skip
        link(store, [Link(Ref.to(node), "CREATED_BY", Ref("Activity", a)) for a in proposal.activities])
        if proposal.error:  # recorded, with the model's last answer as its source; the loop goes on
            self.run.events.note(kernel, f"{node_id} failed: {proposal.error}")
            return False
        if not holds(store, node_id, lease):  # another run proposed the same program a moment earlier
            self._repeated(proposal, node_id)
            return False
        try:
            return self.lifecycle.advance(node, proposal.source, proposal.params)
        except ClaimLost as lost:
            self.run.events.note(kernel, f"{node_id}: {lost}")
            return False

    def _repeated(self, proposal: DesignProposal, node_id: str) -> None:
        """A proposal whose program is a design's already: counted and said, so "N proposals" is not
        read as N designs (the builtin roles never repeat one; a model may)."""
        self.repeats.append(node_id)
        self.run.events.note(self.name, f"the {proposal.role}'s proposal is the program of {node_id}, "
                             "a design the tree holds: no new design")  # fmt: skip


def claim(store: GraphStore, node: DesignNode, lease: Lease) -> bool:
    """Hold a design: it is ours already, or free, or its owner's lease is over (compare-and-set)."""
    if node.owner == lease.owner:
        return True
    return lease.may_take(node.owner, node.lease_until) and claim_design(
        store, node.id, lease.owner, lease.until(), held_by=node.owner, held_until=node.lease_until
    )


def holds(store: GraphStore, design: str, lease: Lease) -> bool:
    found = get_design(store, design)
    return found is not None and found.owner == lease.owner


def params_of(node: DesignNode) -> Params | None:
    return json.loads(node.params) if node.params else None
