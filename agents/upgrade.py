"""`chiplore toolchain upgrade VERSION` (DESIGN.md 6): keep what still holds, find what no longer
does, and record the difference. Nothing is deleted; facts change status and gain links.

1. The new version becomes ACTIVE; every fact that holds only under the old one becomes `stale`.
2. Docs: the new pages are ingested; a paragraph both versions share is the same chunk, and its
   claims simply hold under the new version too.
3. Rules: the probes run again (free): confirmed, changed (SUPERSEDES), retired or new.
4. Measurements: re-measured within the budget, most important first (`ingest.remeasure`).
5. Kernels: each kernel's baseline and BEST are compiled under the new version. One that compiles
   is measured again; one that does not is repaired (a family design from its knobs with the new
   knowledge, any other program from the diagnostics), screened and measured, and a repaired BEST
   stays BEST: its predecessor cannot run any more.
6. Designs that consulted a fact that changed or was retired are flagged.

Each step is idempotent and the upgrade's state lives in its Upgrade node, so a second run of the
same upgrade changes nothing and an interrupted one (Ctrl-C, kill -9) resumes where it stopped.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from pydantic import BaseModel

from agents.knowledge import Knowledge, read_knowledge, rule_predicates
from agents.loop import UNFINISHED, design_id
from agents.policies import CONSULTS, Context
from agents.repair import repair
from agents.runner import BudgetSpent, Runner
from agents.screener import Screener
from agents.space import FAMILIES
from agents.space.family import Family, Params
from chiplore.core.clock import utc_now
from chiplore.core.errors import ConfigError
from chiplore.core.ids import content_sha
from chiplore.core.target import KernelSpec, Target
from ingest.docs import DocsSummary, ingest_docs
from ingest.librarian import BuiltinLibrarian, Librarian
from ingest.remeasure import RecheckState, RemeasureSummary, recheck_state, remeasure
from ingest.rules import learn_rules, reconcile_rules
from kg.models import Activity, DesignNode, KernelVersion, Revalidation, Toolchain, Upgrade
from kg.repo.designs import add_design, best_of, root_of, set_best, source_of, update_design
from kg.repo.knowledge import record_activity
from kg.repo.progress import pooled_cycles
from kg.repo.targets import active_toolchain, set_active_toolchain
from kg.repo.upgrades import (
    finish_upgrade,
    get_upgrade,
    learn_device_s,
    mark_stale,
    open_upgrade,
    record_revalidation,
    revalidation_of,
    upgrade_device_s,
    upgrade_to,
)
from kg.store import GraphStore

BUDGET_SHARE = 0.20  # of the device time learning the old version took
Event = Callable[[str], None]


class UpgradeRefused(ConfigError):
    """The upgrade cannot start (an unknown or older version, a graph with no active toolchain)."""


class RuleDiff(BaseModel):
    confirmed: int
    changed: int
    retired: int
    new: int


class UpgradeSummary(BaseModel):
    target: str
    from_version: str
    to_version: str
    already_done: bool  # this run found the upgrade finished and changed nothing
    budget_s: float
    device_s: float  # the whole upgrade's, resumed runs included
    stale: dict[str, int]  # facts this run marked stale, by label
    docs: DocsSummary | None
    rules: RuleDiff
    measurements: RecheckState  # the whole upgrade's, resumed runs included
    this_run: RemeasureSummary | None  # the probes this run ran, skipped or lost
    kernels: list[Revalidation]
    kernels_pending: list[str]  # not re-validated: the budget ran out (the upgrade stays open)
    flagged_designs: int
    wall_s: float


def upgrade(store: GraphStore, target: Target, version: str, *, budget_s: float | None = None,
            librarian: Librarian | None = None, on_event: Event | None = None) -> UpgradeSummary:  # fmt: skip
    started = time.perf_counter()
    say = on_event or (lambda message: None)
    state = _open(store, target, version, budget_s)
    if state.status == "done":
        summary = UpgradeSummary.model_validate_json(state.summary)
        return summary.model_copy(update={"already_done": True, "wall_s": time.perf_counter() - started})
    previous = state.from_version
    activity = Activity(id=f"upgrade-{state.id}", role="upgrade", policy="builtin")
    record_activity(store, activity)  # (the Upgrade node keeps when the upgrade began)
    set_active_toolchain(store, target.name, version)
    stale = mark_stale(store, target.name, previous, version)
    say(f"{version} is active; {sum(stale.values())} fact(s) of {previous} marked stale")
    docs = ingest_docs(store, target, version, librarian or BuiltinLibrarian())
    say(f"docs: {docs.pages} page(s) read; {docs.reused_chunks} of {docs.chunks} paragraphs unchanged since {previous}")
    learn_rules(store, target, version)
    reconcile_rules(store, target.name, previous, version)
    rules = rule_diff(store, target.name, previous, version)
    say(f"rules: {rules.confirmed} confirmed, {rules.changed} changed, {rules.retired} retired, {rules.new} new")
    # The compiler's limits first (free: the new DM capacity decides which designs still fit), then
    # the kernels (a BEST that no longer compiles is the costliest thing an upgrade can leave), then
    # the measurements the device budget still allows, most important first.
    progress = lambda probe, s: say(f"re-measured {probe} ({s:.0f} device-s)")  # noqa: E731
    remeasure(store, target, previous, version, budget_s=state.budget_s, activity=activity,
              spent_s=upgrade_device_s(store, activity), free_only=True, on_probe=progress)  # fmt: skip
    closed = close_unfinished(store, previous, version)
    if closed:
        say(f"{closed} design(s) a budget left unfinished under {previous} closed")
    specs = {spec.name: spec for spec in target.kernels()}
    kernels, pending = _revalidate_kernels(store, target, specs, previous, version, state.budget_s, activity, say)
    measured = remeasure(store, target, previous, version, budget_s=state.budget_s, activity=activity,
                         spent_s=upgrade_device_s(store, activity), on_probe=progress)  # fmt: skip
    rechecked = recheck_state(store, target.name, previous, version)
    say(f"measurements: {len(rechecked.confirmed)} confirmed, {len(rechecked.changed)} changed "
        f"({', '.join(r.param for r in rechecked.changed) or 'none'}), {len(rechecked.stale)} still stale")  # fmt: skip
    flagged = flag_designs(store, target.name, previous, version)
    summary = UpgradeSummary(
        target=target.name, from_version=previous, to_version=version, already_done=False, budget_s=state.budget_s,
        device_s=upgrade_device_s(store, activity), stale=stale, docs=docs, rules=rules, measurements=rechecked,
        this_run=measured, kernels=kernels, kernels_pending=pending, flagged_designs=flagged,
        wall_s=time.perf_counter() - started,
    )  # fmt: skip
    if not pending:  # a kernel left unchecked keeps the upgrade open: a rerun with more --budget finishes it
        finish_upgrade(store, state.id, summary.model_dump_json(), utc_now())
    return summary


def _open(store: GraphStore, target: Target, version: str, budget_s: float | None) -> Upgrade:
    versions = target.toolchains()
    if version not in versions:
        raise UpgradeRefused(f"unknown toolchain {version!r}; {target.name} has {', '.join(versions)}")
    current = active_toolchain(store, target.name)
    if current is None:
        raise UpgradeRefused(f"the graph has no active toolchain for {target.name}: run `chiplore init` first")
    if current == version:  # finished, or interrupted after ACTIVE moved: the upgrade that made it active
        found = upgrade_to(store, target.name, version)
        if found is None:
            raise UpgradeRefused(f"{version} is already the active toolchain (no upgrade led to it)")
        return _with_budget(store, found, budget_s)
    if versions.index(version) < versions.index(current):
        raise UpgradeRefused(f"{version} is older than the active {current}: chiplore upgrades, it does not downgrade")
    uid = Upgrade.id_of(target.name, current, version)
    existing = get_upgrade(store, uid)
    if existing is not None:
        return _with_budget(store, existing, budget_s)
    if budget_s is None:
        budget_s = BUDGET_SHARE * learn_device_s(store, target.name, current)
    return open_upgrade(store, Upgrade(id=uid, target=target.name, from_version=current, to_version=version,
                                       budget_s=budget_s))  # fmt: skip


def _with_budget(store: GraphStore, state: Upgrade, budget_s: float | None) -> Upgrade:
    """An unfinished upgrade resumed with an explicit --budget gets that budget (a finished one is left alone)."""
    if budget_s is None or state.status == "done" or budget_s == state.budget_s:
        return state
    store.write("MATCH (u:Upgrade {id: $id}) SET u.budget_s = $b", {"id": state.id, "b": budget_s})
    return state.model_copy(update={"budget_s": budget_s})


def rule_diff(store: GraphStore, target: str, previous: str, version: str) -> RuleDiff:
    params = {"old": Toolchain.id_of(target, previous), "new": Toolchain.id_of(target, version)}

    def count(query: str) -> int:
        return int(store.read(query, params)[0]["n"])

    return RuleDiff(
        confirmed=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                        "MATCH (r)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) RETURN count(DISTINCT r) AS n"),
        changed=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) "
                      "MATCH (r)-[:SUPERSEDES]->(o:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                      "RETURN count(DISTINCT r) AS n"),
        retired=count("MATCH (r:LegalityRule {status: 'retired'})-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                      "WHERE NOT (r)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) RETURN count(DISTINCT r) AS n"),
        new=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) "
                  "WHERE NOT (r)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) AND NOT (r)-[:SUPERSEDES]->(:LegalityRule) "
                  "RETURN count(DISTINCT r) AS n"),
    )  # fmt: skip


def close_unfinished(store: GraphStore, previous: str, version: str) -> int:
    """Designs an optimize run left between proposal and decision under the old toolchain: their
    programs are the old version's, so no resumed run will judge them; they end as failed, with why."""
    rows = store.write(
        "MATCH (d:DesignNode)-[:HAS_VERSION]->(:KernelVersion {toolchain: $old}) WHERE d.status IN $open "
        "SET d.status = 'failed', d.reason = $why RETURN count(d) AS n",
        {"old": previous, "open": UNFINISHED, "why": f"left unfinished when the toolchain moved to {version}"},
    )
    return int(rows[0]["n"]) if rows else 0


def flag_designs(store: GraphStore, target: str, previous: str, version: str) -> int:
    """Designs that consulted a fact of the old version which the new one changed or retired."""
    rows = store.read(
        "MATCH (d:DesignNode)-[:CONSULTED]->(f:Fact)-[:UNDER|HOLDS_UNDER]->(:Toolchain {id: $old}) "
        "WHERE f.status IN ['superseded', 'retired'] "
        "RETURN d.id AS id, collect(DISTINCT f.fact_id) AS facts ORDER BY id",
        {"old": Toolchain.id_of(target, previous)},
    )
    for row in rows:
        facts = sorted(row["facts"])
        flag = f"{version}: {len(facts)} consulted fact(s) changed: {', '.join(facts)}"
        update_design(store, row["id"], flagged=flag)
    return len(rows)


def _kernels(store: GraphStore) -> list[str]:
    return [row["k"] for row in store.read("MATCH (k:Kernel)-[:ROOT]->(:DesignNode) RETURN k.name AS k ORDER BY k")]


def _revalidate_kernels(store: GraphStore, target: Target, specs: dict[str, KernelSpec], previous: str,
                        version: str, budget_s: float, activity: Activity, say: Event,
                        ) -> tuple[list[Revalidation], list[str]]:  # fmt: skip
    knowledge = read_knowledge(store, version)
    runner = Runner(store, target, activity, budget_s=budget_s, spent_s=upgrade_device_s(store, activity))
    screener = Screener(store, target, version, activity, rule_predicates(store, version))
    out: list[Revalidation] = []
    pending: list[str] = []
    for kernel in _kernels(store):
        spec = specs.get(kernel)
        root, best = root_of(store, kernel), best_of(store, kernel)
        if spec is None or root is None:
            continue
        check = _Revalidator(store, target, spec, previous, version, knowledge, runner, screener, activity, say)
        try:
            done = check.design(root, "baseline", is_best=best is not None and best.id == root.id)
            out.append(done)
            if best is not None and best.id != root.id:
                out.append(check.design(best, "best", is_best=True))
        except BudgetSpent as spent:
            pending.append(kernel)
            say(f"{kernel}: not re-validated: {spent}; rerun with a larger --budget")
    return out, pending


class _Revalidator:
    def __init__(self, store: GraphStore, target: Target, spec: KernelSpec, previous: str, version: str,
                 knowledge: Knowledge, runner: Runner, screener: Screener, activity: Activity,
                 say: Event) -> None:  # fmt: skip
        self.store, self.target, self.spec = store, target, spec
        self.previous, self.version, self.knowledge = previous, version, knowledge
        self.runner, self.screener, self.activity, self.say = runner, screener, activity, say

    def design(self, node: DesignNode, role: str, *, is_best: bool) -> Revalidation:
        store, kernel, version = self.store, self.spec.name, self.version
        rid = Revalidation.id_of(kernel, node.id, version)
        done = revalidation_of(store, rid)
        if done is not None:
            return done
        source = source_of(store, node.id)
        before = pooled_cycles(store, node.id, self.previous)
        base = Revalidation(id=rid, kernel=kernel, design=node.id, role=role, from_version=self.previous,  # type: ignore[arg-type]
                            to_version=version, outcome="survived",
                            cycles_before=statistics.median(before) if before else node.measured_cycles)  # fmt: skip
        errors = [d for d in self.target.check(source, version).diagnostics if d.is_error]
        if not errors:
            outcome = self.runner.run(kernel, content_sha(source), source, version)
            if not outcome.ok or outcome.result.median_cycles is None:
                found = base.model_copy(update={"outcome": "broken", "detail": f"the device: {outcome.result.message}"})
                return self._record(found, outcome.run_ids)
            cycles = float(outcome.result.median_cycles)
            if is_best:
                update_design(store, node.id, measured_cycles=statistics.median(pooled_cycles(store, node.id, version)))
            self.say(f"{kernel}: {role} {node.id} compiles under {version}: {cycles:,.0f} cycles")
            return self._record(base.model_copy(update={"cycles_after": cycles}), outcome.run_ids)
        broken = "; ".join(sorted({f"{d.code}: {d.message}" for d in errors}))[:1000]
        base = base.model_copy(update={"diagnostics": broken})
        fixed = self._repair(node, source)
        if fixed is None:
            self.say(f"{kernel}: {role} {node.id} is broken under {version} and could not be repaired")
            return self._record(base.model_copy(update={"outcome": "broken", "detail": "no repair compiles"}), ())
        new_source, change, params = fixed
        repaired = self._measure_repair(node, role, new_source, change, params, broken, is_best)
        if repaired is None:
            return self._record(base.model_copy(update={"outcome": "broken", "detail": f"the repair failed: {change}"}),
                                ())  # fmt: skip
        node_id, cycles, runs = repaired
        self.say(f"{kernel}: {role} {node.id} broke under {version}; repaired as {node_id} ({change}): "
                 f"{cycles:,.0f} cycles")  # fmt: skip
        return self._record(base.model_copy(update={"outcome": "repaired", "repaired_design": node_id,
                                                    "cycles_after": cycles, "detail": change}), runs)  # fmt: skip

    def _repair(self, node: DesignNode, source: str) -> tuple[str, str, Params | None] | None:
        """The family's program for the same knobs under the new knowledge (the nearest valid knobs
        when the old ones no longer fit), else the source rewritten from the diagnostics."""
        family = FAMILIES.get(self.spec.name)
        facts = self.knowledge.facts
        if family is not None and node.params:
            params = json.loads(node.params)
            if not family.valid(params, facts):
                params = _nearest_valid(family, params, self.knowledge)
            if params is not None:
                regenerated = family.source(params, facts, self.version)
                if self.target.check(regenerated, self.version).ok:
                    moved = {k: v for k, v in params.items() if json.loads(node.params).get(k) != v}
                    what = f"regenerated from its knobs under {self.version}" + (f", {moved}" if moved else "")
                    return regenerated, what, params
        fixed = repair(source, self.version, self.target.check)
        return (fixed.source, ", ".join(fixed.changes), None) if fixed.ok else None

    def _measure_repair(self, node: DesignNode, role: str, source: str, change: str, params: Params | None,
                        broken: str, is_best: bool) -> tuple[str, float, tuple[str, ...]] | None:  # fmt: skip
        store, kernel, version = self.store, self.spec.name, self.version
        sha = content_sha(source)
        node_id = design_id(kernel, sha)
        rows = store.read("MATCH (d:DesignNode {id: $id}) RETURN d AS node", {"id": node_id})
        if rows:  # an interrupted run added it
            repaired = DesignNode.from_properties(rows[0]["node"])
        else:
            ctx = Context(kernel=kernel, family=FAMILIES[kernel], knowledge=self.knowledge, version=version, seed=0)
            repaired = DesignNode(
                id=node_id, kernel=kernel, role="baseline" if role == "baseline" else "refiner",
                policy="builtin-repair", depth=node.depth + 1,
                rationale=f"{node.id} does not compile under {version} ({broken[:300]})",
                change=f"repair for {version}: {change}", params=json.dumps(params, sort_keys=True) if params else "",
                predicted_cycles=ctx.predicted(params) if params is not None and kernel in FAMILIES else None,
            )  # fmt: skip
            add_design(store, repaired, version=KernelVersion(sha=sha, kernel=kernel, source=source, toolchain=version),
                       parent=node.id, activity=self.activity,
                       consulted=self.knowledge.fact_ids(CONSULTS) if params is not None else ())  # fmt: skip
        if repaired.status in ("screened_out", "failed"):
            return None
        if repaired.status == "proposed":
            family = FAMILIES.get(kernel)
            features = family.features(params, self.knowledge.facts) if family and params is not None else {}
            verdict = self.screener.screen(node_id, kernel, source, features, lambda: None, None)
            if not verdict.passed:
                update_design(store, node_id, status="screened_out", reason=f"{verdict.check}: {verdict.detail}"[:500])
                return None
            update_design(store, node_id, status="queued")
        outcome = self.runner.run(kernel, sha, source, version)
        result = outcome.result
        if not outcome.ok or result.median_cycles is None or (result.correctness and not result.correctness.passed):
            update_design(store, node_id, status="failed", reason=(result.message or result.status)[:500])
            return None
        cycles = statistics.median(pooled_cycles(store, node_id, version))
        why = f"repaired {node.id} for {version}; its predecessor no longer compiles"
        if is_best:
            set_best(store, kernel, node_id, status="accepted", measured_cycles=cycles, reason=why)
        else:
            update_design(store, node_id, status="accepted", measured_cycles=cycles, reason=why)
        return node_id, float(result.median_cycles), outcome.run_ids

    def _record(self, revalidation: Revalidation, runs: tuple[str, ...] | list[str]) -> Revalidation:
        return record_revalidation(self.store, revalidation, activity=self.activity, target=self.target.name,
                                   run_ids=list(runs))  # fmt: skip


def _nearest_valid(family: Family, params: Params, knowledge: Knowledge) -> Params | None:
    """The valid setting of the family closest to `params` (fewest knobs moved, then predicted fastest)."""
    ctx = Context(kernel=family.kernel, family=family, knowledge=knowledge, version=knowledge.version, seed=0)
    best: tuple[int, float, Params] | None = None
    for p in family.points(knowledge.facts):
        moved = sum(1 for k in p if p[k] != params.get(k))
        key = (moved, ctx.predicted(p))
        if best is None or key < best[:2]:
            best = (*key, p)
    return best[2] if best else None
