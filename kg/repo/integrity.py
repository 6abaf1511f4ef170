"""The graph's invariants, checked: what no crash, kill or concurrent run may ever break. Each check
returns the violations it finds (empty when the graph is whole)."""

from __future__ import annotations

from chiplore.kg.repo.design_counts import miscounted
from chiplore.kg.store import GraphStore


def violations(store: GraphStore) -> list[str]:
    """Every broken invariant, one line each."""
    found: list[str] = []
    for check in (_one_design_per_source, _runs_are_linked, _best_is_accepted, _ledger_is_the_sum_of_its_runs,
                  _measured_once, _decided_designs_are_released, miscounted):  # fmt: skip
        found += check(store)
    return found


def _one_design_per_source(store: GraphStore) -> list[str]:
    rows = store.read(
        "MATCH (d:DesignNode)-[:HAS_VERSION]->(v:KernelVersion) WITH d.kernel AS kernel, v.sha AS sha, count(d) AS n "
        "WHERE n > 1 RETURN kernel, sha, n"
    )
    return [f"{r['kernel']}: {r['n']} designs of one program {r['sha'][:12]}" for r in rows]


def _runs_are_linked(store: GraphStore) -> list[str]:
    rows = store.read(
        "MATCH (r:DeviceRun) WHERE NOT (r)-[:RAN]->(:KernelVersion) OR NOT (r)-[:CREATED_BY]->(:Activity) "
        "RETURN r.id AS id"
    )
    return [f"device run {r['id']} without its program or its activity" for r in rows]


def _best_is_accepted(store: GraphStore) -> list[str]:
    rows = store.read(
        "MATCH (k:Kernel)-[:BEST]->(d:DesignNode) WHERE d.status <> 'accepted' RETURN k.name AS k, d.id AS d, "
        "d.status AS s"
    )
    many = store.read("MATCH (k:Kernel)-[b:BEST]->() WITH k, count(b) AS n WHERE n > 1 RETURN k.name AS k, n")
    return [f"{r['k']}: BEST {r['d']} is {r['s']}" for r in rows] + [f"{r['k']}: {r['n']} BESTs" for r in many]


def _ledger_is_the_sum_of_its_runs(store: GraphStore) -> list[str]:
    rows = store.read(
        "MATCH (l:DeviceLedger) OPTIONAL MATCH (r:DeviceRun {kernel: l.consumer}) "
        "WITH l, count(r) AS runs, sum(r.device_s) AS spent "
        "WHERE l.runs <> runs OR abs(l.device_s - coalesce(spent, 0.0)) > 1e-6 * (1 + l.device_s) "
        "RETURN l.consumer AS consumer, l.runs AS ledger_runs, runs, l.device_s AS ledger_s, spent"
    )
    return [f"ledger of {r['consumer']}: {r['ledger_runs']} runs / {r['ledger_s']} s, the runs say {r['runs']} / "
            f"{r['spent']} s" for r in rows]  # fmt: skip


def _measured_once(store: GraphStore) -> list[str]:
    """A design's graded measurement is taken once under a toolchain (a retried fault aside)."""
    rows = store.read(
        "MATCH (d:DesignNode)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WHERE r.fixtures = 'graded' AND r.status = 'ok' "
        "WITH d, r.toolchain AS toolchain, count(r) AS n WHERE n > 1 RETURN d.id AS id, toolchain, n"
    )
    return [f"design {r['id']} measured {r['n']} times under {r['toolchain']}" for r in rows]


def _decided_designs_are_released(store: GraphStore) -> list[str]:
    rows = store.read(
        "MATCH (d:DesignNode) WHERE d.status IN ['accepted', 'rejected', 'failed', 'screened_out'] "
        "AND coalesce(d.owner, '') <> '' RETURN d.id AS id, d.status AS s, d.owner AS owner"
    )
    return [f"design {r['id']} is {r['s']} but still held by {r['owner']}" for r in rows]
