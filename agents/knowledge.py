"""What the loop knows of the chip, read from the graph: the measurements of a toolchain version (or,
for what an upgrade has not re-checked yet, the last value known, flagged stale), the capability
flags the target pack derives from the legality rules, and the ids of the facts behind each value
(a design CONSULTS them). A fact belongs to a version by its UNDER / HOLDS_UNDER link, not by the
version it was first recorded under, so a fact an upgrade confirms keeps serving. Nothing here
reads a target's internals: the pack says which rules decide which capability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from chiplore import queries as named_queries
from chiplore.core.pack import Capability, Facts
from chiplore.core.params import NOISE_SIGMA, ParamKey
from chiplore.core.rules import NotIn, Predicate, predicate_of
from chiplore.core.target import Target
from chiplore.ingest.chip import chip_refusal
from chiplore.kg.repo.measurements import measurements_under, stale_values
from chiplore.kg.schema import fact_id
from chiplore.kg.store import GraphStore


@dataclass(frozen=True)
class Rule:
    """A legality rule in force: its fact id, diagnostic code and machine-checkable predicate."""

    fact: str
    code: str
    predicate: Predicate


@dataclass(frozen=True)
class Knowledge:
    version: str
    facts: Facts
    sources: dict[str, str] = field(default_factory=dict)  # fact key -> graph fact id
    stale: frozenset[str] = frozenset()  # values an upgrade has not re-checked: the old version's
    rules: tuple[Rule, ...] = ()

    @property
    def noise_sigma(self) -> float:
        default = NOISE_SIGMA.default
        assert default is not None
        return self.facts.get(NOISE_SIGMA.key, default)

    def fact_ids(self, keys: Sequence[str] | None = None) -> list[str]:
        chosen = self.sources if keys is None else {k: v for k, v in self.sources.items() if k in keys}
        return sorted(set(chosen.values()))

    def measured_bound(self, weight_bytes: float, roof: ParamKey) -> float | None:
        """The weight-movement bound as chiplore measures it: weight bytes over the measured roof."""
        rate = self.facts.get(roof.key)
        return weight_bytes / rate if rate else None


def read_knowledge(store: GraphStore, version: str, capabilities: Sequence[Capability] = ()) -> Knowledge:
    facts: Facts = {}
    sources: dict[str, str] = {}
    for row in measurements_under(store, version):  # the latest measurement of a parameter wins
        facts[str(row["param"])] = float(row["value"])  # type: ignore[arg-type]
        sources[str(row["param"])] = str(row["fact"])
    stale: set[str] = set()
    for row in stale_values(store, version):  # an upgrade's budget may leave some unchecked: the last value serves
        param = str(row["param"])
        if param not in facts or param in stale:
            facts[param] = float(row["value"])  # type: ignore[arg-type]
            sources[param] = str(row["fact"])
            stale.add(param)
    rules = rules_in_force(store, version)
    if rules:  # without rules the flags stay unknown and the design spaces keep their defaults
        for capability in capabilities:
            refusing = next((rule for rule in rules if _refuses(rule, capability)), None)
            facts[capability.flag] = 0.0 if refusing else 1.0
            if refusing is not None:
                sources.setdefault(capability.flag, refusing.fact)
    return Knowledge(version=version, facts=facts, sources=sources, stale=frozenset(stale), rules=tuple(rules))


def rules_in_force(store: GraphStore, version: str) -> list[Rule]:
    """Every rule that holds under a version (the `rules-in-force` named query): what the screener checks."""
    rows = named_queries.run(store, "rules-in-force", {"toolchain": version})
    return [Rule(fact_id("LegalityRule", row["rule"]), row["code"], predicate_of(row["predicate"])) for row in rows]


def _refuses(rule: Rule, capability: Capability) -> bool:
    if rule.predicate.quantity != capability.rule_key:
        return False
    if capability.value is None:
        return True
    return isinstance(rule.predicate, NotIn) and capability.value in rule.predicate.value


def chip_refused_under(store: GraphStore, target: Target, version: str) -> str:
    """Why no design priced from the graph's facts under `version` can run on the target's chip, in one
    line ("" when they can): what optimize asks before it spends anything (ingest.chip.chip_refusal)."""
    return chip_refusal(store, target, read_knowledge(store, version, target.pack().capabilities).facts, version)
