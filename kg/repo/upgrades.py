"""Toolchain upgrades in the graph (docs/architecture.md §6): the Upgrade node that carries one upgrade's state,
the facts an upgrade leaves stale, and the kernels' re-validations."""

from __future__ import annotations

from collections.abc import Sequence

from chiplore.kg.models import Activity, Revalidation, Toolchain, Upgrade
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.store import GraphStore

# Facts that belong to a version by a link (label, the link to the Toolchain).
VERSIONED_FACTS = (("Measurement", "UNDER"), ("LegalityRule", "HOLDS_UNDER"), ("Claim", "UNDER"))


def open_upgrade(store: GraphStore, upgrade: Upgrade) -> Upgrade:
    """The upgrade's node, created once: a resumed upgrade keeps its start, budget and status."""
    store.write(
        "MERGE (u:Upgrade {id: $id}) ON CREATE SET u += $props",
        {"id": upgrade.id, "props": upgrade.properties()},
    )
    link(store, [Link(Ref.to(upgrade), "UNDER", Ref("Toolchain", Toolchain.id_of(upgrade.target, upgrade.to_version)))])
    return get_upgrade(store, upgrade.id) or upgrade


def get_upgrade(store: GraphStore, upgrade_id: str) -> Upgrade | None:
    rows = store.read("MATCH (u:Upgrade {id: $id}) RETURN u AS node", {"id": upgrade_id})
    return Upgrade.from_properties(rows[0]["node"]) if rows else None


def upgrade_to(store: GraphStore, target: str, version: str) -> Upgrade | None:
    """The upgrade that made `version` active, if one did."""
    rows = store.read(
        "MATCH (u:Upgrade {target: $t, to_version: $v}) RETURN u AS node ORDER BY u.started_at DESC LIMIT 1",
        {"t": target, "v": version},
    )
    return Upgrade.from_properties(rows[0]["node"]) if rows else None


def finish_upgrade(store: GraphStore, upgrade_id: str, summary_json: str, ended_at: str) -> None:
    store.write(
        "MATCH (u:Upgrade {id: $id}) SET u.status = 'done', u.summary = $summary, u.ended_at = $ended",
        {"id": upgrade_id, "summary": summary_json, "ended": ended_at},
    )


def mark_stale(store: GraphStore, target: str, previous: str, version: str) -> dict[str, int]:
    """Current facts that hold under `previous` but not (yet) under `version` become `stale`; gives the
    facts of `previous` stale now, by label (those a run before this one of the upgrade marked and no
    re-check has settled too: a resumed upgrade reported 0 beside 22 measurements still stale).
    Safe to repeat: a fact re-checked under `version` is linked there, or no longer current."""
    params = {"old": Toolchain.id_of(target, previous), "new": Toolchain.id_of(target, version)}
    out = {}
    for label, rel in VERSIONED_FACTS:
        store.write(
            f"MATCH (f:{label} {{status: 'current'}})-[:{rel}]->(:Toolchain {{id: $old}}) "
            f"WHERE NOT (f)-[:{rel}]->(:Toolchain {{id: $new}}) SET f.status = 'stale'",
            params,
        )
        rows = store.read(
            f"MATCH (f:{label} {{status: 'stale'}})-[:{rel}]->(:Toolchain {{id: $old}}) "
            f"WHERE NOT (f)-[:{rel}]->(:Toolchain {{id: $new}}) RETURN count(f) AS n",
            params,
        )
        out[label] = int(rows[0]["n"]) if rows else 0
    return out


def settle_unsaid_claims(store: GraphStore, target: str, previous: str, version: str) -> dict[str, int]:
    """Once `version`'s docs are read, the claims of `previous` they did not state again are settled
    instead of staying stale for good: `superseded` where a claim of `version` says the same sentence
    about the same parameter (in a paragraph that changed around it), else `retired`. Safe to repeat."""
    ids = {"old": Toolchain.id_of(target, previous), "new": Toolchain.id_of(target, version)}
    rows = store.write(
        "MATCH (c:Claim {status: 'stale'})-[:UNDER]->(:Toolchain {id: $old}) "
        "WHERE NOT (c)-[:UNDER]->(:Toolchain {id: $new}) "
        "OPTIONAL MATCH (same:Claim)-[:UNDER]->(:Toolchain {id: $new}) "
        "WHERE same.text = c.text AND coalesce(same.param, '') = coalesce(c.param, '') "
        "WITH c, count(same) AS said SET c.status = CASE WHEN said > 0 THEN 'superseded' ELSE 'retired' END "
        "RETURN c.status AS status, count(c) AS n",
        ids,
    )
    # a superseded claim links to the claim that says it again, as a superseded rule or measurement does
    store.write(
        "MATCH (c:Claim {status: 'superseded'})-[:UNDER]->(:Toolchain {id: $old}) "
        "MATCH (same:Claim)-[:UNDER]->(:Toolchain {id: $new}) "
        "WHERE same.text = c.text AND coalesce(same.param, '') = coalesce(c.param, '') AND same.id <> c.id "
        "MERGE (same)-[:SUPERSEDES]->(c)",
        ids,
    )
    return {str(row["status"]): int(row["n"]) for row in rows}


def upgrade_device_s(store: GraphStore, activity: Activity) -> float:
    """Device time the upgrade's own jobs took (read back, so a resumed upgrade keeps its budget)."""
    rows = store.read(
        "MATCH (r:DeviceRun)-[:CREATED_BY]->(:Activity {id: $id}) RETURN sum(r.device_s) AS s", {"id": activity.id}
    )
    return float(rows[0]["s"] or 0.0) if rows else 0.0


def learn_device_s(store: GraphStore, target: str, version: str) -> float:
    """Device time of the microbenchmark runs behind what the graph knows under a version: its own
    measurements, and the stale ones of earlier versions that still serve (superseded ones do not)."""
    rows = store.read(
        "MATCH (now:Toolchain {id: $t}) MATCH (m:Measurement)-[:UNDER]->(v:Toolchain) "
        "WHERE v.target = now.target AND v.ordinal <= now.ordinal AND m.status <> 'superseded' "
        "AND ((m)-[:UNDER]->(now) OR m.status = 'stale') "
        "MATCH (m)-[:FROM]->(r:DeviceRun) WITH DISTINCT r RETURN sum(r.device_s) AS s",
        {"t": Toolchain.id_of(target, version)},
    )
    return float(rows[0]["s"] or 0.0) if rows else 0.0


def record_revalidation(store: GraphStore, revalidation: Revalidation, *, activity: Activity, target: str,
                        run_ids: Sequence[str] = ()) -> Revalidation:  # fmt: skip
    upsert(store, [revalidation])
    ref = Ref.to(revalidation)
    links = [
        Link(ref, "REVALIDATES", Ref("DesignNode", revalidation.design)),
        Link(ref, "UNDER", Ref("Toolchain", Toolchain.id_of(target, revalidation.to_version))),
        Link(ref, "CREATED_BY", Ref.to(activity)),
    ]
    if revalidation.repaired_design:
        links.append(Link(ref, "REPAIRED_AS", Ref("DesignNode", revalidation.repaired_design)))
    links += [Link(ref, "FROM", Ref("DeviceRun", run)) for run in run_ids]
    link(store, links)
    return revalidation


def revalidation_of(store: GraphStore, revalidation_id: str) -> Revalidation | None:
    rows = store.read("MATCH (v:Revalidation {id: $id}) RETURN v AS node", {"id": revalidation_id})
    return Revalidation.from_properties(rows[0]["node"]) if rows else None


def repairs_under(store: GraphStore, kernel: str, version: str) -> set[str]:
    """The designs that re-validations of a kernel under `version` wrote as repairs."""
    rows = store.read("MATCH (v:Revalidation {kernel: $k, to_version: $v}) WHERE v.repaired_design IS NOT NULL "
                      "RETURN v.repaired_design AS d", {"k": kernel, "v": version})  # fmt: skip
    return {str(row["d"]) for row in rows}


def set_upgrade_budget(store: GraphStore, upgrade_id: str, budget_s: float) -> None:
    store.write("MATCH (u:Upgrade {id: $id}) SET u.budget_s = $b", {"id": upgrade_id, "b": budget_s})


def best_left_unchecked(store: GraphStore, kernel: str, version: str) -> str | None:
    """The toolchain of a kernel's BEST when its program is of another version and no re-validation
    under `version` has checked it (an upgrade whose budget ran out first, or that was interrupted):
    its runs would fault or measure another program than the one the new version builds. None when
    BEST is `version`'s program, was re-validated under it, or there is no BEST."""
    rows = store.read(
        "MATCH (:Kernel {name: $k})-[:BEST]->(b:DesignNode)-[:HAS_VERSION]->(p:KernelVersion) "
        "WHERE p.toolchain <> $v OPTIONAL MATCH (r:Revalidation {kernel: $k, to_version: $v})-[:REVALIDATES]->(b) "
        "RETURN p.toolchain AS toolchain, count(r) AS checked",
        {"k": kernel, "v": version},
    )
    return str(rows[0]["toolchain"]) if rows and not rows[0]["checked"] else None
