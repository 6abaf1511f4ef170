"""chiplore on many simulated devices: how much sooner, on the devices' calendar, every kernel gets
within 1.10x of its bound.

    python benchmarks/scale_out.py [--devices 1,2,4,8] [--seed 0] [--budget 5400] [--within 1.10]
                                   [--workers 2] [--toolchain V] [--kernels K,...] [--no-sequential] [--json FILE]
                                   [--keep DIR]

SimRNGD is learnt once (on one device); each configuration then optimizes a copy of that graph: the
sequential loop (`--workers 1`, today's code path, one device) and the loop on Ray with 1, 2, 4 and 8
devices (`--workers N`: one device actor per device, the free screens as CPU tasks on `--workers`
CPUs). Same seed, budget and stop rules everywhere.

Per configuration: the simulated device-clock time until every kernel's BEST is within `--within`
of its bound (the calendar a team would wait: the latest of the kernels' times, each the calendar
time of the decision that made such a design BEST; on Ray, the run's calendar keeps every job after
the results it was decided from and sends the jobs in calendar order, agents/scale/calendar.py), the
calendar until the run's last job ended (every kernel stopped by its rules), the devices'
utilisation (the share of that whole calendar each device held one of the run's jobs, queued or
running; mean over the devices), the final BEST over the bound per kernel, the wall time of the
optimize, its device-seconds, and how many device jobs were recorded twice or designs measured twice
(must be 0). BEST's ratio to the bound is
its program's true cycles (the harness knows them, as in loop_vs_peers.py): the measured median
moves by the devices' drift (+-2.5 %), the design found does not. The speedup is the 1-device Ray
run's calendar over each run's, within this one command. `--keep DIR` copies each Ray run's graph
there (`CHIPLORE_DATA_DIR=DIR/ray-4 chiplore status` reads one).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import ray
from rich.console import Console
from rich.table import Table

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.scale.loop import PooledExecutor
from chiplore.agents.scale.ray_engine import RayEngine, device_resource
from chiplore.agents.schedule import DEFAULT_BUDGET_S, OptimizeConfig
from chiplore.core.target import DeviceJob, DeviceResult, JobHandle
from chiplore.ingest.learn import learn
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.designs import best_of, source_of
from chiplore.kg.repo.integrity import violations
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.device.pool import KIND
from chiplore.simulator.target import SimRNGD

console = Console(width=220)
QUALITY = 0.01  # "final quality within 1 %": a kernel's goal is the best final design of any run, plus this


@dataclass
class Row:
    name: str
    devices: int
    trace: list[tuple[str, float, float]]  # (kernel, calendar time, its new BEST's true cycles over the bound)
    calendar_s: float  # the run's whole calendar (its last job's end)
    utilisation: float
    final: dict[str, float | None]  # kernel -> final BEST over the true bound
    wall_s: float
    device_s: float
    duplicated: int
    violations: list[str] = field(default_factory=list)

    def reached_s(self, thresholds: dict[str, float]) -> float:
        """The calendar time by which every kernel's BEST was within its threshold (inf: some never was)."""
        times = []
        for kernel, threshold in thresholds.items():
            first = next((clock for k, clock, ratio in self.trace if k == kernel and ratio <= threshold), None)
            times.append(math.inf if first is None else first)
        return max(times, default=math.inf)


class Metered:
    """SimRNGD with one device, metered: how long a job of the loop held the device (its queue wait
    and run), so the sequential loop's utilisation is computed as the pool's is."""

    def __init__(self, target: SimRNGD) -> None:
        self.target, self.held_s = target, 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self.target, name)

    def submit(self, job: DeviceJob, device: str | None = None) -> JobHandle:
        return self.target.submit(job, device)

    def result(self, handle: JobHandle) -> DeviceResult:
        result = self.target.result(handle)
        self.held_s += result.queue_wait_s + result.device_s
        return result


def learnt_graph(seed: int, toolchain: str, into: Path) -> float:
    """Learn SimRNGD once (on one device) into `into`; the seconds it took."""
    target = SimRNGD(seed=seed)
    start = time.perf_counter()
    with EmbeddedStore(into) as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), toolchain)
        learn(store, target, toolchain)
    return time.perf_counter() - start


def bounds(kernels: list[str]) -> dict[str, float]:
    return {spec.name: spec.bound_cycles for spec in SimRNGD().kernels() if spec.name in kernels}


def true_ratio(store: GraphStore, design: str, toolchain: str, bound: float) -> float:
    """A design's program's true cycles over the kernel's bound."""
    try:
        return estimate(source_of(store, design), toolchain).cycles / bound
    except NotCompiled:
        return math.inf


def ratios(store: GraphStore, trace: list[tuple[str, float, str]], toolchain: str,
           bound: dict[str, float]) -> list[tuple[str, float, float]]:  # fmt: skip
    """Each BEST of the trace (kernel, calendar time, design) with its true ratio to the bound, in time order."""
    ordered = sorted((t for t in trace if t[0] in bound), key=lambda entry: entry[1])
    return [(kernel, clock, true_ratio(store, design, toolchain, bound[kernel])) for kernel, clock, design in ordered]


def duplicates(store: GraphStore) -> int:
    """The optimize's device jobs recorded more than once (a job id is unique on its device within a
    run), and designs whose graded measurement was taken twice (chiplore.kg.repo.integrity)."""
    runs = store.read(
        "MATCH (a:Activity {role: 'runner'}) WITH a ORDER BY a.started_at DESC LIMIT 1 "
        "MATCH (r:DeviceRun)-[:CREATED_BY]->(a) WITH r.job_id AS job, count(r) AS n WHERE n > 1 "
        "RETURN sum(n - 1) AS extra"
    )
    measured = [v for v in violations(store) if " times under " in v]
    return int((runs[0]["extra"] if runs else 0) or 0) + len(measured)


def finals(store: GraphStore, toolchain: str, bound: dict[str, float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for kernel, limit in bound.items():
        best = best_of(store, kernel)
        out[kernel] = true_ratio(store, best.id, toolchain, limit) if best is not None else None
    return out


def sequential(data: Path, args: argparse.Namespace, kernels: list[str], bound: dict[str, float]) -> Row:
    target = Metered(SimRNGD(seed=args.seed))
    trace: list[tuple[str, float, str]] = []
    with EmbeddedStore(data) as store:

        def heard(kernel: str, message: str) -> None:
            if message.startswith(("accepted ", "baseline ")):
                best = best_of(store, kernel)
                if best is not None:
                    trace.append((kernel, target.device.now, best.id))

        start = time.perf_counter()
        config = OptimizeConfig(kernels=tuple(kernels), budget_s=args.budget, seed=args.seed)
        summary = optimize(OptimizeContext(store, target, args.toolchain), config, on_event=heard)
        wall = time.perf_counter() - start
        clock = target.device.now
        return Row("sequential (--workers 1)", 1, ratios(store, trace, args.toolchain, bound),
                   clock, target.held_s / clock if clock else 0.0, finals(store, args.toolchain, bound), wall,
                   summary.device_s, duplicates(store), violations(store))  # fmt: skip


def on_ray(data: Path, args: argparse.Namespace, kernels: list[str], bound: dict[str, float], devices: int) -> Row:
    target = SimRNGD(seed=args.seed, devices=devices)
    with EmbeddedStore(data) as store, RayEngine(partial(SimRNGD, seed=args.seed, devices=devices), target.devices(),
                                                 workers=args.workers) as engine:  # fmt: skip
        start = time.perf_counter()
        config = OptimizeConfig(kernels=tuple(kernels), budget_s=args.budget, seed=args.seed)
        summary = optimize(OptimizeContext(store, target, args.toolchain), config, executor=PooledExecutor(engine))
        wall = time.perf_counter() - start
        trace = [(b.kernel, b.clock_s, b.design) for b in summary.progress]
        used = [d.utilisation for d in summary.devices]
        name = f"Ray, {devices} device{'s' if devices > 1 else ''}"
        return Row(name, devices, ratios(store, trace, args.toolchain, bound),
                   summary.calendar_s, statistics.mean(used) if used else 0.0, finals(store, args.toolchain, bound),
                   wall, summary.device_s, duplicates(store), violations(store))  # fmt: skip


def table(rows: list[Row], kernels: list[str], within: float) -> Table:
    """Per run: when every kernel was within `within` of its bound, when every kernel was within 1 %
    of the best final design any run of this command found, and when the run ended."""
    one = next((r for r in rows if r.name.startswith("Ray, 1 ")), None)
    absolute = dict.fromkeys(kernels, within)
    best = {k: min((r.final[k] or math.inf for r in rows), default=math.inf) * (1 + QUALITY) for k in kernels}
    goals = (("to", absolute), ("to best +1 %", best))

    def speedup(reference: float | None, value: float) -> str:
        ratio = reference / value if reference and math.isfinite(reference) and math.isfinite(value) else math.nan
        return f"{ratio:.2f}x" if math.isfinite(ratio) else "-"

    def seconds(value: float) -> str:
        return f"{value:,.0f}" if math.isfinite(value) else "not reached"

    out = Table(title=f"devices' calendar until every kernel is within {within:.2f}x of its bound, within 1 % of "
                      "the best final design of any run, and until the run ends (speedup: the 1-device Ray run's "
                      "over this one's)")  # fmt: skip
    for column in ("run", f"to {within:.2f}x (s)", "speedup", "to best +1 % (s)", "speedup", "to the end (s)",
                   "speedup", "utilisation", *(f"final x bound {k}" for k in kernels), "wall (s)", "device-s",
                   "duplicated"):  # fmt: skip
        out.add_column(column, justify="left" if column == "run" else "right")
    for r in rows:
        cells = []
        for _, thresholds in goals:
            reached = r.reached_s(thresholds)
            cells += [seconds(reached), speedup(one.reached_s(thresholds) if one else None, reached)]
        out.add_row(r.name, *cells, seconds(r.calendar_s), speedup(one.calendar_s if one else None, r.calendar_s),
                    f"{r.utilisation:.0%}", *(f"{r.final[k]:.3f}" if r.final.get(k) else "-" for k in kernels),
                    f"{r.wall_s:,.0f}", f"{r.device_s:,.0f}", str(r.duplicated))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="1,2,4,8", help="device counts of the Ray runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="device seconds per optimize")
    parser.add_argument("--within", type=float, default=1.10, help="the ratio to the bound every kernel must reach")
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray (the free screens)")
    parser.add_argument("--toolchain", default=SimRNGD().default_toolchain(), help="learnt and optimized under")
    parser.add_argument("--kernels", default="", help="comma-separated (default: all)")
    parser.add_argument("--no-sequential", dest="sequential", action="store_false")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="copy each run's graph under this folder")
    args = parser.parse_args()
    counts = [int(n) for n in args.devices.split(",") if n.strip()]
    kernels = [k for k in args.kernels.split(",") if k] or [spec.name for spec in SimRNGD().kernels()]
    bound = bounds(kernels)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="chiplore-scale-") as tmp:
        template = Path(tmp) / "learnt"
        console.print(f"learning SimRNGD {args.toolchain} (seed {args.seed}) ... ", end="")
        console.print(f"{learnt_graph(args.seed, args.toolchain, template):.0f} s")

        def fresh(name: str) -> Path:
            copy = Path(tmp) / name
            shutil.copytree(template, copy)
            return copy

        if args.sequential:
            rows.append(sequential(fresh("sequential"), args, kernels, bound))
            console.print(f"  {rows[-1].name}: wall {rows[-1].wall_s:,.0f} s")
        ray.init(num_cpus=args.workers, resources={device_resource(KIND): max(counts)}, include_dashboard=False,
                 log_to_driver=False)  # fmt: skip
        try:
            for count in counts:
                rows.append(on_ray(fresh(f"ray-{count}"), args, kernels, bound, count))
                if args.keep:
                    shutil.copytree(Path(tmp) / f"ray-{count}", args.keep / f"ray-{count}", dirs_exist_ok=True)
                console.print(f"  {rows[-1].name}: wall {rows[-1].wall_s:,.0f} s")
        finally:
            ray.shutdown()
    console.print(table(rows, kernels, args.within))
    for row in rows:
        if row.violations:
            console.print(f"[red]{row.name}: the graph's invariants are broken:[/red] {'; '.join(row.violations)}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
