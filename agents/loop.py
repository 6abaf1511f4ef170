"""The acceptance loop of one `chiplore optimize` (DESIGN.md 5): per kernel, a Design Tree rooted
at the official baseline; the architect proposes whole designs first, the refiner small changes to
BEST after; each proposal is screened for free, run on the device, and judged against BEST.

All state is in the graph: a design's id is its kernel and source, its status moves
proposed -> screened_out | queued -> measured -> accepted | rejected | failed, and a run that was
killed picks up every unfinished design first (`resume`), so nothing is duplicated or lost.
"""

from __future__ import annotations

import json
import math
import statistics
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from agents.cost_model import calibration
from agents.judge import AB_REPEATS, LATE_STEP, Verdict, decide
from agents.knowledge import Knowledge, read_knowledge, rule_predicates
from agents.policies import BuiltinArchitect, BuiltinRefiner, Context, Policy, Proposal
from agents.repair import repair
from agents.runner import BudgetSpent, Runner
from agents.screener import Screener
from agents.space import FAMILIES
from chiplore.core.clock import utc_now
from chiplore.core.ids import content_sha
from chiplore.core.target import KernelSpec, Target
from kg.models import Activity, Comparison, DesignNode, Kernel, KernelVersion
from kg.repo.designs import add_design, best_of, register_kernel, root_of, set_best, source_of, update_design
from kg.repo.knowledge import record_activity
from kg.repo.nodes import Link, Ref, link
from kg.repo.progress import pooled_cycles
from kg.repo.runs import record_comparison
from kg.store import GraphStore

DEFAULT_BUDGET_S = 5400.0  # device seconds for all kernels; the stop rule usually ends far sooner
PATIENCE = 8  # proposals without an accepted change before a kernel stops
TARGET_RATIO = 1.02  # stop a kernel once BEST is this close to the bound chiplore measured
ARCHITECT_ROUND, REFINER_ROUND = 3, 2
UNFINISHED = ["proposed", "queued", "measured"]  # between proposal and decision

Event = Callable[[str, str], None]  # (kernel, message)


class KernelStopped(Exception):
    """A kernel cannot go on in this run (its baseline does not run); the others do."""


class OptimizeSummary(BaseModel):
    kernels: list[str]
    proposals: int
    accepted: int
    device_s: float
    stopped: dict[str, str]  # kernel -> why it stopped


def unfinished(store: GraphStore) -> int:
    """Designs an interrupted run left between proposal and decision."""
    rows = store.read("MATCH (d:DesignNode) WHERE d.status IN $open RETURN count(d) AS n", {"open": UNFINISHED})
    return int(rows[0]["n"]) if rows else 0


def design_id(kernel: str, sha: str) -> str:
    return content_sha(f"{kernel}|{sha}")[:24]


@dataclass
class _Kernel:
    spec: KernelSpec
    ctx: Context
    runner: Runner
    screener: Screener
    since_accept: int = 0


def optimize(store: GraphStore, target: Target, version: str, *, kernels: list[str] | None = None,
             budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, patience: int = PATIENCE,
             target_ratio: float = TARGET_RATIO,
             architect: Policy | None = None, refiner: Policy | None = None,
             on_event: Event | None = None) -> OptimizeSummary:  # fmt: skip
    specs = {spec.name: spec for spec in target.kernels() if spec.name in FAMILIES}
    chosen = kernels or list(specs)
    unknown = [k for k in chosen if k not in specs]
    if unknown:
        raise ValueError(f"no design family for {', '.join(unknown)}; known: {', '.join(specs)}")
    knowledge = read_knowledge(store, version)
    rules = rule_predicates(store, version)
    architect = architect or BuiltinArchitect()
    refiner = refiner or BuiltinRefiner()
    activity = Activity(id=f"optimize-{uuid.uuid4().hex[:12]}", role="runner", policy="builtin")
    record_activity(store, activity)
    per_kernel = budget_s / len(chosen)
    proposals = accepted = 0
    spent_total = 0.0
    stopped: dict[str, str] = {}
    say = on_event or (lambda kernel, message: None)
    for name in chosen:
        spec = specs[name]
        state = _open_kernel(store, target, spec, version, knowledge, rules, activity, per_kernel, seed)
        start_spent = state.runner.spent_s
        try:
            _root(store, state, version, say)
            _resume(store, state, version, say)
            # a resumed run keeps the schedule: whole designs only until the architect has had its round
            # (per toolchain: a new version's knowledge may open whole new designs)
            role_round = 1 if _architected(store, name, version) else 0
            state.since_accept = _count(store, name, "d.status <> 'accepted' AND d.created_at > $last",
                                        last=_last_accept(store, name))  # fmt: skip
            while True:
                policy, count = (architect, ARCHITECT_ROUND) if role_round == 0 else (refiner, REFINER_ROUND)
                batch = policy.propose(_refresh(store, state), count)
                if not batch and policy is refiner:  # nothing left next to BEST: a new whole design
                    batch = architect.propose(_refresh(store, state), 1)
                if not batch:
                    stopped[name] = getattr(policy, "why_empty", "") or "the design space is exhausted"
                    break
                role_round += 1
                for proposal in batch:
                    proposals += 1
                    if _handle(store, state, version, proposal, say):
                        accepted += 1
                        state.since_accept = 0
                    else:
                        state.since_accept += 1
                if state.since_accept >= patience:
                    stopped[name] = f"no accepted change in {state.since_accept} proposals"
                    break
                reached = _reached(store, spec, knowledge, target_ratio)
                if reached:
                    stopped[name] = reached
                    break
        except (BudgetSpent, KernelStopped) as error:
            stopped[name] = str(error)
        spent_total += state.runner.spent_s - start_spent
        say(name, f"stopped: {stopped[name]}")
    _finish(store, activity, proposals, accepted)
    return OptimizeSummary(kernels=chosen, proposals=proposals, accepted=accepted, device_s=spent_total,
                           stopped=stopped)  # fmt: skip


def _open_kernel(store: GraphStore, target: Target, spec: KernelSpec, version: str, knowledge: Knowledge,
                 rules: list, activity: Activity, budget_s: float, seed: int) -> _Kernel:  # fmt: skip
    register_kernel(store, Kernel(name=spec.name, target=target.name, weight_bytes=spec.weight_bytes,
                                  bound_cycles=spec.bound_cycles))  # fmt: skip
    rows = store.read("MATCH (l:DeviceLedger {consumer: $k}) RETURN l.device_s AS s", {"k": spec.name})
    spent = rows[0]["s"] if rows else 0.0  # earlier runs' time: this run gets `budget_s` on top
    runner = Runner(store, target, activity, budget_s=budget_s + spent, spent_s=spent)
    ctx = Context(kernel=spec.name, family=FAMILIES[spec.name], knowledge=knowledge, version=version, seed=seed)
    return _Kernel(spec, ctx, runner, Screener(store, target, version, activity, rules))


def _refresh(store: GraphStore, state: _Kernel) -> Context:
    """The policy's view after the last decision: known sources, BEST, the model's calibration."""
    ctx = state.ctx
    ctx.known = {row["sha"] for row in store.read(
        "MATCH (v:KernelVersion {kernel: $k}) RETURN v.sha AS sha", {"k": ctx.kernel})}  # fmt: skip
    best = best_of(store, ctx.kernel)
    ctx.best_params = json.loads(best.params) if best is not None and best.params else None
    ctx.best_cycles = best.measured_cycles if best is not None else None
    pairs = store.read(
        "MATCH (d:DesignNode {kernel: $k}) WHERE d.predicted_cycles IS NOT NULL AND d.measured_cycles IS NOT NULL "
        "RETURN d.predicted_cycles AS p, d.measured_cycles AS m",
        {"k": ctx.kernel},
    )
    ctx.calibration = calibration([(row["p"], row["m"]) for row in pairs])
    return ctx


def _root(store: GraphStore, state: _Kernel, version: str, say: Event) -> None:
    """The official baseline is the tree's root and the first BEST, once measured. Written for
    another toolchain, it is ported first, from the compiler's diagnostics."""
    spec, check = state.spec, state.runner.target.check
    root = root_of(store, spec.name)
    if root is not None and root.status == "accepted":
        if best_of(store, spec.name) is None:
            set_best(store, spec.name, root.id)
        return
    if root is not None:  # a root a killed or faulted run left unmeasured
        root_id = root.id
        source = source_of(store, root_id)
        sha = content_sha(source)
        update_design(store, root_id, status="queued")
    else:
        source, change = spec.baseline_source, "root"
        if not check(source, version).ok:
            fixed = repair(source, version, check)
            if fixed.ok:
                source, change = fixed.source, f"root, ported to {version}: {', '.join(fixed.changes)}"
        sha = content_sha(source)
        root_id = design_id(spec.name, sha)
        node = DesignNode(id=root_id, kernel=spec.name, role="baseline", policy="official", depth=0,
                          rationale="the vendor's official baseline", change=change, status="queued")  # fmt: skip
        add_design(store, node, version=KernelVersion(sha=sha, kernel=spec.name, source=source, toolchain=version),
                   parent=None, activity=state.runner.activity)  # fmt: skip
    outcome = state.runner.run(spec.name, sha, source, version)
    if not outcome.ok or outcome.result.median_cycles is None:
        why = f"the baseline did not run: {outcome.result.status} {outcome.result.message}".strip()
        update_design(store, root_id, status="failed", reason=why)  # recorded; the next run measures it again
        raise KernelStopped(why)
    set_best(store, spec.name, root_id, status="accepted", measured_cycles=float(outcome.result.median_cycles))
    say(spec.name, f"baseline {outcome.result.median_cycles:,} cycles")


def _resume(store: GraphStore, state: _Kernel, version: str, say: Event) -> None:
    """Finish every design a killed run left half-way, oldest first."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k})-[:HAS_VERSION]->(v:KernelVersion) "
        "WHERE d.status IN $open RETURN d AS node, v.source AS source ORDER BY d.created_at, d.id",
        {"k": state.spec.name, "open": UNFINISHED},
    )
    for row in rows:
        node = DesignNode.from_properties(row["node"])
        say(state.spec.name, f"resuming {node.id} ({node.status})")
        params = json.loads(node.params) if node.params else None
        _advance(store, state, version, node, row["source"], params, say)


def _handle(store: GraphStore, state: _Kernel, version: str, proposal: Proposal, say: Event) -> bool:
    """Add one proposal to the tree and take it as far as it goes; True when it became BEST."""
    spec = state.spec
    best = best_of(store, spec.name)
    node_id = design_id(spec.name, proposal.sha)
    if store.read("MATCH (d:DesignNode {id: $id}) RETURN d.id AS id", {"id": node_id}):
        return False  # the same source is never a new design
    parent = best if proposal.role == "refiner" and best is not None else root_of(store, spec.name)
    node = DesignNode(id=node_id, kernel=spec.name, role=proposal.role, policy=proposal.policy,
                      rationale=proposal.rationale, change=proposal.change, depth=(parent.depth + 1) if parent else 0,
                      params=proposal.params_json, predicted_cycles=proposal.predicted_cycles,
                      status="failed" if proposal.error else "proposed", reason=proposal.error[:500])  # fmt: skip
    add_design(store, node, version=KernelVersion(sha=proposal.sha, kernel=spec.name, source=proposal.source,
                                                  toolchain=version),
               parent=parent.id if parent else None, activity=state.runner.activity,
               consulted=proposal.consulted)  # fmt: skip
    link(store, [Link(Ref.to(node), "CREATED_BY", Ref("Activity", a)) for a in proposal.activities])
    if proposal.error:  # recorded, with the model's last answer as its source; the loop goes on
        say(spec.name, f"{node_id} failed: {proposal.error}")
        return False
    return _advance(store, state, version, node, proposal.source, proposal.params, say)


def _advance(store: GraphStore, state: _Kernel, version: str, node: DesignNode, source: str,
             params: dict[str, int] | None, say: Event) -> bool:  # fmt: skip
    spec, ctx = state.spec, state.ctx
    sha = content_sha(source)
    status = node.status
    if status == "proposed":
        facts = ctx.knowledge.facts
        features = ctx.family.features(params, facts) if params is not None else {}
        best = best_of(store, spec.name)
        verdict = state.screener.screen(
            node.id,
            spec.name,
            source,
            features,
            (lambda: ctx.predicted(params)) if params is not None else (lambda: None),
            best.measured_cycles if best is not None else None,
        )
        if not verdict.passed:
            update_design(store, node.id, status="screened_out", reason=f"{verdict.check}: {verdict.detail}"[:500])
            say(spec.name, f"{node.id} screened out at {verdict.check}: {verdict.detail}")
            return False
        status = "queued"
        update_design(store, node.id, status=status)
    if status == "queued":
        outcome = state.runner.run(spec.name, sha, source, version)
        result = outcome.result
        if not outcome.ok or result.median_cycles is None or (result.correctness and not result.correctness.passed):
            why = "quarantined: faults deterministically" if outcome.quarantined else result.message or result.status
            if result.correctness is not None and not result.correctness.passed:
                why = f"incorrect on the device: {result.correctness.message}"
            update_design(store, node.id, status="failed", reason=why[:500])
            say(spec.name, f"{node.id} failed: {why}")
            return False
        update_design(store, node.id, status="measured", measured_cycles=float(result.median_cycles))
        node = node.model_copy(update={"measured_cycles": float(result.median_cycles)})
        status = "measured"
    return _judge(store, state, version, node, source, say)


def _judge(store: GraphStore, state: _Kernel, version: str, node: DesignNode, source: str, say: Event) -> bool:
    spec = state.spec
    best = best_of(store, spec.name)
    assert best is not None and best.measured_cycles is not None and node.measured_cycles is not None
    incumbent_source = source_of(store, best.id)
    incumbent = {"source": incumbent_source, "sha": content_sha(incumbent_source)}  # a KernelVersion's sha is its hash
    sha = content_sha(source)

    def run_pair(index: int) -> tuple[float, float, tuple[str, ...]] | None:
        order = [(sha, source), (incumbent["sha"], incumbent["source"])]
        if index % 2:  # alternate who goes first, so drift within a pair favours neither
            order.reverse()
        medians: dict[str, float] = {}
        ids: list[str] = []
        for key, text in order:
            outcome = state.runner.run(spec.name, key, text, version, fixtures="smoke", repeats=AB_REPEATS)
            if not outcome.ok or outcome.result.median_cycles is None:
                return None
            medians[key] = float(outcome.result.median_cycles)
            ids.extend(outcome.run_ids)
        return medians[sha], medians[incumbent["sha"]], tuple(ids)

    decided = _decided(store, node.id, best.id)
    if decided is not None:  # a killed run recorded the decision but not its effect: apply it, once
        verdict = decided
    else:
        verdict = decide(node.measured_cycles, best.measured_cycles, state.ctx.knowledge.noise_sigma,
                         late=_late(store, spec.name), run_pair=run_pair)  # fmt: skip
        _record_comparison(store, state, node, best, verdict)
    # the incumbent's pairs spread its runs over time: their median is its drift-free cycle count
    update_design(store, best.id, measured_cycles=statistics.median(pooled_cycles(store, best.id, version)))
    interval = f"ratio {verdict.ratio:.3f} [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"
    if verdict.decision == "accept":
        why = f"{interval} ({verdict.method})"
        set_best(store, spec.name, node.id, status="accepted", reason=why,
                 measured_cycles=statistics.median(pooled_cycles(store, node.id, version)))  # fmt: skip
        say(spec.name, f"accepted {node.id}: {node.measured_cycles:,.0f} cycles, {why}")
        return True
    why = f"{interval} ({verdict.method}, {verdict.decision})"
    update_design(store, node.id, status="rejected", reason=why)
    say(spec.name, f"rejected {node.id}: {why}")
    return False


def _decided(store: GraphStore, candidate: str, incumbent: str) -> Verdict | None:
    rows = store.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(:DesignNode {id: $cand}) MATCH (c)-[:INCUMBENT]->(:DesignNode {id: $inc}) "
        "RETURN c AS node ORDER BY c.decided_at DESC LIMIT 1",
        {"cand": candidate, "inc": incumbent},
    )
    if not rows:
        return None
    c = Comparison.from_properties(rows[0]["node"])
    return Verdict(c.decision, c.method, c.ratio, c.ci_low, c.ci_high, c.p_value, c.pairs)


def _count(store: GraphStore, kernel: str, where: str, **params: object) -> int:
    """How many of the kernel's designs `d` match a condition."""
    query = f"MATCH (d:DesignNode {{kernel: $k}}) WHERE {where} RETURN count(d) AS n"
    rows = store.read(query, {"k": kernel, **params})
    return int(rows[0]["n"]) if rows else 0


def _architected(store: GraphStore, kernel: str, version: str) -> bool:
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k, role: 'architect'})-[:HAS_VERSION]->(:KernelVersion {toolchain: $v}) "
        "RETURN count(d) AS n",
        {"k": kernel, "v": version},
    )
    return bool(rows and rows[0]["n"])


def _last_accept(store: GraphStore, kernel: str) -> str:
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) RETURN max(d.created_at) AS last", {"k": kernel}
    )
    return (rows[0]["last"] or "") if rows else ""


def _reached(store: GraphStore, spec: KernelSpec, knowledge: Knowledge, target_ratio: float) -> str | None:
    bound = knowledge.measured_bound(spec.weight_bytes)
    best = best_of(store, spec.name)
    if bound and best is not None and best.measured_cycles and best.measured_cycles <= target_ratio * bound:
        return f"target reached: {best.measured_cycles / bound:.3f}x of the measured bound"
    return None


def _late(store: GraphStore, kernel: str) -> bool:
    """Late once the last accepted step was under LATE_STEP."""
    rows = store.read(
        "MATCH (c:Comparison {kernel: $k, decision: 'accept'}) RETURN c.ratio AS ratio ORDER BY c.decided_at DESC "
        "LIMIT 1",
        {"k": kernel},
    )
    return bool(rows) and rows[0]["ratio"] > 1 - LATE_STEP


def _record_comparison(store: GraphStore, state: _Kernel, node: DesignNode, best: DesignNode, verdict: Verdict) -> None:
    # an early look that sent the design to A/B pairs was not a decision; only the pairs' is
    decision = "inconclusive" if verdict.decision == "continue" else verdict.decision
    comparison = Comparison(
        id=content_sha(f"{node.id}|{best.id}|{verdict.method}|{verdict.pairs}|{uuid.uuid4().hex}")[:32],
        kernel=state.spec.name, ratio=verdict.ratio, ci_low=verdict.ci_low,
        ci_high=verdict.ci_high if math.isfinite(verdict.ci_high) else 1e9,
        p_value=verdict.p_value if math.isfinite(verdict.p_value) else 1.0, pairs=verdict.pairs,
        method=verdict.method, decision=decision,  # type: ignore[arg-type]
    )  # fmt: skip
    runs = list(verdict.run_ids) or _graded_runs(store, node.id) + _graded_runs(store, best.id)
    record_comparison(store, comparison, candidate=node.id, incumbent=best.id, run_ids=runs,
                      activity=state.runner.activity)  # fmt: skip


def _graded_runs(store: GraphStore, design: str) -> list[str]:
    """The graded runs behind a design's early-look median: the samples that decided it."""
    rows = store.read(
        "MATCH (:DesignNode {id: $id})-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun "
        "{fixtures: 'graded', status: 'ok'}) RETURN r.id AS id ORDER BY r.finished_at, r.id",
        {"id": design},
    )
    return [row["id"] for row in rows]


def _finish(store: GraphStore, activity: Activity, proposals: int, accepted: int) -> None:
    store.write(
        "MATCH (a:Activity {id: $id}) SET a.ended_at = $now, a.outcome = $outcome",
        {"id": activity.id, "now": utc_now(), "outcome": f"{proposals} proposals, {accepted} accepted"},
    )
