"""`chiplore learn`: the knowledge half of the graph for one toolchain version.

Docs first (their claims are what the measurements judge), then the compiler's rules (free), then
the checked summary of the language (free: the docs' examples compiled and run on the host; written
by the librarian when it can write one), then the microbenchmarks against the device budget. After
a toolchain upgrade, learning the new version first finishes the upgrade's re-measurement (each
stale measurement confirmed or superseded, never measured twice), then measures what was never
measured. Each step is idempotent, so a rerun after Ctrl-C or a failure continues where the last one
stopped, and a rerun after a complete one adds nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.target import Target
from chiplore.ingest.chip import bind_chip
from chiplore.ingest.docs import DocsSummary, ingest_docs
from chiplore.ingest.dsl_summary import LanguageSummary, summarise
from chiplore.ingest.librarian import BuiltinLibrarian, Librarian
from chiplore.ingest.measure import MeasureSummary, measure
from chiplore.ingest.probe_loop import probe_outcome
from chiplore.ingest.remeasure import remeasure
from chiplore.ingest.rules import RulesSummary, learn_rules
from chiplore.kg.models import Activity
from chiplore.kg.repo.knowledge import ended_if_raised, finish_activity, learnt_counts
from chiplore.kg.repo.language import refresh_verdicts
from chiplore.kg.repo.upgrades import upgrade_to
from chiplore.kg.repo.work_marks import FACTS_MARK, one_at_a_time
from chiplore.kg.store import GraphStore

DEFAULT_BUDGET_S = 900.0  # fifteen device-minutes


class LearnSummary(BaseModel):
    target: str
    toolchain: str
    docs: DocsSummary
    rules: RulesSummary
    language: LanguageSummary
    measurements: MeasureSummary
    claims: int  # in the graph under this version
    contradicted_claims: int  # by a measurement or by the compiler
    measured_params: int
    rules_in_force: int
    device_s: float  # spent by this run
    wall_s: float


def learn(store: GraphStore, target: Target, version: str, *, budget_s: float = DEFAULT_BUDGET_S,
          librarian: Librarian | None = None, on_probe: Callable[[str, float], None] | None = None,
          ) -> LearnSummary:  # fmt: skip
    started = time.perf_counter()
    with one_at_a_time(store, FACTS_MARK, f"learn {version}"):  # a second learn, or an upgrade: refused
        return _learn(store, target, version, budget_s, librarian, on_probe, started)


def _learn(store: GraphStore, target: Target, version: str, budget_s: float, librarian: Librarian | None,
           on_probe: Callable[[str, float], None] | None, started: float) -> LearnSummary:  # fmt: skip
    bind_chip(store, target)  # before anything is recorded: a graph of another chip is refused whole
    librarian = librarian or BuiltinLibrarian(target.pack().doc_patterns)
    docs = ingest_docs(store, target, version, librarian)
    rules = learn_rules(store, target, version)
    language = summarise(store, target, version, writer=librarian, structure=rules.structure)
    spent, rerun = 0.0, []
    refailed: dict[str, str] = {}  # the re-checks that failed, and why
    upgraded = upgrade_to(store, target.name, version)
    if upgraded is not None:
        activity = Activity(id=f"runner-{uuid.uuid4().hex[:12]}", role="runner", policy="builtin")
        with ended_if_raised(store, activity.id):  # (recorded at its first job: none before, nothing to end)
            rechecked = remeasure(store, target, upgraded.from_version, version, budget_s=budget_s,
                                  activity=activity, on_probe=on_probe)  # fmt: skip
        spent, rerun = rechecked.device_s, rechecked.probes_run
        refailed = {p: rechecked.failure_reasons.get(p, "") for p in rechecked.probes_failed}
        # the re-checks' runner activity ends here (it stayed `running` after a clean exit)
        finish_activity(store, activity.id, utc_now(), probe_outcome(refailed))
    measured = measure(store, target, version, budget_s=budget_s - spent, on_probe=on_probe)
    # A re-check that failed is a failure of this run unless the measuring after it ran the probe again.
    still = {p: why for p, why in refailed.items() if p not in measured.probes_measured + measured.probes_failed}
    measured = measured.model_copy(update={
        "device_s": measured.device_s + spent, "probes_run": measured.probes_run + len(rerun),
        "probes_skipped": [p for p in measured.probes_skipped if p not in rerun + list(still)],
        "probes_failed": list(still) + measured.probes_failed,
        "failure_reasons": {p: why for p, why in still.items() if why} | measured.failure_reasons})  # fmt: skip

    refresh_verdicts(store, version)
    counts = learnt_counts(store, version)
    return LearnSummary(
        target=target.name, toolchain=version, docs=docs, rules=rules, language=language, measurements=measured,
        claims=counts["claims"], contradicted_claims=counts["contradicted_claims"],
        measured_params=counts["measured_params"], rules_in_force=counts["rules_in_force"],
        device_s=measured.device_s,
        wall_s=time.perf_counter() - started,
    )  # fmt: skip
