"""`chiplore toolchain upgrade VERSION`: keep what still holds, find what no longer does, and
record the difference. Nothing is deleted; facts change status and gain links.

1. The new version becomes ACTIVE; every fact that holds only under the old one becomes `stale`.
2. Docs: the new pages are ingested; a paragraph both versions share is the same chunk, and its
   claims simply hold under the new version too.
3. Rules: the probes run again (free): confirmed, changed (SUPERSEDES), retired or new.
   The language summary is re-checked: every example of the old version's summary and every code
   block of the new docs compiled (and run on the host) under the new version; each construct that
   was renamed, added, removed, deprecated or changed in its constraints says so (SUPERSEDES).
4. Measurements: re-measured most important first (`chiplore.ingest.remeasure`), within half the
   budget before the kernels and with whatever the kernels leave after them.
5. Kernels: each kernel's baseline and BEST are re-validated under the new version
   (`chiplore.agents.revalidate`): measured again if they compile, repaired, screened and measured if not.
6. Designs that consulted a fact that changed or was retired are flagged.

Each step is idempotent and the upgrade's state lives in its Upgrade node, so a second run of the
same upgrade changes nothing and an interrupted one (Ctrl-C, kill -9) resumes where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from chiplore.agents.callbacks import RecordRuns
from chiplore.agents.knowledge import chip_refused_under, read_knowledge
from chiplore.agents.lease import Lease
from chiplore.agents.revalidate import Revalidator
from chiplore.agents.runner import BudgetExhausted, DeviceRunner
from chiplore.core.clock import utc_now
from chiplore.core.errors import ConfigError
from chiplore.core.target import KernelSpec, Target
from chiplore.ingest.docs import DocsSummary, ingest_docs
from chiplore.ingest.dsl_summary import LanguageSummary, summarise
from chiplore.ingest.librarian import BuiltinLibrarian, Librarian
from chiplore.ingest.remeasure import RecheckState, RemeasureSummary, recheck_state, remeasure
from chiplore.ingest.rules import learn_rules, reconcile_rules
from chiplore.kg.models import Activity, Revalidation, Toolchain, Upgrade
from chiplore.kg.repo.designs import (
    best_of,
    close_unfinished,
    flag_designs_consulting_changed,
    kernels_with_root,
    root_of,
)
from chiplore.kg.repo.knowledge import RUNNING, ended_if_raised, finish_activity, record_activity
from chiplore.kg.repo.language import refresh_verdicts
from chiplore.kg.repo.rules import RuleDiff, rule_diff
from chiplore.kg.repo.targets import active_toolchain, set_active_toolchain
from chiplore.kg.repo.upgrades import (
    finish_upgrade,
    get_upgrade,
    learn_device_s,
    mark_stale,
    open_upgrade,
    repairs_under,
    set_upgrade_budget,
    settle_unsaid_claims,
    upgrade_device_s,
    upgrade_to,
)
from chiplore.kg.repo.work_marks import FACTS_MARK, UPGRADE_WORK, live_optimize_runs, one_at_a_time
from chiplore.kg.store import GraphStore

BUDGET_SHARE = 0.20  # of the device time learning the old version took
# of the upgrade's budget the most important measurements may take before the kernels are re-validated:
# with many kernels in the graph, the kernels alone used to spend it all
MEASURE_FIRST_SHARE = 0.5
Event = Callable[[str], None]


class UpgradeRefused(ConfigError):
    """The upgrade cannot start (an unknown or older version, a graph with no active toolchain)."""


class UpgradeSummary(BaseModel):
    target: str
    from_version: str
    to_version: str
    already_done: bool  # this run found the upgrade finished and changed nothing
    budget_s: float
    device_s: float  # the whole upgrade's, resumed runs included
    stale: dict[str, int]  # facts of the old version stale as this run began its work (a resumed run: still), by label
    docs: DocsSummary | None
    rules: RuleDiff
    language: LanguageSummary | None = None  # the summary of the new version, with what changed
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
    refusal = _chip_refused(store, target)
    if refusal:  # the silicon changed, not the toolchain: nothing is marked or re-measured
        raise UpgradeRefused(refusal)
    finished = _validated(store, target, version)  # what is refused whatever runs beside it, first
    if finished is not None and finished.status == "done":
        return _already_done(finished, started)
    with one_at_a_time(store, FACTS_MARK, f"{UPGRADE_WORK} {version}"):  # a second upgrade, or a learn: refused
        # an optimize under way would go on under the old toolchain and record its results there (a baseline
        # measured under 0.6.0 after the move read as the 0.7.0 graph's); a later one sees the mark and waits
        live = live_optimize_runs(store)
        if live:
            raise UpgradeRefused(f"an optimize is under way on this graph (process {'; '.join(live)}): it works "
                                 "under the active toolchain; let it finish (or stop it: Ctrl-C keeps its work), "
                                 "then run the upgrade")  # fmt: skip
        state = _open(store, target, version, budget_s)
        if state.status == "done":
            return _already_done(state, started)
        # every run of one upgrade is its one activity, begun when the upgrade began (the Upgrade node keeps
        # that): a rerun's start made what the first run created read as made before its activity began
        activity = Activity(id=f"upgrade-{state.id}", role="upgrade", policy="builtin", outcome=RUNNING,
                            started_at=state.started_at)  # fmt: skip
        record_activity(store, activity)
        with ended_if_raised(store, activity.id):  # Ctrl-C, a dead store: a rerun resumes
            return _upgrade(store, target, state, activity, librarian, say, started)


def _upgrade(store: GraphStore, target: Target, state: Upgrade, activity: Activity, librarian: Librarian | None,
             say: Event, started: float) -> UpgradeSummary:  # fmt: skip
    previous, version = state.from_version, state.to_version
    set_active_toolchain(store, target.name, version)
    stale = mark_stale(store, target.name, previous, version)
    say(f"{version} is active; {sum(stale.values())} fact(s) of {previous} stale")
    librarian = librarian or BuiltinLibrarian(target.pack().doc_patterns)
    docs = ingest_docs(store, target, version, librarian)
    say(f"docs: {docs.pages} page(s) read; {docs.reused_chunks} of {docs.chunks} paragraphs unchanged since {previous}")
    settled = settle_unsaid_claims(store, target.name, previous, version)
    if settled:
        say(f"claims {version}'s docs no longer make: {settled.get('retired', 0)} retired, "
            f"{settled.get('superseded', 0)} said again elsewhere (superseded)")  # fmt: skip
    probed = learn_rules(store, target, version)
    reconcile_rules(store, target.name, previous, version)
    rules = rule_diff(store, target.name, previous, version)
    say(f"rules: {rules.confirmed} confirmed, {rules.changed} changed, {rules.retired} retired, {rules.new} new")
    language = summarise(store, target, version, previous=previous, writer=librarian,
                         structure=probed.structure)  # fmt: skip
    say(f"language: {language.entries} constructs re-checked, {len(language.changed)} changed "
        f"({', '.join(sorted(language.changed)) or 'none'})")  # fmt: skip
    # The compiler's limits first (free: the new DM capacity decides which designs still fit); then the
    # most important measurements, within a share of the budget (the cost model's inputs: left stale,
    # every design priced after the upgrade is priced on the old version's numbers); then the kernels (a
    # BEST that no longer compiles is the costliest thing an upgrade can leave); then the measurements
    # the budget still allows.
    progress = lambda probe, s: say(f"re-measured {probe} ({s:.0f} device-s)")  # noqa: E731

    def measure(budget_s: float, free_only: bool = False) -> RemeasureSummary:
        return remeasure(store, target, previous, version, budget_s=budget_s, activity=activity,
                         spent_s=upgrade_device_s(store, activity), free_only=free_only, on_probe=progress)  # fmt: skip

    measure(state.budget_s, free_only=True)
    first = measure(MEASURE_FIRST_SHARE * state.budget_s)
    closed = close_unfinished(store, previous, f"left unfinished when the toolchain moved to {version}")
    if closed:
        say(f"{closed} design(s) a budget left unfinished under {previous} closed")
    specs = {spec.name: spec for spec in target.kernels()}
    kernels, pending = _revalidate_kernels(UpgradeStep(store, target, previous, version, activity, say), specs,
                                           state.budget_s)  # fmt: skip
    measured = first.then(measure(state.budget_s))
    rechecked = recheck_state(store, target.name, previous, version)
    say(f"measurements: {len(rechecked.confirmed)} confirmed, {len(rechecked.changed)} changed "
        f"({', '.join(r.param for r in rechecked.changed) or 'none'}), {len(rechecked.stale)} still stale")  # fmt: skip
    flagged = flag_designs(store, target.name, previous, version)
    refresh_verdicts(store, version)
    summary = UpgradeSummary(
        target=target.name, from_version=previous, to_version=version, already_done=False, budget_s=state.budget_s,
        device_s=upgrade_device_s(store, activity), stale=stale, docs=docs, rules=rules, language=language,
        measurements=rechecked,
        this_run=measured, kernels=kernels, kernels_pending=pending, flagged_designs=flagged,
        wall_s=time.perf_counter() - started,
    )  # fmt: skip
    ended = utc_now()
    if not pending:  # a kernel left unchecked keeps the upgrade open: a rerun with more --budget finishes it
        finish_upgrade(store, state.id, summary.model_dump_json(), ended)
    outcome = f"{len(pending)} kernel(s) left for a rerun" if pending else "done"
    finish_activity(store, activity.id, ended, outcome)
    return summary


def _chip_refused(store: GraphStore, target: Target) -> str:
    """What optimize asks before it spends anything, asked of the facts of the version being left ("" when
    the graph has none active: `_open` refuses it)."""
    active = active_toolchain(store, target.name)
    if active is None:
        return ""
    return chip_refused_under(store, target, active)


def _already_done(state: Upgrade, started: float) -> UpgradeSummary:
    summary = UpgradeSummary.model_validate_json(state.summary)
    return summary.model_copy(update={"already_done": True, "wall_s": time.perf_counter() - started})


def _validated(store: GraphStore, target: Target, version: str) -> Upgrade | None:
    """UpgradeRefused for an upgrade to `version` that cannot be (unknown, older, no active toolchain);
    the upgrade that made `version` active when it is, else None. Reads only."""
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
        return found
    if versions.index(version) < versions.index(current):
        raise UpgradeRefused(f"{version} is older than the active {current}: chiplore upgrades, it does not downgrade")
    return None


def _open(store: GraphStore, target: Target, version: str, budget_s: float | None) -> Upgrade:
    found = _validated(store, target, version)
    if found is not None:
        return _with_budget(store, found, budget_s)
    current = active_toolchain(store, target.name)
    assert current is not None  # (_validated refused a graph with none)
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
    set_upgrade_budget(store, state.id, budget_s)
    return state.model_copy(update={"budget_s": budget_s})


def flag_designs(store: GraphStore, target: str, previous: str, version: str) -> int:
    """Designs that consulted a fact of the old version which the new one changed or retired."""
    return flag_designs_consulting_changed(store, Toolchain.id_of(target, previous), version)


@dataclass(frozen=True)
class UpgradeStep:
    """Where an upgrade step works: the graph, the target, the versions, the upgrade's activity, its notes."""

    store: GraphStore
    target: Target
    previous: str
    version: str
    activity: Activity
    say: Event


def _revalidate_kernels(step: UpgradeStep, specs: dict[str, KernelSpec],
                        budget_s: float) -> tuple[list[Revalidation], list[str]]:  # fmt: skip
    store, target, previous, version, activity, say = (step.store, step.target, step.previous, step.version,
                                                       step.activity, step.say)  # fmt: skip
    knowledge = read_knowledge(store, version, target.pack().capabilities)
    runner = DeviceRunner(target, RecordRuns(store, activity), budget_s=budget_s,
                          spent_s=upgrade_device_s(store, activity))  # fmt: skip
    out: list[Revalidation] = []
    pending: list[str] = []
    lease = Lease()
    for kernel in kernels_with_root(store):
        spec = specs.get(kernel)
        root, best = root_of(store, kernel), best_of(store, kernel)
        if spec is None or root is None:
            continue
        check = Revalidator(store, target, spec, previous, version, knowledge, runner, activity, say, lease)
        try:
            official = check.official_root(root)  # the vendor's baseline, where it now compiles, replaces a stand-in
            out.append(official or check.design(root, "baseline", is_best=best is not None and best.id == root.id))
            baseline = official.design if official is not None else root.id
            # a BEST this upgrade's own repair made (a rerun after a kill finds it there) is checked already
            if best is not None and best.id != baseline and best.id not in repairs_under(store, kernel, version):
                out.append(check.design(best, "best", is_best=True))
        except BudgetExhausted as spent:
            pending.append(kernel)
            say(f"{kernel}: not re-validated: {spent}; rerun with a larger --budget")
    return out, pending
