"""Measurements as the learner and the upgrade read them: what a version holds, what an upgrade left
stale, the claims a measurement judges, and what measuring again would cost."""

from __future__ import annotations

from collections.abc import Sequence

from chiplore.kg.models import Measurement, Toolchain
from chiplore.kg.store import GraphStore


def measured_params(store: GraphStore, version: str) -> set[str]:
    """The parameter keys measured under a version (by its UNDER links)."""
    rows = store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $v}) RETURN DISTINCT m.param AS p", {"v": version}
    )
    return {row["p"] for row in rows}


def latest_value(store: GraphStore, version: str, param: str) -> float | None:
    """The value of the latest measurement of `param` under a version."""
    rows = store.read(
        "MATCH (m:Measurement {param: $p})-[:UNDER]->(:Toolchain {version: $v}) RETURN m.value AS value "
        "ORDER BY m.measured_at DESC LIMIT 1",
        {"p": param, "v": version},
    )
    return float(rows[0]["value"]) if rows else None


def values_under(store: GraphStore, target: str, version: str) -> dict[str, float]:
    """Every parameter's value under a version, the latest measurement winning (refuted ones left out)."""
    rows = store.read(
        "MATCH (t:Toolchain {id: $t}) WITH DISTINCT t MATCH (m:Measurement)-[:UNDER]->(t) "
        "WHERE coalesce(m.status, '') <> 'refuted' "  # (a plain comparison would lead Neo4j to the status index)
        "RETURN m.param AS param, m.value AS value ORDER BY m.measured_at, m.id",
        {"t": Toolchain.id_of(target, version)},
    )
    return {row["param"]: float(row["value"]) for row in rows}


def measurements_under(store: GraphStore, version: str) -> list[dict[str, object]]:
    """Every measurement that holds under a version (refuted ones left out), oldest first: param,
    value, interval, unit and fact id."""
    return store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $version}) WHERE m.status <> 'refuted' "
        "RETURN m.param AS param, m.value AS value, m.ci_low AS ci_low, m.ci_high AS ci_high, m.unit AS unit, "
        "m.fact_id AS fact ORDER BY m.measured_at, m.id",
        {"version": version},
    )


def stale_values(store: GraphStore, version: str) -> list[dict[str, object]]:
    """Stale measurements of versions before `version` (an upgrade's budget left them unchecked),
    oldest version first: param, value, fact id."""
    return store.read(
        "MATCH (now:Toolchain {version: $version}) MATCH (m:Measurement {status: 'stale'})-[:UNDER]->(t:Toolchain) "
        "WHERE t.target = now.target AND t.ordinal < now.ordinal "
        "RETURN m.param AS param, m.value AS value, m.fact_id AS fact ORDER BY t.ordinal, m.measured_at, m.id",
        {"version": version},
    )


def stale_measurements(store: GraphStore, target: str, previous: str) -> dict[str, Measurement]:
    """The latest stale measurement of each parameter that `previous` (or, for what an earlier
    upgrade's budget left unchecked, a version before it) holds."""
    rows = store.read(
        "MATCH (old:Toolchain {id: $old}) MATCH (m:Measurement {status: 'stale'})-[:UNDER]->(t:Toolchain) "
        "WHERE t.target = old.target AND t.ordinal <= old.ordinal "
        "RETURN m AS node ORDER BY t.ordinal, m.measured_at, m.id",
        {"old": Toolchain.id_of(target, previous)},
    )
    return {m.param: m for m in (Measurement.from_properties(row["node"]) for row in rows)}


def carried_over(store: GraphStore, target: str, version: str) -> list[str]:
    """Parameters whose measurement from an earlier version holds under `version` too (confirmed)."""
    rows = store.read(
        "MATCH (new:Toolchain {id: $new}) MATCH (m:Measurement)-[:UNDER]->(new) "
        "MATCH (m)-[:UNDER]->(t:Toolchain) WHERE t.target = new.target AND t.ordinal < new.ordinal "
        "RETURN DISTINCT m.param AS param ORDER BY param",
        {"new": Toolchain.id_of(target, version)},
    )
    return [row["param"] for row in rows]


def superseded_under(store: GraphStore, target: str, version: str) -> list[tuple[Measurement, Measurement]]:
    """(old, new) for each measurement under `version` that supersedes an older one."""
    rows = store.read(
        "MATCH (n:Measurement)-[:UNDER]->(:Toolchain {id: $new}) MATCH (n)-[:SUPERSEDES]->(o:Measurement) "
        "RETURN n AS new, o AS old ORDER BY n.param",
        {"new": Toolchain.id_of(target, version)},
    )
    return [(Measurement.from_properties(r["old"]), Measurement.from_properties(r["new"])) for r in rows]


def claims_about(store: GraphStore, param: str, version: str) -> list[dict[str, object]]:
    """The version's doc claims that state `param`: id, value, text, unit."""
    return store.read(
        "MATCH (c:Claim {param: $key})-[:UNDER]->(:Toolchain {version: $v}) RETURN c.id AS id, c.value AS value, "
        "c.text AS text, c.unit AS unit",
        {"key": param, "v": version},
    )


def documented_value(store: GraphStore, param: str, version: str) -> float | None:
    """A value the version's docs state for `param` (e.g. the clock), if they state one."""
    rows = store.read(
        "MATCH (c:Claim {param: $p})-[:UNDER]->(:Toolchain {version: $v}) RETURN c.value AS value LIMIT 1",
        {"p": param, "v": version},
    )
    return float(rows[0]["value"]) if rows and rows[0]["value"] is not None else None


def documented_values(store: GraphStore, target: str, versions: Sequence[str]) -> dict[str, dict[str, set[float]]]:
    """param -> version -> the values the docs of those versions state for it."""
    ids = {Toolchain.id_of(target, v): v for v in versions}
    out: dict[str, dict[str, set[float]]] = {}
    for row in store.read(
        "MATCH (c:Claim)-[:UNDER]->(t:Toolchain) WHERE t.id IN $ids AND c.value IS NOT NULL "
        "AND c.param IS NOT NULL RETURN c.param AS param, t.id AS t, c.value AS value",
        {"ids": sorted(ids)},
    ):
        out.setdefault(row["param"], {}).setdefault(ids[row["t"]], set()).add(float(row["value"]))
    return out


def consulted_counts(store: GraphStore, measurement_ids: Sequence[str]) -> dict[str, int]:
    """How many designs CONSULTED each of these measurements."""
    rows = store.read(
        "MATCH (:DesignNode)-[:CONSULTED]->(m:Measurement) WHERE m.id IN $ids RETURN m.id AS id, count(*) AS n",
        {"ids": sorted(measurement_ids)},
    )
    return {row["id"]: int(row["n"]) for row in rows}


def device_seconds_behind(store: GraphStore, measurement_ids: Sequence[str]) -> float:
    """The device time the runs behind these measurements took (what measuring them again costs)."""
    rows = store.read(
        "MATCH (m:Measurement)-[:FROM]->(r:DeviceRun) WHERE m.id IN $ids WITH DISTINCT r RETURN sum(r.device_s) AS s",
        {"ids": list(measurement_ids)},
    )
    return float(rows[0]["s"] or 0.0) if rows else 0.0


def unjudged_claims(store: GraphStore, target: str, version: str) -> list[dict[str, object]]:
    """Claims of a version with a value that no current measurement of their parameter under it has
    judged yet, each with that measurement."""
    return store.read(
        "MATCH (c:Claim)-[:UNDER]->(:Toolchain {id: $t}) WHERE c.param IS NOT NULL AND c.value IS NOT NULL "
        "MATCH (m:Measurement {param: c.param})-[:UNDER]->(:Toolchain {id: $t}) WHERE m.status = 'current' "
        "AND NOT (m)-[:CONFIRMS|CONTRADICTS]->(c) "
        "RETURN c.id AS claim, c.value AS value, c.unit AS unit, c.text AS text, m.id AS measurement, "
        "m.value AS m_value, m.ci_low AS low, m.ci_high AS high, m.unit AS m_unit ORDER BY claim, measurement",
        {"t": Toolchain.id_of(target, version)},
    )
