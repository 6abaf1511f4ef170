"""What a toolchain upgrade costs and finds, against the simulator's truth.

    python benchmarks/toolchain_upgrade.py [--seeds 3] [--from 0.6.0] [--to 0.7.0] [--json FILE]

Per seed, on a fresh embedded graph: learn and optimize under the old version, `toolchain upgrade`
to the new one (its default budget: 20 % of learning's device time), then optimize again. Reported
per seed and as medians: learning's and the upgrade's device seconds; the measurements the upgrade
found changed (against the parameters the simulator really changes) and confirmed; the kernels it
repaired; and each kernel's BEST as a true ratio to the bound (the harness's noise-free cycles)
under the old version, right after the upgrade, and after the second optimize.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.schedule import OptimizeConfig
from chiplore.agents.upgrade import upgrade
from chiplore.ingest.learn import learn
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.targets import register_target, set_active_toolchain
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.cost import estimate
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.toolchain.versions import spec

SHORT = {"sliding_project_qkv": "QKV", "sliding_attention_output": "O", "decoder_feedforward": "FFN"}
# The ChipTruth fields a version overrides -> chiplore's parameter keys (what a correct upgrade flags).
KEYS = {"dma_chain_startup": "dma.queued_start_cycles", "dm_usable_per_slice": "dm.usable_bytes_per_slice"}
console = Console(width=140)


def best_ratios(store: GraphStore, target: SimRNGD, version: str) -> dict[str, float]:
    bounds = {k.name: k.bound_cycles for k in target.kernels()}
    rows = store.read(
        "MATCH (k:Kernel)-[:BEST]->(:DesignNode)-[:HAS_VERSION]->(v:KernelVersion) RETURN k.name AS k, v.source AS s"
    )
    return {SHORT[r["k"]]: estimate(r["s"], version).cycles / bounds[r["k"]] for r in rows}


def one_seed(seed: int, old: str, new: str) -> dict[str, object]:
    target = SimRNGD(seed=seed)
    o, n = spec(old).truth_scales, spec(new).truth_scales
    truly_changed = {KEYS[f] for f in set(o) | set(n) if f in KEYS and o.get(f, 1.0) != n.get(f, 1.0)}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedStore(Path(tmp)) as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())
        set_active_toolchain(store, target.name, old)
        learnt = learn(store, target, old)
        optimize(OptimizeContext(store, target, old), OptimizeConfig(seed=seed))
        before = best_ratios(store, target, old)
        started = time.perf_counter()
        summary = upgrade(store, target, new)
        upgrade_wall = time.perf_counter() - started
        repaired = best_ratios(store, target, new)
        optimize(OptimizeContext(store, target, new), OptimizeConfig(seed=seed))
        after = best_ratios(store, target, new)
    changed = {r.param for r in summary.measurements.changed}
    return {
        "seed": seed, "learn_device_s": learnt.device_s, "upgrade_device_s": summary.device_s,
        "upgrade_wall_s": upgrade_wall, "changed": sorted(changed), "missed": sorted(truly_changed - changed),
        "false_changes": sorted(changed - truly_changed), "confirmed": len(summary.measurements.confirmed),
        "stale": len(summary.measurements.stale), "rules": summary.rules.model_dump(),
        "repaired": sum(k.outcome == "repaired" for k in summary.kernels),
        "broken": sum(k.outcome == "broken" for k in summary.kernels),
        "before": before, "after_upgrade": repaired, "after_optimize": after,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--from", dest="old", default="0.6.0")
    parser.add_argument("--to", dest="new", default="0.7.0")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = [one_seed(seed, args.old, args.new) for seed in range(args.seeds)]
    table = Table("seed", "learn dev-s", "upgrade dev-s", "share", "changed", "false / missed", "confirmed",
                  "repaired", *(f"{k} {args.old} -> up -> opt" for k in SHORT.values()),
                  title=f"toolchain upgrade {args.old} -> {args.new}")  # fmt: skip
    for r in results:
        table.add_row(
            str(r["seed"]), f"{r['learn_device_s']:.0f}", f"{r['upgrade_device_s']:.0f}",
            f"{r['upgrade_device_s'] / r['learn_device_s']:.0%}", ", ".join(r["changed"]) or "-",
            f"{len(r['false_changes'])} / {len(r['missed'])}", str(r["confirmed"]),
            f"{r['repaired']} ({r['broken']} broken)",
            *(f"{r['before'][k]:.3f} -> {r['after_upgrade'][k]:.3f} -> {r['after_optimize'][k]:.3f}"
              for k in SHORT.values()),
        )  # fmt: skip
    console.print(table)
    for k in SHORT.values():
        console.print(
            f"{k}: median true ratio {statistics.median(r['before'][k] for r in results):.3f} under {args.old}, "
            f"{statistics.median(r['after_upgrade'][k] for r in results):.3f} after the upgrade, "
            f"{statistics.median(r['after_optimize'][k] for r in results):.3f} after optimizing under {args.new}"
        )
    console.print(f"median upgrade share of learning's device time: "
                  f"{statistics.median(r['upgrade_device_s'] / r['learn_device_s'] for r in results):.0%}")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
