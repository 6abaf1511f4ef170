"""Where each kernel's optimization stands, from the graph alone (`chiplore status`, `chiplore tree`)."""

from __future__ import annotations

import math

from pydantic import BaseModel

from chiplore.kg.models import DesignNode
from chiplore.kg.repo.design_counts import status_counts
from chiplore.kg.repo.designs import best_of, root_of
from chiplore.kg.store import GraphStore

Z95 = 1.96


class KernelProgress(BaseModel):
    kernel: str
    baseline_cycles: float | None
    best_cycles: float | None  # median of every timed run of the best design (graded and A/B)
    best_ci_low: float | None  # distribution-free 95 % interval of that median
    best_ci_high: float | None
    best_design: str | None
    bound_cycles_true: float  # the target's own bound (the harness's number, not chiplore's)
    bound_cycles_measured: float | None  # weight bytes over chiplore's measured roof
    ratio_to_bound: float | None
    ratio_to_measured_bound: float | None
    speedup_vs_baseline: float | None
    device_seconds: float
    nodes_by_status: dict[str, int]
    failed_runs: int = 0  # the kernel's device runs that did not finish ok (faults, timeouts, wrong results)
    bound_by: str = ""  # what bounds BEST by the estimate recorded when it was proposed ("" when none was)


def median_interval(samples: list[float]) -> tuple[float, float, float]:
    """Median and the order statistics that bracket it with 95 % confidence (no noise model needed)."""
    ordered = sorted(samples)
    n = len(ordered)
    half = Z95 * math.sqrt(n) / 2
    low, high = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    mid = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    return mid, ordered[low], ordered[high]


def geomean(values: list[float]) -> float | None:
    """The geometric mean (of speedups), or None for no values."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def pooled_cycles(store: GraphStore, design: str, version: str | None = None) -> list[float]:
    """Every timed run of a design's program (under one toolchain version, when given: a new
    toolchain changes the cycles): cycles do not depend on the fixtures, and runs spread over the
    campaign average out the device's slow drift that one job's median carries."""
    rows = store.read(
        # from the design (WITH DISTINCT pins the start: the status index would otherwise lead)
        "MATCH (d:DesignNode {id: $id}) WITH DISTINCT d "
        "MATCH (d)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WHERE r.status = 'ok' AND ($version IS NULL OR r.toolchain = $version) RETURN r.cycles AS cycles",
        {"id": design, "version": version},
    )
    return [float(c) for row in rows for c in row["cycles"] or []]


def kernel_progress(store: GraphStore, roof: str, target: str | None = None) -> list[KernelProgress]:
    """Each kernel under the active toolchain: BEST's runs under it, and the baseline as measured
    under it (an upgrade re-validates the baseline; before any upgrade, the root's own runs).
    `roof` is the parameter key of the measured weight-ingress rate (the target pack's roof);
    `target` keeps a graph that holds several targets' work to one target's kernels and versions."""
    active = store.read(
        "MATCH (g:Target)-[:ACTIVE]->(t:Toolchain) WHERE $target IS NULL OR g.name = $target "
        "RETURN t.version AS v, t.id AS id LIMIT 1",
        {"target": target},
    )
    version = active[0]["v"] if active else None
    rate = store.read(
        "MATCH (m:Measurement {param: $roof}) WHERE m.status IN ['current', 'stale'] "
        "OPTIONAL MATCH (m)-[:UNDER]->(t:Toolchain) WITH m, collect(t.target) AS targets "
        "WHERE $target IS NULL OR $target IN targets "
        "RETURN m.value AS value ORDER BY m.measured_at DESC LIMIT 1",
        {"roof": roof, "target": target},
    )
    out = []
    for row in store.read(
        "MATCH (k:Kernel) WHERE $target IS NULL OR k.target = $target "
        "OPTIONAL MATCH (k)-[:ROOT]->(r:DesignNode) OPTIONAL MATCH (k)-[:BEST]->(b:DesignNode) "
        "OPTIONAL MATCH (l:DeviceLedger {consumer: k.name}) "
        "OPTIONAL MATCH (v:Revalidation {role: 'baseline'})-[:REVALIDATES]->(r) WHERE v.to_version = $v "
        "RETURN k.name AS kernel, k.weight_bytes AS weight_bytes, k.bound_cycles AS bound, properties(k) AS stored, "
        "coalesce(v.cycles_after, r.measured_cycles) AS baseline, b.id AS best, b.rationale AS rationale, "
        "l.device_s AS device_s, l.failed_runs AS failed_runs "
        "ORDER BY kernel",
        {"v": version, "target": target},
    ):
        statuses = status_counts(store, row["kernel"], row["stored"])
        best = low = high = None
        if row["best"] is not None:
            samples = pooled_cycles(store, row["best"], version) or pooled_cycles(store, row["best"])
            if samples:
                best, low, high = median_interval(samples)
        measured_bound = row["weight_bytes"] / rate[0]["value"] if rate else None
        baseline = row["baseline"]
        out.append(
            KernelProgress(
                kernel=row["kernel"],
                baseline_cycles=baseline,
                best_cycles=best,
                best_ci_low=low,
                best_ci_high=high,
                best_design=row["best"],
                bound_cycles_true=row["bound"],
                bound_cycles_measured=measured_bound,
                ratio_to_bound=best / row["bound"] if best and row["bound"] else None,
                ratio_to_measured_bound=best / measured_bound if best and measured_bound else None,
                speedup_vs_baseline=baseline / best if best and baseline else None,
                device_seconds=row["device_s"] or 0.0,
                nodes_by_status=statuses,
                failed_runs=row["failed_runs"] or 0,
                bound_by=bound_by(row["rationale"] or ""),
            )
        )
    return out


def bound_by(rationale: str) -> str:
    """The part of a design's rationale that says what bounds it (the pack's estimate when it was
    proposed: "bound by the sub queue, 93% busy (...)", with what the estimate adds after it, as "; 2 of 3
    clusters' ports carry the weights ..."), or "" when the rationale says nothing of it. The estimate
    comes last in a rationale."""
    parts = [part.strip() for part in rationale.split("; ")]
    first = next((i for i, part in enumerate(parts) if part.startswith("bound by ")), None)
    return "" if first is None else "; ".join(parts[first:])


def design_tree(store: GraphStore, kernel: str) -> tuple[DesignNode | None, dict[str, list[DesignNode]], str | None]:
    """The kernel's root, each design's children (oldest first) and the id of BEST."""
    best = best_of(store, kernel)
    children: dict[str, list[DesignNode]] = {}
    for row in store.read(
        "MATCH (c:DesignNode {kernel: $k})-[:CHILD_OF]->(p:DesignNode) RETURN p.id AS parent, c AS node "
        "ORDER BY c.created_at, c.id",
        {"k": kernel},
    ):
        children.setdefault(row["parent"], []).append(DesignNode.from_properties(row["node"]))
    return root_of(store, kernel), children, best.id if best else None


def best_history(store: GraphStore, kernel: str) -> list[tuple[float, str, str]]:
    """(device-seconds the kernel had spent, design id, source) for each design that became its BEST,
    in order: a run's anytime curve. A design is BEST once its accepting comparison and its graded
    run are both recorded (a winner of the A/B pairs gets its graded run after them); the root once
    measured. The seconds are those of every run of the kernel that had finished by then."""
    runs = store.read(
        "MATCH (r:DeviceRun {kernel: $k}) RETURN r.finished_at AS t, r.device_s AS s ORDER BY t", {"k": kernel}
    )
    became = []
    for row in store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'})-[:HAS_VERSION]->(v:KernelVersion) "
        "OPTIONAL MATCH (c:Comparison {decision: 'accept'})-[:CANDIDATE]->(d) "
        "OPTIONAL MATCH (v)<-[:RAN]-(r:DeviceRun {fixtures: 'graded', status: 'ok'}) "
        "WITH d, v, min(c.decided_at) AS decided, min(r.finished_at) AS graded "
        "RETURN d.id AS id, v.source AS source, decided, graded",
        {"k": kernel},
    ):
        moments = [m for m in (row["decided"], row["graded"]) if m]
        if moments:
            became.append((max(moments), str(row["id"]), str(row["source"])))
    out, spent, index = [], 0.0, 0
    for moment, design, source in sorted(became):
        while index < len(runs) and runs[index]["t"] <= moment:
            spent += float(runs[index]["s"] or 0.0)
            index += 1
        out.append((spent, design, source))
    return out
