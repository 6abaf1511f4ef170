"""What the loop knows of the chip, read from the graph: the measurements of a toolchain version (or,
for what an upgrade has not re-checked yet, the last value known, flagged stale), capability flags
derived from its legality rules, and the ids of the facts behind each value (a design CONSULTS them).
A fact belongs to a version by its UNDER / HOLDS_UNDER link, not by the version it was first
recorded under, so a fact an upgrade confirms keeps serving. Nothing here reads the target's
internals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kg.store import GraphStore

# Values the families fall back to when the graph has no measurement (they only size buffers).
NOISE_FALLBACK = 0.03


@dataclass(frozen=True)
class Knowledge:
    version: str
    facts: dict[str, float]
    sources: dict[str, str] = field(default_factory=dict)  # fact key -> graph fact id
    stale: frozenset[str] = frozenset()  # values an upgrade has not re-checked: the old version's

    @property
    def noise_sigma(self) -> float:
        return self.facts.get("device.noise_sigma", NOISE_FALLBACK)

    def fact_ids(self, keys: tuple[str, ...] | None = None) -> list[str]:
        chosen = self.sources if keys is None else {k: v for k, v in self.sources.items() if k in keys}
        return sorted(set(chosen.values()))

    def measured_bound(self, weight_bytes: float) -> float | None:
        """The weight-movement bound as chiplore measures it: weight bytes over the measured roof."""
        roof = self.facts.get("noc.chip_bytes_per_cycle")
        return weight_bytes / roof if roof else None


def read_knowledge(store: GraphStore, version: str) -> Knowledge:
    facts: dict[str, float] = {}
    sources: dict[str, str] = {}
    for row in store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $version}) WHERE m.status <> 'refuted' "
        "RETURN m.param AS param, m.value AS value, m.fact_id AS fact ORDER BY m.measured_at, m.id",
        {"version": version},
    ):  # the latest measurement of a parameter wins
        facts[row["param"]] = float(row["value"])
        sources[row["param"]] = row["fact"]
    stale: set[str] = set()
    for row in store.read(  # an upgrade's budget may leave some unchecked: the last value known serves, flagged
        "MATCH (now:Toolchain {version: $version}) MATCH (m:Measurement {status: 'stale'})-[:UNDER]->(t:Toolchain) "
        "WHERE t.target = now.target AND t.ordinal < now.ordinal "
        "RETURN m.param AS param, m.value AS value, m.fact_id AS fact ORDER BY t.ordinal, m.measured_at, m.id",
        {"version": version},
    ):
        if row["param"] not in facts or row["param"] in stale:
            facts[row["param"]] = float(row["value"])
            sources[row["param"]] = row["fact"]
            stale.add(row["param"])
    rules = store.read(
        "MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $version}) WHERE r.status <> 'refuted' "
        "RETURN r.key AS key, r.predicate AS predicate, r.fact_id AS fact ORDER BY r.id",
        {"version": version},
    )
    # Capabilities: a construct the compiler refused, or a stream type a contraction refused.
    refused_constructs = {row["key"].removeprefix("construct."): row["fact"] for row in rules
                          if row["key"].startswith("construct.")}  # fmt: skip
    refused_streams: dict[str, str] = {}
    for row in rules:
        if row["key"] == "contract.stream_dtype":
            for dtype in json.loads(row["predicate"]).get("value", []):
                refused_streams[dtype] = row["fact"]
    if rules:  # without rules the flags stay unknown and the families keep their defaults
        for flag, refused in (("vocab.widen", "widen" in refused_constructs),
                              ("vocab.decode", "decode" in refused_constructs),
                              ("vocab.allreduce_slices", "allreduce_slices" in refused_constructs),
                              ("vocab.reduce_clusters", "reduce_clusters" in refused_constructs),
                              ("contract.f8_stream", "f8e4m3" in refused_streams),
                              ("contract.f4_stream", "f4e2m1" in refused_streams)):  # fmt: skip
            facts[flag] = 0.0 if refused else 1.0
        for name, fact in refused_constructs.items():
            sources.setdefault(f"vocab.{name}", fact)
        for dtype, fact in refused_streams.items():
            sources.setdefault(f"contract.{dtype}", fact)
    return Knowledge(version=version, facts=facts, sources=sources, stale=frozenset(stale))


def rule_predicates(store: GraphStore, version: str) -> list[tuple[str, str, dict[str, object]]]:
    """(fact id, diagnostic code, predicate) of every rule in force: what the screener checks."""
    rows = store.read(
        "MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $version}) WHERE r.status <> 'refuted' "
        "RETURN r.fact_id AS fact, r.code AS code, r.predicate AS predicate ORDER BY r.id",
        {"version": version},
    )
    return [(row["fact"], row["code"], json.loads(row["predicate"])) for row in rows]
