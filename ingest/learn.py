"""`chiplore learn`: the knowledge half of the graph for one toolchain version (DESIGN.md 3-4).

Docs first (their claims are what the measurements judge), then the compiler's rules (free), then
the microbenchmarks against the device budget. Each step is idempotent, so a rerun after Ctrl-C or
a failure continues where the last one stopped, and a rerun after a complete one adds nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel

from chiplore.target import Target
from ingest.docs import DocsSummary, ingest_docs
from ingest.librarian import BuiltinLibrarian, Librarian
from ingest.measure import MeasureSummary, measure
from ingest.rules import RulesSummary, learn_rules
from kg.store import GraphStore

DEFAULT_BUDGET_S = 900.0  # fifteen device-minutes


class LearnSummary(BaseModel):
    target: str
    toolchain: str
    docs: DocsSummary
    rules: RulesSummary
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
    docs = ingest_docs(store, target, version, librarian or BuiltinLibrarian())
    rules = learn_rules(store, target, version)
    measured = measure(store, target, version, budget_s=budget_s, on_probe=on_probe)

    def count(query: str) -> int:
        return int(store.read(query, {"v": version})[0]["n"])

    claims = count("MATCH (c:Claim)-[:UNDER]->(:Toolchain {version: $v}) RETURN count(DISTINCT c) AS n")
    contradicted = count(
        "MATCH (e)-[:CONTRADICTS]->(c:Claim)-[:UNDER]->(:Toolchain {version: $v}) "
        "WHERE e:Measurement OR e:Diagnostic RETURN count(DISTINCT c) AS n"
    )
    params = count("MATCH (m:Measurement {toolchain: $v}) RETURN count(DISTINCT m.param) AS n")
    in_force = count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $v}) RETURN count(DISTINCT r) AS n")
    return LearnSummary(
        target=target.name, toolchain=version, docs=docs, rules=rules, measurements=measured,
        claims=claims, contradicted_claims=contradicted, measured_params=params, rules_in_force=in_force,
        device_s=measured.device_s,
        wall_s=time.perf_counter() - started,
    )  # fmt: skip
