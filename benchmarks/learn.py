"""Learning benchmark: `chiplore learn` on SimRNGD 0.6.0, from an empty graph, on each backend.

    python benchmarks/learn.py [--backends embedded,neo4j] [--seeds 3] [--json FILE]

For each run: wall seconds, simulated device seconds, and what the graph holds afterwards (claims,
contradicted claims, measured parameters, rules); then the same run again, which must add nothing.
Medians over the seeds. Neo4j is the one CHIPLORE_NEO4J_URI names, or a local one started with
chiplore.kg.neo4j_local (Java 17+ and Maven). Targets (issue 6): <= 15 device-minutes and <= 2 wall-minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.ingest.learn import learn
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.simulator.target import SimRNGD

console = Console(width=130)


def _open_backend():  # type: ignore[no-untyped-def]
    """benchmarks/graph_store.py's backends (a script beside this one, not a package)."""
    spec = importlib.util.spec_from_file_location("graph_store_bench", Path(__file__).with_name("graph_store.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.open_backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="embedded,neo4j")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    open_backend = _open_backend()
    rows = []
    for backend in args.backends.split(","):
        runs = []
        for seed in range(args.seeds):
            with open_backend(backend) as store:
                ensure_schema(store)
                target = SimRNGD(seed=seed)
                register_target(store, target.name, target.toolchains(), target.default_toolchain())
                summary = learn(store, target, "0.6.0")
                nodes = count_by_label(store)
                start = time.perf_counter()
                learn(store, SimRNGD(seed=seed + 100), "0.6.0")
                again_s = time.perf_counter() - start
                runs.append({
                    "wall_s": summary.wall_s, "device_s": summary.device_s, "claims": summary.claims,
                    "contradicted": summary.contradicted_claims, "params": summary.measured_params,
                    "rules": summary.rules_in_force, "again_wall_s": again_s,
                    "again_adds": sum(count_by_label(store).values()) - sum(nodes.values()),
                })  # fmt: skip
        row = {"backend": backend, "runs": len(runs)}
        row |= {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        rows.append(row)
    table = Table(title="chiplore learn, SimRNGD 0.6.0 (medians; this machine)")
    columns = ["backend", "runs", "wall_s", "device_s", "claims", "contradicted", "params", "rules", "again_wall_s",
               "again_adds"]  # fmt: skip
    for column in columns:
        table.add_column(column.replace("_", " "), justify="left" if column == "backend" else "right")
    for row in rows:
        table.add_row(*(f"{row[c]:,.1f}" if isinstance(row[c], float) else str(row[c]) for c in columns))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
