"""Evidence about designs: screenings, device runs, and the judge's comparisons."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence

from chiplore.core.target import DeviceJob, DeviceResult
from chiplore.kg.models import BUDGET_END, Activity, Comparison, DeviceRun, Screening
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.store import GraphStore, batches


def record_screening(store: GraphStore, screening: Screening, *, activity: Activity) -> Screening:
    upsert(store, [screening])
    ref = Ref.to(screening)
    link(
        store,
        [
            Link(ref, "OF", Ref("DesignNode", screening.design)),
            Link(ref, "CREATED_BY", Ref.to(activity)),
        ],
    )
    return screening


def device_run(job: DeviceJob, result: DeviceResult) -> DeviceRun:
    """The graph's record of one device job. The id is unique across processes: job ids restart
    with every process's device session."""
    if result.status == "ok":
        failed = result.correctness is not None and not result.correctness.passed
        status = "incorrect" if failed else "ok"
    else:
        status = "timeout" if result.status == "timeout" else "fault"
    return DeviceRun(
        id=f"{result.job_id}/{uuid.uuid4().hex[:12]}", kernel=job.kernel, job_id=result.job_id,
        cycles=[float(r.cycles) for r in result.runs if not r.warmup], median_cycles=result.median_cycles,
        status=status, device_s=result.device_s, device=result.device_id,
        fixtures=job.fixtures if job.fixtures in ("graded", "smoke") else "checks",
        faults=[f.code for f in result.faults], toolchain=result.toolchain,
    )  # fmt: skip


def record_device_run(store: GraphStore, run: DeviceRun, *, kernel_version: str, activity: Activity) -> DeviceRun:
    record_device_runs(store, [(run, kernel_version)], activity=activity)
    return run


def record_device_runs(
    store: GraphStore, runs: Sequence[tuple[DeviceRun, str]], *, activity: Activity, batch_size: int = 2_000
) -> int:
    """Record device runs (each with the sha of the KernelVersion it ran) and charge the ledger.

    Each batch is one statement: the new runs, their RAN and CREATED_BY links and the DeviceLedger
    increments commit together, so a kill never leaves a run without its links and the per-consumer
    totals always equal the sum over the runs. A run already recorded is skipped
    (recording is idempotent); a concurrent duplicate fails on the unique key and charges nothing.
    Returns how many runs were new.
    """
    created = 0
    for batch in batches([{"run": run, "version": version} for run, version in runs], batch_size):
        ids = [item["run"].id for item in batch]
        known = {
            row["id"] for row in store.read("MATCH (r:DeviceRun) WHERE r.id IN $ids RETURN r.id AS id", {"ids": ids})
        }
        fresh = [item for item in batch if item["run"].id not in known]
        if not fresh:
            continue
        ledger: dict[str, dict[str, float | int]] = defaultdict(lambda: {"runs": 0, "failed_runs": 0, "device_s": 0.0})
        for item in fresh:
            entry = ledger[item["run"].kernel]
            entry["runs"] += 1
            entry["failed_runs"] += item["run"].status != "ok" and BUDGET_END not in item["run"].faults
            entry["device_s"] += item["run"].device_s
        shas = sorted({item["version"] for item in fresh})
        present = store.read(
            "MATCH (a:Activity {id: $activity}) UNWIND $shas AS sha MATCH (v:KernelVersion {sha: sha}) "
            "RETURN count(v) AS n",
            {"activity": activity.id, "shas": shas},
        )
        if not present or present[0]["n"] != len(shas):
            raise KeyError("device runs refer to a program or an activity that is not in the graph")
        # the runs, their links and the ledger's charge are one statement: a kill leaves all or nothing
        store.write(
            "MATCH (a:Activity {id: $activity}) UNWIND $runs AS row MATCH (v:KernelVersion {sha: row.version}) "
            "CREATE (r:DeviceRun) SET r = row.props CREATE (r)-[:RAN]->(v) CREATE (r)-[:CREATED_BY]->(a) "
            "MERGE (d:Device {id: row.device}) CREATE (r)-[:ON]->(d) "
            "WITH count(r) AS created UNWIND $ledger AS entry "
            "MERGE (l:DeviceLedger {consumer: entry.consumer}) "
            "SET l.runs = coalesce(l.runs, 0) + entry.runs, "
            "l.failed_runs = coalesce(l.failed_runs, 0) + entry.failed_runs, "
            "l.device_s = coalesce(l.device_s, 0.0) + entry.device_s",
            {
                "activity": activity.id,
                "runs": [
                    {
                        "props": item["run"].properties(),
                        "version": item["version"],
                        "device": item["run"].device or "unknown",
                    }
                    for item in fresh
                ],
                "ledger": [{"consumer": consumer, **totals} for consumer, totals in sorted(ledger.items())],
            },
        )
        created += len(fresh)
    return created


def record_comparison(
    store: GraphStore,
    comparison: Comparison,
    *,
    candidate: str,
    incumbent: str,
    run_ids: Sequence[str],
    activity: Activity,
) -> Comparison:
    """A judge's comparison with every run it used, in one statement (never a comparison without
    its designs or its samples)."""
    store.write(
        "MATCH (cand:DesignNode {id: $candidate}) MATCH (inc:DesignNode {id: $incumbent}) "
        "MATCH (a:Activity {id: $activity}) "
        "MERGE (c:Comparison {id: $id}) SET c += $props "
        "MERGE (c)-[:CANDIDATE]->(cand) MERGE (c)-[:INCUMBENT]->(inc) MERGE (c)-[:CREATED_BY]->(a) "
        "WITH c UNWIND $runs AS run_id MATCH (r:DeviceRun {id: run_id}) MERGE (c)-[:USED]->(r) "
        "RETURN count(*) AS used",
        {"candidate": candidate, "incumbent": incumbent, "activity": activity.id, "id": comparison.id,
         "props": comparison.properties(), "runs": list(run_ids)},
    )  # fmt: skip
    if not store.read("MATCH (c:Comparison {id: $id})-[:CANDIDATE]->() RETURN c.id AS id", {"id": comparison.id}):
        raise KeyError(f"comparison {comparison.id}: its designs or activity are not in the graph")
    return comparison


def ledger_seconds(store: GraphStore, consumer: str) -> float:
    """Device seconds the ledger has charged to a consumer (a kernel, or the microbenchmarks)."""
    rows = store.read("MATCH (l:DeviceLedger {consumer: $k}) RETURN l.device_s AS s", {"k": consumer})
    return float(rows[0]["s"] or 0.0) if rows else 0.0


def graded_runs(store: GraphStore, design: str) -> list[str]:
    """The ids of a design's successful graded runs, oldest first (the samples behind its median)."""
    rows = store.read(
        "MATCH (d:DesignNode {id: $id}) WITH DISTINCT d "
        "MATCH (d)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WHERE r.fixtures = 'graded' AND r.status = 'ok' RETURN r.id AS id ORDER BY r.finished_at, r.id",
        {"id": design},
    )
    return [row["id"] for row in rows]


def supersede_comparisons(store: GraphStore, candidate: str, incumbent: str) -> int:
    """A candidate is judged against `incumbent`, the BEST of its time: its comparisons with earlier
    BESTs (made while it waited for its turn, on many devices) become `superseded`, so that no query
    counts them as decisions. How many changed."""
    rows = store.write(
        "MATCH (:DesignNode {id: $cand})<-[:CANDIDATE]-(c:Comparison)-[:INCUMBENT]->(i:DesignNode) "
        "WHERE i.id <> $inc AND c.decision <> 'superseded' SET c.decision = 'superseded' RETURN count(c) AS n",
        {"cand": candidate, "inc": incumbent},
    )
    return int(rows[0]["n"]) if rows else 0


def latest_comparison(store: GraphStore, candidate: str, incumbent: str) -> Comparison | None:
    """The last comparison of a candidate with an incumbent (a killed run may have recorded it)."""
    rows = store.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(:DesignNode {id: $cand}) MATCH (c)-[:INCUMBENT]->(:DesignNode {id: $inc}) "
        "RETURN c AS node ORDER BY c.decided_at DESC LIMIT 1",
        {"cand": candidate, "inc": incumbent},
    )
    return Comparison.from_properties(rows[0]["node"]) if rows else None


def last_accepted_ratio(store: GraphStore, kernel: str) -> float | None:
    """The ratio of a kernel's latest accepting comparison (how big its last step was)."""
    rows = store.read(
        "MATCH (c:Comparison {kernel: $k, decision: 'accept'}) RETURN c.ratio AS ratio ORDER BY c.decided_at DESC "
        "LIMIT 1",
        {"k": kernel},
    )
    return float(rows[0]["ratio"]) if rows else None


def wrong_on_check_sets(store: GraphStore, kernel: str) -> bool:
    """Whether a design of the kernel has run wrong on its check sets (the device said so once)."""
    rows = store.read(
        "MATCH (r:DeviceRun {kernel: $k}) WHERE r.fixtures = 'checks' AND r.status = 'incorrect' "
        "RETURN r.id AS id LIMIT 1",
        {"k": kernel},
    )
    return bool(rows)


def graded_median(store: GraphStore, design: str, toolchain: str) -> float | None:
    """The median cycles of a design's successful graded run under a toolchain, if one was recorded
    (a run killed after the job but before the design moved on has it already)."""
    rows = store.read(
        "MATCH (d:DesignNode {id: $id}) WITH DISTINCT d "
        "MATCH (d)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WHERE r.fixtures = 'graded' AND r.status = 'ok' AND r.toolchain = $v "
        "RETURN r.median_cycles AS m ORDER BY r.finished_at LIMIT 1",
        {"id": design, "v": toolchain},
    )
    return float(rows[0]["m"]) if rows and rows[0]["m"] is not None else None
