"""How well the pack's cost model ranks designs: predicted against true cycles, per kernel and chip.

    python benchmarks/cost_model.py [--designs 40] [--seed 0] [--facts learnt|perturbed] [--packs DIR ...]
                                    [--json FILE]

For every kernel SimRNGD offers (the built-in ones and, by default, every kernel pack it ships under
simulator/kernels/packs), on the default chip and on another (a CHIPLORE_SIM_TRUTH file with
other DMA and decode values), it draws random designs: valid points of the kernel's generated
space (simulator/pack/generator), the packs' baselines and the hand-written programs of the tests
(tests/simulator/programs: examples, the bug zoo). Each design is priced by the stats model
(simulator/pack/estimate.py, from `analyze`'s statistics) and timed by the true cost model
(chiplore.simulator.cost, the harness's truth: only this benchmark reads it). The facts are what chiplore learnt of
that chip
(`--facts learnt`: chiplore.ingest.learn on a scratch embedded store, about 10 s a chip) or its true values
perturbed by up to 3 % (`--facts perturbed`). Prints Spearman's rank correlation and the median
absolute relative error; the target is a Spearman of at least 0.9 for every kernel on both chips.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from scipy.stats import spearmanr

from chiplore.core.pack import DesignSpace, Facts, points
from chiplore.core.target import KernelSpec
from chiplore.simulator._truth import ENV_VAR, ChipTruth, load_truth
from chiplore.simulator.cost import estimate
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.pack.estimate import predict_stats
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.toolchain.stats import analyze

ROOT = Path(__file__).resolve().parents[1]
PACKS = ROOT / "simulator" / "kernels" / "packs"
PROGRAMS = ROOT / "tests" / "simulator" / "programs"  # the examples and the bug zoo
OTHER_CHIP = {"engine_bw": 165.0, "dmn_bw": 190.0, "cluster_ingress": 215.0, "dma_startup": 460.0,
              "dma_chain_startup": 240.0, "lut_bpc": 2.2}  # fmt: skip
TARGET = 0.9
console = Console(width=200)


@dataclass
class Row:
    chip: str
    kernel: str
    designs: int
    generated: int
    programs: int
    refused: int  # drawn designs that did not compile
    spearman: float
    median_error: float
    spearman_generated: float | None
    predict_ms: float  # median, the statistics already analysed
    analyze_ms: float  # median, cold (check and lowering)


@dataclass
class Priced:
    origin: str  # generated | program
    true: float
    stats: float


# ---- facts ------------------------------------------------------------------------------------


def learnt_facts(version: str, seed: int) -> Facts:
    """What `chiplore learn` measures of the active chip, on a scratch embedded store."""
    from chiplore.ingest.learn import learn
    from chiplore.kg.embedded_store import EmbeddedStore
    from chiplore.kg.schema import ensure_schema
    from chiplore.simulator.device import DeviceConfig

    with tempfile.TemporaryDirectory(prefix="cost-model-bench-") as folder:
        store = EmbeddedStore(Path(folder) / "data")
        try:
            ensure_schema(store)
            learn(store, SimRNGD(seed=seed, device=DeviceConfig(agent_budget_s_per_day=1e9)), version)
            rows = store.read("MATCH (m:Measurement {toolchain: $v}) RETURN m.param AS p, m.value AS v", {"v": version})
        finally:
            store.close()
    return {row["p"]: float(row["v"]) for row in rows}


def perturbed_facts(chip: ChipTruth, seed: int, spread: float = 0.03) -> Facts:
    """The chip's true values under chiplore's keys, each off by up to `spread` (a learner's error)."""
    rng = random.Random(seed)
    exact = {
        "kernel.launch_cycles": chip.launch_cycles, "dma.start_cycles": chip.dma_startup,
        "dma.queued_start_cycles": chip.dma_chain_startup, "dma.engine_bytes_per_cycle": chip.engine_bw,
        "dma.packet_overhead_cycles": chip.pkt_overhead, "noc.dmn_bytes_per_cycle": chip.dmn_bw,
        "noc.cluster_port_bytes_per_cycle": chip.cluster_ingress, "noc.chip_bytes_per_cycle": chip.roof,
        "hbm.partial_store_factor": chip.rmw_factor, "dma.dm_to_dm_bytes_per_cycle": chip.dm2dm_phase_bw / 2,
        "dma.cross_cluster_factor": chip.xcluster_factor, "decode.bytes_per_cycle": chip.lut_bpc,
        "decode.f4_bytes_per_cycle": chip.lut_bpc, "queue.handoff_cycles": chip.sync_cycles,
        "pass.fixed_cycles": chip.pass_fixed + chip.latency_fetch + chip.latency_collect + chip.latency_commit,
        "vector.transcendental_cycles_per_flit": chip.ve_trans_cycles, "switch.cycles_per_ring_flit": 1.0,
        "switch.cycles_per_ring_slice": 1.0, "reducer.cycles_per_slice": 2.0, "reducer.throughput_factor": 1.0,
        "dma.interference_factor": chip.interference,
    }  # fmt: skip
    facts = {key: value * (1 + rng.uniform(-spread, spread)) for key, value in exact.items()}
    return facts | {"hbm.unit_bytes": float(chip.hbm_unit), "dm.usable_bytes_per_slice": chip.dm_usable_per_slice,
                    "dm.bank_run_limit": float(chip.bank_run_limit), "fetch.read_bytes_main": chip.fetch_read_main,
                    "fetch.read_bytes_sub": chip.fetch_read_sub, "vector.max_chain_ops": chip.ve_max_chain}  # fmt: skip


# ---- designs ----------------------------------------------------------------------------------


def drawn(space: DesignSpace, facts: Facts, count: int, rng: random.Random) -> list[dict[str, int]]:
    valid = list(points(space, facts))
    return rng.sample(valid, min(count, len(valid)))


def programs(spec: KernelSpec) -> list[str]:
    """The kernel's official baseline and the hand-written programs (packs, tests) that name it."""
    found = {spec.baseline_source: None}
    for path in sorted(PACKS.rglob("*.fe")) + sorted(PROGRAMS.rglob("*.fe")):
        source = path.read_text()
        try:
            names = [k.name for k in parse(source).kernels]
        except FerriteSyntaxError:
            continue
        if names == [spec.name]:
            found[source] = None
    return list(found)


def generated(spec: KernelSpec) -> DesignSpace | None:
    from chiplore.simulator.pack.generator.space import generated_space

    return generated_space(spec)


def designs(
    spec: KernelSpec, facts: Facts, version: str, count: int, rng: random.Random
) -> list[tuple[str, str, dict]]:
    """(origin, source, knobs) of the designs to price."""
    out: list[tuple[str, str, dict]] = []
    space = generated(spec)
    if space is not None:
        out += [("generated", space.source(p, facts, version), p) for p in drawn(space, facts, count, rng)]
    out += [("program", source, {}) for source in programs(spec)]
    return out


# ---- measuring ----------------------------------------------------------------------------------


def price(spec: KernelSpec, facts: Facts, version: str, chip: ChipTruth, count: int, seed: int,
          label: str) -> Row:  # fmt: skip
    rng = random.Random(f"{seed}/{label}/{spec.name}")
    priced: list[Priced] = []
    refused = 0
    predict_ms: list[float] = []
    analyze_ms: list[float] = []
    for origin, source, _knobs in designs(spec, facts, version, count, rng):
        started = time.perf_counter()
        stats = analyze(source, version)
        analyze_ms.append((time.perf_counter() - started) * 1000)
        if not stats.compiled:
            refused += 1
            continue
        started = time.perf_counter()
        predicted = predict_stats(stats, facts)
        predict_ms.append((time.perf_counter() - started) * 1000)
        if predicted is None:
            refused += 1
            continue
        priced.append(Priced(origin, estimate(source, version, chip).cycles, predicted))
    made = [p for p in priced if p.origin == "generated"]
    return Row(
        chip=label, kernel=spec.label or spec.name, designs=len(priced),
        generated=sum(p.origin == "generated" for p in priced), programs=sum(p.origin == "program" for p in priced),
        refused=refused, spearman=_rho([p.true for p in priced], [p.stats for p in priced]),
        median_error=_error([p.true for p in priced], [p.stats for p in priced]),
        spearman_generated=_rho([p.true for p in made], [p.stats for p in made]) if len(made) > 2 else None,
        predict_ms=statistics.median(predict_ms) if predict_ms else 0.0,
        analyze_ms=statistics.median(analyze_ms) if analyze_ms else 0.0,
    )  # fmt: skip


def _rho(true: list[float], predicted: list[float]) -> float:
    return float(spearmanr(true, predicted).statistic) if len(true) > 2 else float("nan")


def _error(true: list[float], predicted: list[float]) -> float:
    return statistics.median(abs(p / t - 1) for t, p in zip(true, predicted, strict=True)) if true else float("nan")


def chip_rows(label: str, args: argparse.Namespace) -> list[Row]:
    """Every kernel on the active chip (CHIPLORE_SIM_TRUTH as set now)."""
    version = args.toolchain
    chip = load_truth(version)
    if args.facts == "learnt":
        started = time.perf_counter()
        facts = learnt_facts(version, args.seed + 11)
        console.print(f"[dim]{label}: learnt {len(facts)} parameters in {time.perf_counter() - started:.0f} s[/dim]")
    else:
        facts = perturbed_facts(chip, args.seed)
    target = SimRNGD(kernel_paths=tuple(args.packs))
    return [price(spec, facts, version, chip, args.designs, args.seed, label) for spec in target.kernels()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=40, help="designs drawn per space and kernel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--facts", choices=("learnt", "perturbed"), default="learnt")
    parser.add_argument("--toolchain", default="0.6.0")
    parser.add_argument("--packs", type=Path, nargs="*", default=[PACKS],
                        help="kernel packs (or folders of them) to offer besides the built-in kernels; "
                        "default: every pack SimRNGD ships")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows: list[Row] = []
    saved = os.environ.pop(ENV_VAR, None)
    try:
        rows += chip_rows("default", args)
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as handle:
            handle.write("".join(f"{key} = {value}\n" for key, value in OTHER_CHIP.items()))
        os.environ[ENV_VAR] = handle.name
        rows += chip_rows("other", args)
        os.unlink(handle.name)
    finally:
        os.environ.pop(ENV_VAR, None)
        if saved is not None:
            os.environ[ENV_VAR] = saved
    render(rows, args)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


def render(rows: list[Row], args: argparse.Namespace) -> None:
    title = (f"Cost models against the true cycles (toolchain {args.toolchain}, {args.designs} designs per space, "
             f"facts {args.facts}; other chip: {', '.join(f'{k} = {v}' for k, v in OTHER_CHIP.items())})")  # fmt: skip
    caption = ("rho: Spearman's rank correlation with the true cycles; err: median |predicted / true - 1|; ms: medians "
               "per design (analyze cold, predict from its statistics)")  # fmt: skip
    table = Table(title=title, caption=caption)
    headers = ("chip", "kernel", "designs", "generated / programs", "refused", "stats rho", "stats err",
               "stats rho (generated)", "predict ms", "analyze ms")  # fmt: skip
    for header in headers:
        table.add_column(header, justify="left" if header in ("chip", "kernel") else "right")

    def number(value: float | None, form: str) -> str:
        return "-" if value is None else format(value, form)

    for r in rows:
        flag = "" if r.spearman >= TARGET else " [red](< 0.9)[/red]"
        table.add_row(r.chip, r.kernel, str(r.designs), f"{r.generated} / {r.programs}", str(r.refused),
                      f"{r.spearman:.3f}{flag}", f"{r.median_error:.1%}", number(r.spearman_generated, ".3f"),
                      f"{r.predict_ms:.1f}", f"{r.analyze_ms:.0f}")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
