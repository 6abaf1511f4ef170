"""Simulator benchmark: estimate() per kernel (cold and warm), fixtures and references per kernel,
the executor per program and fixture set, and simulated device jobs per second of wall time with
warm caches.

    python benchmarks/simulator.py [--repeats 5] [--jobs 200] [--json FILE]

Cold = caches cleared (parse, check, lowering, schedule); warm = the same text again. Reports
medians of the repeats; the executor runs once per fixture set (nine sets, each its own data), and
the table gives the median and the slowest set. Targets (docs/simrngd.md §9.3): a simulation with
lowering < 200 ms; the executor within 100 ms per (kernel, set).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.core.target import DeviceJob
from chiplore.simulator.cost import estimate
from chiplore.simulator.cost.estimate import _estimate
from chiplore.simulator.device import DeviceConfig, SimDevice
from chiplore.simulator.dsl.parser import _parse_small
from chiplore.simulator.execute import fixtures as fixture_module
from chiplore.simulator.execute import reference as reference_module
from chiplore.simulator.execute.executor import ExecutionError, execute
from chiplore.simulator.kernel_specs import input_bytes
from chiplore.simulator.kernels.builtin import builtin_pack
from chiplore.simulator.toolchain.check import _check_cached
from chiplore.simulator.toolchain.lower import _lower_text

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "simulator" / "programs" / "examples"
NAMES = {"qkv": "sliding_project_qkv", "o": "sliding_attention_output", "ffn": "decoder_feedforward"}
console = Console(width=140)


def clear_caches() -> None:
    for cached in (_parse_small, _check_cached, _lower_text, _estimate, fixture_module._cached,
                   reference_module._reference):  # fmt: skip
        cached.cache_clear()


def median_ms(action: Callable[[], object], repeats: int, cold: bool) -> float:
    times = []
    for _ in range(repeats):
        if cold:
            clear_caches()
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    for short, kernel in NAMES.items():
        # the pack's baseline and the tests' optimised example
        for suffix, source in (
            ("baseline", builtin_pack(kernel).baseline),
            ("opt", (EXAMPLES / f"{short}_opt.fe").read_text()),
        ):
            cold = median_ms(lambda s=source: estimate(s, "0.6.0"), args.repeats, cold=True)
            warm = median_ms(lambda s=source: estimate(s, "0.6.0"), args.repeats, cold=False)
            cycles = estimate(source, "0.6.0").cycles
            run_ms: float | str
            slowest_ms: float | str
            try:
                for fixture_set in fixture_module.SETS:  # parse, lowering and every set's fixtures warm
                    fixture_module.fixture(kernel, fixture_set)
                execute(source, kernel, "g0")
                per_set = [median_ms(lambda s=source, k=kernel, f=f: execute(s, k, f), 1, False)
                           for f in fixture_module.SETS]  # fmt: skip
                run_ms, slowest_ms = round(statistics.median(per_set), 1), round(max(per_set), 1)
            except ExecutionError:
                run_ms = slowest_ms = "refused"
            rows.append({"program": f"{short}_{suffix}", "cycles": round(cycles), "estimate_cold_ms": round(cold, 1),
                         "estimate_warm_ms": round(warm, 3), "execute_ms": run_ms,
                         "execute_max_ms": slowest_ms})  # fmt: skip
        fixture_ms = median_ms(lambda k=kernel: fixture_module.fixture(k, "g1"), args.repeats, cold=True)
        fixture_module.fixture(kernel, "g1")  # the reference alone: inputs already generated

        def reference_only(k: str = kernel) -> object:
            reference_module._reference.cache_clear()
            return reference_module.reference(k, "g1")

        reference_ms = median_ms(reference_only, args.repeats, cold=False)
        rows.append({"program": f"{short} set g1", "fixture_ms": round(fixture_ms, 1),
                     "reference_ms": round(reference_ms, 1)})  # fmt: skip
    device = SimDevice(1, DeviceConfig(agent_budget_s_per_day=1e12), input_bytes=input_bytes)
    source = builtin_pack(NAMES["o"]).baseline
    job = DeviceJob(kernel=NAMES["o"], program=source, fixtures="graded", repeats=3)
    device.result(device.submit(job))  # warm the caches
    start = time.perf_counter()
    simulated = 0.0
    for _ in range(args.jobs):
        result = device.result(device.submit(job))
        simulated += result.device_s + result.queue_wait_s
        device.advance(5.0)
    wall = time.perf_counter() - start
    jobs_row = {"program": f"{args.jobs} graded O jobs", "jobs_per_wall_s": round(args.jobs / wall, 1),
                "simulated_s_per_wall_s": round(simulated / wall, 1)}  # fmt: skip
    rows.append(jobs_row)
    table = Table(title="SimRNGD simulator (medians; this machine)")
    columns = ["program", "cycles", "estimate_cold_ms", "estimate_warm_ms", "execute_ms", "execute_max_ms",
               "fixture_ms", "reference_ms", "jobs_per_wall_s", "simulated_s_per_wall_s"]  # fmt: skip
    headers = ["program", "cycles", "estimate cold ms", "warm ms", "execute ms (9 sets)", "slowest set", "fixture ms",
               "reference ms",
               "jobs / wall s", "device s / wall s"]  # fmt: skip
    for column, header in zip(columns, headers, strict=True):
        table.add_column(header, justify="left" if column == "program" else "right")
    for row in rows:
        table.add_row(*(f"{row[c]:,}" if isinstance(row.get(c), int | float) else str(row.get(c, "")) for c in columns))
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
