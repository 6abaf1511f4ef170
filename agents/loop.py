"""The acceptance loop of one `chiplore optimize`: per kernel, a Design Tree rooted at the official
baseline; the architect proposes whole designs first, the refiner small changes to BEST after; each
proposal goes through the design lifecycle (screens for free, a graded device run, the judge
against BEST).

All state is in the graph: a design's id is its kernel and source, its status moves along the
lifecycle, and a run that was killed picks up every unfinished design first (`resume`), so nothing
is duplicated or lost.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel

from chiplore.agents.acceptance import JudgeAgainstBest
from chiplore.agents.callbacks import Events, Note, RecordRuns, RecordScreenings
from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.judge import Judge, SequentialJudge
from chiplore.agents.knowledge import Knowledge, read_knowledge
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import DesignLifecycle
from chiplore.agents.proposers import BuiltinArchitect, BuiltinRefiner, DesignProposal, KernelView, Proposer
from chiplore.agents.repair import repair
from chiplore.agents.runner import BudgetSpent, DeviceRunner, RecordRun
from chiplore.agents.screens import Candidate, Screener, ScreenResult, standard_screens
from chiplore.core.clock import utc_now
from chiplore.core.errors import ConfigError
from chiplore.core.ids import content_sha
from chiplore.core.pack import Params, TargetPack
from chiplore.core.target import KernelSpec, Target
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
    root_of,
    set_best,
    source_of,
    tried,
    unfinished_designs,
    update_design,
)
from chiplore.kg.repo.knowledge import finish_activity, record_activity
from chiplore.kg.repo.nodes import Link, Ref, link
from chiplore.kg.repo.runs import graded_median, ledger_seconds
from chiplore.kg.store import GraphStore

DEFAULT_BUDGET_S = 5400.0  # device seconds for all kernels; the stop rule usually ends far sooner
PATIENCE = 8  # proposals without an accepted change before a kernel stops
TARGET_RATIO = 1.02  # stop a kernel once BEST is this close to the bound chiplore measured
ARCHITECT_ROUND, REFINER_ROUND = 3, 2


class UnknownKernel(ConfigError):
    """A kernel the target does not offer was asked for."""


class KernelStopped(Exception):
    """A kernel cannot go on in this run (its baseline does not run); the others do."""


class OptimizeSummary(BaseModel):
    kernels: list[str]
    proposals: int
    accepted: int
    device_s: float
    stopped: dict[str, str]  # kernel -> why it stopped


def design_id(kernel: str, sha: str) -> str:
    return content_sha(f"{kernel}|{sha}")[:24]


def choose_kernels(target: Target, names: list[str] | None) -> list[KernelSpec]:
    """The kernels to optimize (all the target offers by default); an unknown name is an error."""
    specs = {spec.name: spec for spec in target.kernels()}
    unknown = [name for name in names or [] if name not in specs]
    if unknown:
        raise UnknownKernel(f"unknown kernel {', '.join(unknown)}; {target.name} offers {', '.join(specs)}")
    return [specs[name] for name in names] if names else list(specs.values())


@dataclass
class KernelState:
    view: KernelView
    runner: DeviceRunner
    lifecycle: DesignLifecycle
    since_accept: int = 0


def optimize(store: GraphStore, target: Target, version: str, *, kernels: list[str] | None = None,
             budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, patience: int = PATIENCE,
             target_ratio: float = TARGET_RATIO, architect: Proposer | None = None, refiner: Proposer | None = None,
             judge: Judge | None = None, on_event: Note | None = None) -> OptimizeSummary:  # fmt: skip
    specs = choose_kernels(target, kernels)
    pack = target.pack()
    knowledge = read_knowledge(store, version, pack.capabilities)
    architect = architect or BuiltinArchitect()
    refiner = refiner or BuiltinRefiner()
    events = Events([on_event] if on_event else [])
    model = CalibratedCostModel(pack.cost_model)
    activity = record_activity(store, Activity(id=f"optimize-{uuid.uuid4().hex[:12]}", role="runner",
                                               policy="builtin"))  # fmt: skip
    lease = Lease()
    per_kernel = budget_s / len(specs)
    proposals = accepted = 0
    spent_total = 0.0
    stopped: dict[str, str] = {}
    for spec in specs:
        state = open_kernel(store, target, pack, spec, version, knowledge, model, judge or SequentialJudge(),
                             activity, events, per_kernel, seed, lease)  # fmt: skip
        start_spent = state.runner.spent_s
        try:
            measure_root(store, target, pack, state, version, activity, events)
            resume_designs(store, state, events)
            # a resumed run keeps the schedule: whole designs only until the architect has had its round
            # (per toolchain: a new version's knowledge may open whole new designs)
            role_round = 1 if architected_under(store, spec.name, version) else 0
            state.since_accept = proposals_since_accept(store, spec.name)
            while True:
                proposer, count = (architect, ARCHITECT_ROUND) if role_round == 0 else (refiner, REFINER_ROUND)
                view = refresh_view(store, state)
                events.note(spec.name, f"the {proposer.role} designs")  # a search may take a while: say so
                batch = proposer.propose(view, count)
                if not batch and proposer.role == "refiner":  # nothing left next to BEST: a new whole design
                    batch = architect.propose(refresh_view(store, state), 1)
                if not batch:
                    stopped[spec.name] = proposer.why_empty(view) or "the design space is exhausted"
                    break
                role_round += 1
                for proposal in batch:
                    proposals += 1
                    if handle_proposal(store, state, version, proposal, activity, events):
                        accepted += 1
                        state.since_accept = 0
                    else:
                        state.since_accept += 1
                if state.since_accept >= patience:
                    stopped[spec.name] = f"no accepted change in {state.since_accept} proposals"
                    break
                reached = target_reached(store, spec, knowledge, pack, target_ratio)
                if reached:
                    stopped[spec.name] = reached
                    break
        except (BudgetSpent, KernelStopped) as error:
            stopped[spec.name] = str(error)
        spent_total += state.runner.spent_s - start_spent
        events.note(spec.name, f"stopped: {stopped[spec.name]}")
    finish_activity(store, activity.id, utc_now(), f"{proposals} proposals, {accepted} accepted")
    return OptimizeSummary(kernels=[s.name for s in specs], proposals=proposals, accepted=accepted,
                           device_s=spent_total, stopped=stopped)  # fmt: skip


class RunnerFactory(Protocol):
    """Makes a kernel's runner: `DeviceRunner` itself by default (the target's one device); the loop
    on many devices (chiplore.agents.scale) passes one that runs each job on a device of a pool."""

    def __call__(self, target: Target, record: RecordRun, *, budget_s: float, spent_s: float,
                 charged: Callable[[], float]) -> DeviceRunner: ...  # fmt: skip


# A kernel's screener from its view and the screens' recording callbacks (None: the standard screens, run here)
ScreenerFactory = Callable[[KernelView, list[Callable[[str, ScreenResult], None]]], Screener]


def open_kernel(store: GraphStore, target: Target, pack: TargetPack, spec: KernelSpec, version: str,
                knowledge: Knowledge, model: CalibratedCostModel, judge: Judge, activity: Activity, events: Events,
                budget_s: float, seed: int, lease: Lease, *, make_runner: RunnerFactory = DeviceRunner,
                make_screener: ScreenerFactory | None = None) -> KernelState:  # fmt: skip
    """A kernel ready for the loop: registered, with its view, runner (its budget on top of what the
    ledger holds) and design lifecycle."""
    register_kernel(store, Kernel(name=spec.name, target=target.name, weight_bytes=spec.weight_bytes,
                                  bound_cycles=spec.bound_cycles))  # fmt: skip
    spent = ledger_seconds(store, spec.name)  # earlier runs' time: this run gets `budget_s` on top
    runner = make_runner(target, RecordRuns(store, activity), budget_s=budget_s + spent, spent_s=spent,
                         charged=lambda: ledger_seconds(store, spec.name))  # fmt: skip
    view = KernelView(spec=spec, version=version, knowledge=knowledge, space=pack.design_space(spec),
                      model=model, seed=seed)  # fmt: skip

    def candidate(node: DesignNode, source: str, params: Params | None) -> Candidate:
        features = view.space.features(params, knowledge.facts) if params is not None and view.space else {}
        best = best_of(store, spec.name)
        return Candidate(node.id, spec.name, source, features, params,
                         best.measured_cycles if best is not None else None)  # fmt: skip

    def predict(c: Candidate) -> float | None:
        return view.predicted(c.source, c.params) if c.params is not None else None

    recording: list[Callable[[str, ScreenResult], None]] = [RecordScreenings(store, activity)]
    if make_screener is not None:
        screener = make_screener(view, recording)
    else:
        screener = Screener(standard_screens(target, version, pack.compiler, knowledge.rules, predict), recording)
    decider = JudgeAgainstBest(store, spec.name, version, runner, judge, knowledge.noise_sigma, activity, events,
                               lease)  # fmt: skip
    return KernelState(view, runner, DesignLifecycle(store, spec.name, version, screener, runner, decider, candidate,
                                                     events, lease))  # fmt: skip


def refresh_view(store: GraphStore, state: KernelState) -> KernelView:
    """The proposers' view after the last decision: known sources, BEST, the model's calibration."""
    view = state.view
    view.tried = lambda shas: tried(store, view.kernel, shas)
    view.best = best_of(store, view.kernel)
    view.model.update(view.kernel, prediction_pairs(store, view.kernel))
    return view


def measure_root(store: GraphStore, target: Target, pack: TargetPack, state: KernelState, version: str,
                 activity: Activity, events: Events) -> None:  # fmt: skip
    """The official baseline is the tree's root and the first BEST, once measured. Written for
    another toolchain, it is ported first, from the compiler's diagnostics."""
    spec, lease = state.view.spec, state.lifecycle.lease
    root = root_of(store, spec.name)
    if root is not None and root.status == "accepted":
        if best_of(store, spec.name) is None:
            set_best(store, spec.name, root.id)
        return
    if root is not None:  # a root a killed or faulted run left unmeasured
        if not claim(store, root, lease):
            raise KernelStopped(f"another run ({root.owner}) is measuring the baseline")
        root_id, source = root.id, source_of(store, root.id)
        update_design(store, root_id, held_by=lease.owner, status="queued", lease_until=lease.until())
    else:
        source, change = spec.baseline_source, "root"
        if not target.check(source, version).ok:
            fixed = repair(source, version, target.check, pack.repairs)
            if fixed.ok:
                source, change = fixed.source, f"root, ported to {version}: {', '.join(fixed.changes)}"
        root_id = design_id(spec.name, content_sha(source))
        node = DesignNode(id=root_id, kernel=spec.name, role="baseline", policy="official", depth=0,
                          rationale="the vendor's official baseline", change=change, status="queued",
                          owner=lease.owner, lease_until=lease.until())  # fmt: skip
        add_design(store, node, version=KernelVersion(sha=content_sha(source), kernel=spec.name, source=source,
                                                      toolchain=version),
                   parent=None, activity=activity)  # fmt: skip
        if not holds(store, root_id, lease):
            raise KernelStopped("another run is measuring the baseline")
    recorded = graded_median(store, root_id, version)  # measured before a kill: not measured again
    if recorded is not None:
        set_best(store, spec.name, root_id, held_by=lease.owner, status="accepted", owner="", lease_until="",
                 measured_cycles=recorded)  # fmt: skip
        return
    try:
        outcome = state.runner.run(spec.name, content_sha(source), source, version)
    except BudgetSpent:
        update_design(store, root_id, held_by=lease.owner, owner="", lease_until="")
        raise
    if not outcome.ok or outcome.result.median_cycles is None:
        why = f"the baseline did not run: {outcome.result.status} {outcome.result.message}".strip()
        # recorded; the next run measures it again
        update_design(store, root_id, held_by=lease.owner, status="failed", reason=why, owner="", lease_until="")
        raise KernelStopped(why)
    set_best(store, spec.name, root_id, held_by=lease.owner, status="accepted", owner="", lease_until="",
             measured_cycles=float(outcome.result.median_cycles))  # fmt: skip
    events.note(spec.name, f"baseline {outcome.result.median_cycles:,} cycles")


def handle_proposal(store: GraphStore, state: KernelState, version: str, proposal: DesignProposal,
                    activity: Activity, events: Events) -> bool:  # fmt: skip
    """Add one proposal to the tree and take it as far as it goes; True when it became BEST."""
    kernel, lease = state.view.kernel, state.lifecycle.lease
    node_id = design_id(kernel, proposal.sha)
    if get_design(store, node_id) is not None:
        return False  # the same source is never a new design
    best = best_of(store, kernel)
    parent = best if proposal.role == "refiner" and best is not None else root_of(store, kernel)
    node = DesignNode(id=node_id, kernel=kernel, role=proposal.role, policy=proposal.policy,
                      rationale=proposal.rationale, change=proposal.change, depth=(parent.depth + 1) if parent else 0,
                      params=proposal.params_json, predicted_cycles=proposal.predicted_cycles,
                      status="failed" if proposal.error else "proposed", reason=proposal.error[:500],
                      owner="" if proposal.error else lease.owner,
                      lease_until="" if proposal.error else lease.until())  # fmt: skip
    add_design(store, node, version=KernelVersion(sha=proposal.sha, kernel=kernel, source=proposal.source,
                                                  toolchain=version),
               parent=parent.id if parent else None, activity=activity, consulted=proposal.consulted)  # fmt: skip
    link(store, [Link(Ref.to(node), "CREATED_BY", Ref("Activity", a)) for a in proposal.activities])
    if proposal.error:  # recorded, with the model's last answer as its source; the loop goes on
        events.note(kernel, f"{node_id} failed: {proposal.error}")
        return False
    if not holds(store, node_id, lease):  # another run proposed the same program a moment earlier
        return False
    try:
        return state.lifecycle.advance(node, proposal.source, proposal.params)
    except ClaimLost as lost:
        events.note(kernel, f"{node_id}: {lost}")
        return False


def resume_designs(store: GraphStore, state: KernelState, events: Events) -> None:
    """Finish the designs an earlier run left half-way (killed, or stopped by its budget): those no
    live process holds, oldest first. A live run's designs are left to it."""
    kernel, lease = state.view.kernel, state.lifecycle.lease
    for node, source in unfinished_designs(store, kernel):
        if not claim(store, node, lease):
            events.note(kernel, f"{node.id} is held by another run ({node.owner}); left to it")
            continue
        events.note(kernel, f"resuming {node.id} ({node.status})")
        try:
            state.lifecycle.advance(node, source, params_of(node))
        except ClaimLost as lost:
            events.note(kernel, f"{node.id}: {lost}")


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


def target_reached(store: GraphStore, spec: KernelSpec, knowledge: Knowledge, pack: TargetPack,
                   target_ratio: float) -> str | None:  # fmt: skip
    """Why the kernel stops when BEST is within `target_ratio` of the bound chiplore measured, else None."""
    bound = knowledge.measured_bound(spec.weight_bytes, pack.roof)
    best = best_of(store, spec.name)
    if bound and best is not None and best.measured_cycles and best.measured_cycles <= target_ratio * bound:
        return f"target reached: {best.measured_cycles / bound:.3f}x of the measured bound"
    return None
