"""What the report reads: each kernel's device time and accepted steps, the judge's comparisons,
the active toolchain's measurements with the claims they judge, and the finished upgrades."""

from __future__ import annotations

from chiplore.kg.models import REPAIR_POLICY
from chiplore.kg.store import GraphStore, Record


def accepted_changes(store: GraphStore, kernel: str) -> int:
    """The steps the loop took: accepted designs other than the baseline and the upgrades' repairs (a port
    of BEST to a new toolchain is no gain; counted, a kernel read "2 accepted" after a round accepting none)."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) WHERE d.role <> 'baseline' "
        "AND coalesce(d.policy, '') <> $repair RETURN count(d) AS n",
        {"k": kernel, "repair": REPAIR_POLICY},
    )
    return int(rows[0]["n"]) if rows else 0


def kernel_runs(store: GraphStore, kernel: str) -> list[Record]:
    """Every device run of a kernel, oldest first: when it finished and the device seconds it took."""
    return store.read(
        "MATCH (r:DeviceRun {kernel: $k}) RETURN r.finished_at AS t, r.device_s AS s ORDER BY t", {"k": kernel}
    )


def accepted_steps(store: GraphStore, kernel: str) -> list[Record]:
    """A kernel's accepted designs with their cycles and change, in the order they were accepted."""
    return store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) WHERE d.measured_cycles IS NOT NULL "
        "AND (d.role <> 'baseline' OR (:Kernel)-[:ROOT]->(d)) "  # a baseline ported to a new toolchain is no step
        "OPTIONAL MATCH (c:Comparison {decision: 'accept'})-[:CANDIDATE]->(d) "
        "OPTIONAL MATCH (d)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WITH d, min(c.decided_at) AS decided, min(r.finished_at) AS first_run "
        "RETURN d.id AS id, d.measured_cycles AS cycles, d.change AS change, coalesce(decided, first_run) AS at "
        "ORDER BY at",
        {"k": kernel},
    )


def finished_upgrades(store: GraphStore) -> list[Record]:
    """Finished toolchain upgrades, oldest first: from, to, and when they ended."""
    return store.read(
        "MATCH (u:Upgrade {status: 'done'}) RETURN u.from_version AS from_version, u.to_version AS to_version, "
        "u.ended_at AS at ORDER BY u.started_at"
    )


def comparisons(store: GraphStore) -> list[Record]:
    """Every comparison the judge made, oldest first."""
    return store.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(d:DesignNode) MATCH (c)-[:INCUMBENT]->(i:DesignNode) "
        "RETURN c.kernel AS kernel, d.id AS candidate, i.id AS incumbent, c.method AS method, c.ratio AS ratio, "
        "c.ci_low AS ci_low, c.ci_high AS ci_high, c.pairs AS pairs, c.decision AS decision ORDER BY c.decided_at"
    )


def active_toolchains(store: GraphStore) -> list[Record]:
    """Each registered target's active toolchain: target, version."""
    return store.read("MATCH (:Target)-[:ACTIVE]->(t:Toolchain) RETURN t.version AS v, t.target AS target")


def measurements_with_claims(store: GraphStore, version: str) -> list[Record]:
    """The version's measurements, each with the claims it confirms or contradicts."""
    return store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $v}) WHERE m.status <> 'refuted' "
        "OPTIONAL MATCH (m)-[j:CONFIRMS|CONTRADICTS]->(c:Claim) "
        "WITH m, collect(DISTINCT {value: c.value, unit: c.unit, verdict: type(j)}) AS claims "
        "RETURN m.param AS param, m.value AS value, m.ci_low AS ci_low, m.ci_high AS ci_high, m.unit AS unit, "
        "m.status AS status, claims ORDER BY param",
        {"v": version},
    )
