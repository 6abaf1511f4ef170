"""What the loop learns: activities, claims, measurements and legality rules, with provenance."""

from __future__ import annotations

from collections.abc import Sequence

from kg.models import (
    Activity,
    Claim,
    Concept,
    Diagnostic,
    HardwareParam,
    LegalityRule,
    Measurement,
    ProbeProgram,
    Toolchain,
)
from kg.repo.nodes import Link, Ref, link, upsert
from kg.store import GraphStore


def record_activity(store: GraphStore, activity: Activity) -> Activity:
    upsert(store, [activity])
    return activity


def _provenance(node: Ref, activity: Activity, target: str, toolchain: str) -> list[Link]:
    return [
        Link(node, "CREATED_BY", Ref.to(activity)),
        Link(node, "UNDER", Ref("Toolchain", Toolchain.id_of(target, toolchain))),
    ]


def record_claim(
    store: GraphStore,
    claim: Claim,
    *,
    concept: Concept,
    chunk_shas: Sequence[str],
    activity: Activity,
    target: str,
) -> Claim:
    """A documented statement about a concept, citing the doc chunks it came from."""
    upsert(store, [concept, claim])
    ref = Ref.to(claim)
    links = [Link(ref, "ABOUT", Ref.to(concept))]
    links += [Link(ref, "CITES", Ref("DocChunk", sha)) for sha in chunk_shas]
    links += _provenance(ref, activity, target, claim.toolchain)
    link(store, links)
    return claim


def record_measurement(
    store: GraphStore,
    measurement: Measurement,
    *,
    param: HardwareParam,
    run_ids: Sequence[str],
    activity: Activity,
    target: str,
    confirms: Sequence[str] = (),
    contradicts: Sequence[str] = (),
) -> Measurement:
    """A fitted hardware parameter, linked to the device runs it came from and the claims it judges."""
    if measurement.param != param.key:
        raise ValueError(f"measurement of {measurement.param!r} linked to parameter {param.key!r}")
    upsert(store, [param, measurement])
    ref = Ref.to(measurement)
    links = [Link(ref, "OF", Ref.to(param))]
    links += [Link(ref, "FROM", Ref("DeviceRun", run)) for run in run_ids]
    links += [Link(ref, "CONFIRMS", Ref("Claim", claim)) for claim in confirms]
    links += [Link(ref, "CONTRADICTS", Ref("Claim", claim)) for claim in contradicts]
    links += _provenance(ref, activity, target, measurement.toolchain)
    link(store, links)
    return measurement


def record_rule(
    store: GraphStore,
    rule: LegalityRule,
    *,
    diagnostic: Diagnostic,
    probe: ProbeProgram,
    activity: Activity,
    target: str,
    supersedes: str | None = None,
) -> LegalityRule:
    """A legality rule derived from the diagnostic a probe program drew from the compiler."""
    upsert(store, [probe, diagnostic, rule])
    ref = Ref.to(rule)
    toolchain = Ref("Toolchain", Toolchain.id_of(target, rule.toolchain))
    links = [
        Link(ref, "DERIVED_FROM", Ref.to(diagnostic)),
        Link(Ref.to(diagnostic), "EMITTED_FOR", Ref.to(probe)),
        Link(ref, "HOLDS_UNDER", toolchain),
        Link(ref, "CREATED_BY", Ref.to(activity)),
    ]
    if supersedes is not None:
        links.append(Link(ref, "SUPERSEDES", Ref("LegalityRule", supersedes)))
    link(store, links)
    return rule


def measurements_of(store: GraphStore, param: str) -> list[Measurement]:
    rows = store.read(
        "MATCH (m:Measurement {param: $param}) RETURN m AS node ORDER BY m.measured_at, m.id",
        {"param": param},
    )
    return [Measurement.from_properties(row["node"]) for row in rows]
