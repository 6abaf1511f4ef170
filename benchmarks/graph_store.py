"""Graph-store benchmark: bulk load, point lookups and every named query, on both backends.

    python benchmarks/graph_store.py [--backends embedded,neo4j] [--designs 100000] [--repeats 40]

Neo4j: uses CHIPLORE_NEO4J_URI/_USER/_PASSWORD when CHIPLORE_NEO4J_URI is set, otherwise starts a
local one with chiplore.kg.neo4j_local (Java 17+ and Maven; instance CHIPLORE_BENCH_NEO4J_NAME, default `bench`).
Prints one table; --json FILE also saves it. Each named query's cell gives its p95 and where its plan
starts (the backend's own EXPLAIN: `seek Kernel` is an index seek on Kernel); `status` is what
`chiplore status` reads from the graph (chiplore.kg.repo.overview and chiplore.kg.repo.progress).
Targets (issues 2 and 25): bulk load >= 10k nodes/s on the embedded store; every named query p95
<= 50 ms at 100k design nodes on both backends, and the interactive ones at 1M designs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from chiplore import queries
from chiplore.kg import neo4j_local
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.plans import driving_summary
from chiplore.kg.repo.overview import overview
from chiplore.kg.repo.progress import kernel_progress
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.kg.testing.sample import TARGET, build_sample_graph, sample_query_params

BULK_NODES = 50_000
BULK_RELATIONSHIPS = 50_000
LOOKUPS = 1_000
P95_TARGET_MS = 50.0
LOAD_TARGET_NODES_PER_S = 10_000.0
BENCH_PASSWORD = "chiplore-bench-password"

console = Console(width=160)


@contextmanager
def open_backend(name: str) -> Iterator[GraphStore]:
    if name == "embedded":
        with tempfile.TemporaryDirectory(prefix="chiplore-bench-") as data_dir, EmbeddedStore(Path(data_dir)) as store:
            yield store
        return
    uri = os.environ.get("CHIPLORE_NEO4J_URI")
    started = False
    password = os.environ.get("CHIPLORE_NEO4J_PASSWORD", "")
    instance_name = os.environ.get("CHIPLORE_BENCH_NEO4J_NAME", "bench")
    if not uri:
        instance = neo4j_local.start(instance_name, BENCH_PASSWORD, fresh=True)
        uri, password, started = instance.uri, BENCH_PASSWORD, True
    assert uri is not None
    store = Neo4jStore(uri, os.environ.get("CHIPLORE_NEO4J_USER", "neo4j"), password, query_timeout_s=600)
    try:
        store.delete_all()
        yield store
    finally:
        store.close()
        if started:
            neo4j_local.stop(instance_name)


def timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def bulk_load(store: GraphStore) -> dict[str, float]:
    nodes = [
        {"id": f"bulk-{i}", "kernel": "bulk", "status": "proposed", "depth": i % 64, "change": f"c{i}"}
        for i in range(BULK_NODES)
    ]
    rng = random.Random(1)
    edges = [{"a": f"bulk-{i}", "b": f"bulk-{rng.randrange(i)}"} for i in range(1, BULK_RELATIONSHIPS + 1)]
    edges = [{"a": e["a"] if i < BULK_NODES else f"bulk-{i % BULK_NODES}", "b": e["b"]} for i, e in enumerate(edges)]
    node_s = timed(
        lambda: store.write_rows(
            "UNWIND $rows AS row CREATE (d:DesignNode {id: row.id, kernel: row.kernel, status: row.status, "
            "depth: row.depth, change: row.change})",
            nodes,
            batch_size=5_000,
        )
    )
    edge_s = timed(
        lambda: store.write_rows(
            "UNWIND $rows AS row MATCH (a:DesignNode {id: row.a}) MATCH (b:DesignNode {id: row.b}) "
            "CREATE (a)-[:CHILD_OF]->(b)",
            edges,
            batch_size=5_000,
        )
    )
    keys = [f"bulk-{rng.randrange(BULK_NODES)}" for _ in range(LOOKUPS)]
    latencies = []
    for key in keys:
        start = time.perf_counter()
        rows = store.read("MATCH (d:DesignNode {id: $id}) RETURN d.status AS status", {"id": key})
        latencies.append(time.perf_counter() - start)
        assert rows, key
    store.delete_all()
    return {
        "nodes_per_s": BULK_NODES / node_s,
        "relationships_per_s": BULK_RELATIONSHIPS / edge_s,
        "lookup_p50_ms": 1000 * float(np.percentile(latencies, 50)),
        "lookup_p99_ms": 1000 * float(np.percentile(latencies, 99)),
    }


def p95_ms(work: Callable[[], Any], repeats: int) -> float:
    for _ in range(3):
        work()  # warm caches and plan caches
    return 1000 * float(np.percentile([timed(work) for _ in range(repeats)], 95))


def query_latencies(
    store: GraphStore, designs: int, repeats: int
) -> tuple[dict[str, Any], dict[str, float], dict[str, str]]:
    start = time.perf_counter()
    summary = build_sample_graph(store, designs_per_kernel=designs // 3, seed=11)
    build_s = time.perf_counter() - start
    if store.backend == "neo4j":
        # Index statistics resampled and plan caches cleared: the plans made while the graph grew are not users'.
        store.write("CALL db.prepareForReplanning(600000)")
    params = sample_query_params(summary)
    results: dict[str, float] = {}
    plans: dict[str, str] = {}
    for name in queries.load_all():
        query = queries.get(name)
        bound = query.bind(params.get(name, {}))
        plans[name] = driving_summary(store.explain(query.text, bound))
        results[name] = p95_ms(lambda query=query, bound=bound: store.read(query.text, bound), repeats)
    roof = summary.params[0]  # the sample's stand-in for the target pack's roof parameter
    results["status"] = p95_ms(lambda: (overview(store, TARGET), kernel_progress(store, roof)), repeats)
    plans["status"] = "chiplore.kg.repo.overview + chiplore.kg.repo.progress"
    info = {
        "designs": store.read("MATCH (d:DesignNode) RETURN count(d) AS n")[0]["n"],
        "nodes": store.read("MATCH (n) RETURN count(n) AS n")[0]["n"],
        "relationships": store.read("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"],
        "build_s": build_s,
    }
    return info, results, plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="embedded,neo4j")
    parser.add_argument("--designs", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--json", dest="json_path", type=Path, default=None)
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    report: dict[str, dict[str, Any]] = {}
    for backend in backends:
        console.print(f"[bold]{backend}[/bold]: bulk load and lookups ...")
        with open_backend(backend) as store:
            ensure_schema(store)
            bulk = bulk_load(store)
            console.print(f"[bold]{backend}[/bold]: building a graph with {args.designs:,} design nodes ...")
            info, latencies, plans = query_latencies(store, args.designs, args.repeats)
            report[backend] = {"bulk": bulk, "graph": info, "query_p95_ms": latencies, "plan_start": plans}

    table = Table(title=f"graph store benchmark (named queries: p95 of {args.repeats} runs)")
    table.add_column("measure")
    for backend in backends:
        table.add_column(backend, justify="right")
    table.add_column("target", justify="right")

    def row(label: str, values: list[str], target: str = "") -> None:
        table.add_row(label, *values, target)

    row(
        f"bulk load {BULK_NODES:,} nodes (UNWIND, 5k/batch)",
        [f"{report[b]['bulk']['nodes_per_s']:,.0f} nodes/s" for b in backends],
        f">= {LOAD_TARGET_NODES_PER_S:,.0f}/s embedded",
    )
    row(
        f"bulk load {BULK_RELATIONSHIPS:,} relationships",
        [f"{report[b]['bulk']['relationships_per_s']:,.0f} rels/s" for b in backends],
    )
    row(f"{LOOKUPS:,} point lookups p50", [f"{report[b]['bulk']['lookup_p50_ms']:.2f} ms" for b in backends])
    row(f"{LOOKUPS:,} point lookups p99", [f"{report[b]['bulk']['lookup_p99_ms']:.2f} ms" for b in backends])
    row(
        "query graph: designs / nodes / rels",
        ["{designs:,} / {nodes:,} / {relationships:,}".format(**report[b]["graph"]) for b in backends],
    )
    row("query graph build time", [f"{report[b]['graph']['build_s']:.1f} s" for b in backends])
    for name in [*queries.load_all(), "status"]:
        row(
            f"query {name} p95 (plan start)",
            [f"{report[b]['query_p95_ms'][name]:.2f} ms ({_short(report[b]['plan_start'][name])})" for b in backends],
            f"<= {P95_TARGET_MS:.0f} ms",
        )
    console.print(table)
    named = {b: [v for k, v in report[b]["query_p95_ms"].items() if k != "status"] for b in backends}
    worst = {b: max(named[b]) for b in backends}
    console.print(
        "worst named-query p95: "
        + ", ".join(f"{b} {worst[b]:.2f} ms" for b in backends)
        + "; median over queries: "
        + ", ".join(f"{b} {statistics.median(named[b]):.2f} ms" for b in backends)
    )
    if args.json_path:
        args.json_path.write_text(json.dumps(report, indent=2))


def _short(plan_start: str) -> str:
    return "repo reads" if plan_start.startswith("chiplore.kg.repo") else plan_start


if __name__ == "__main__":
    main()
