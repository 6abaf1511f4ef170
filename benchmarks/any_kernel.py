"""Every kernel SimRNGD ships, designed by the generator from its op graph, on two chips.

    python benchmarks/any_kernel.py [--chips default,other,1x128,4x256,2x512-16k] [--toolchains 0.6.0,0.7.0]
                                    [--seed 0] [--kernels K,...] [--json FILE]

Per chip, on a scratch embedded store and with default settings, what a user runs: `learn` under
0.6.0, `optimize` of every kernel (the three Gemma kernels and the kernel packs shipped under
simulator/kernels/packs: a SwiGLU feed-forward, a vocabulary projection, a GQA projection), then
`toolchain upgrade 0.7.0` and `optimize` again. The other chip is a CHIPLORE_SIM_TRUTH file with
20-40 % other bandwidths and start-ups; 1x128, 4x256 and 2x512-16k are the chips of other shapes
that ship in simulator/chips/ (learnt, not told: their docs may describe the first chip). Per
kernel and toolchain: the baseline and BEST as `status` reports them (medians of the device's noisy
runs), BEST over the chip's own bound (`x bound`, as `status` divides) and in true cycles (`x bound
true`: the harness's noise-free cycles of BEST's program; only this benchmark reads them), the
speedup, device seconds and wall time. The targets: every kernel within 1.15x of its bound on the
default chip and on the other shapes, 1.20x on the other chip.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.core.errors import ConfigError
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.session import Session
from chiplore.simulator._truth import ENV_VAR
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.target import SimRNGD

PACKS = Path(__file__).resolve().parents[1] / "simulator" / "kernels" / "packs"
SHAPES = Path(__file__).resolve().parents[1] / "simulator" / "chips"  # chips of other shapes, by file stem
OTHER_CHIP = {"engine_bw": 165.0, "dmn_bw": 190.0, "cluster_ingress": 215.0, "dma_startup": 460.0,
              "dma_chain_startup": 240.0, "lut_bpc": 2.2}  # fmt: skip
TARGETS = {"default": 1.15, "other": 1.20}
console = Console(width=170)


@dataclass
class Row:
    chip: str
    toolchain: str
    kernel: str
    baseline: float | None
    best: float | None
    ci: tuple[float | None, float | None]
    ratio: float | None  # status's: BEST's median over the chip's bound
    true_ratio: float | None  # BEST's noise-free cycles over the bound
    speedup: float | None
    device_s: float
    wall_s: float


def true_ratio(session: Session, kernel: str, version: str, bound: float) -> float | None:
    try:
        return estimate(session.best(kernel).source, version).cycles / bound
    except (ConfigError, NotCompiled):  # a kernel with no BEST, or a program the harness cannot time
        return None


def chip_rows(chip: str, toolchains: list[str], kernels: list[str] | None, seed: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="chiplore-any-kernel-") as scratch:
        store = EmbeddedStore(Path(scratch) / "data")
        try:
            session = Session(store, SimRNGD(seed=seed, kernel_paths=(PACKS,)))
            session.prepare()
            for index, version in enumerate(toolchains):
                started = time.perf_counter()
                if index == 0:
                    session.learn(toolchain=version)
                else:
                    session.upgrade(version)
                session.optimize(kernels, toolchain=version, seed=seed)
                wall = time.perf_counter() - started
                for k in session.status():
                    if kernels and k.kernel not in kernels:
                        continue
                    rows.append(Row(chip, version, k.kernel, k.baseline_cycles, k.best_cycles,
                                    (k.best_ci_low, k.best_ci_high), k.ratio_to_bound,
                                    true_ratio(session, k.kernel, version, k.bound_cycles_true),
                                    k.speedup_vs_baseline, k.device_seconds, wall))  # fmt: skip
                console.print(f"[dim]{chip} chip, {version}: {wall:.0f} s of wall time[/dim]")
        finally:
            store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chips", default="default,other")
    parser.add_argument("--toolchains", default="0.6.0,0.7.0")
    parser.add_argument("--kernels", default="", help="only these (default: every kernel the target offers)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    kernels = [k for k in args.kernels.split(",") if k] or None
    rows: list[Row] = []
    saved = os.environ.pop(ENV_VAR, None)
    try:
        for chip in args.chips.split(","):
            if chip == "other":
                with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as handle:
                    handle.write("".join(f"{key} = {value}\n" for key, value in OTHER_CHIP.items()))
                os.environ[ENV_VAR] = handle.name
            elif chip != "default":
                if not (SHAPES / f"{chip}.toml").is_file():
                    parser.error(f"no chip {chip!r}: default, other or one of simulator/chips/ "
                                 f"({', '.join(sorted(p.stem for p in SHAPES.glob('*.toml')))})")  # fmt: skip
                os.environ[ENV_VAR] = str(SHAPES / f"{chip}.toml")
            found = chip_rows(chip, args.toolchains.split(","), kernels, args.seed)
            os.environ.pop(ENV_VAR, None)
            render(found)  # each chip's table as it finishes: a long run stopped later keeps what it found
            rows += found
            if args.json:
                args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    finally:
        if saved is not None:
            os.environ[ENV_VAR] = saved


def render(rows: list[Row]) -> None:
    def n(value: float | None, form: str = ",.0f") -> str:
        return "-" if value is None else format(value, form)

    table = Table(title="every kernel, designed by the generator (learn && optimize, upgrade && optimize; default "
                  "settings)", caption="x bound: status's BEST median over the chip's bound; true: BEST's "
                  f"noise-free cycles; targets {TARGETS}")  # fmt: skip
    for column in ("chip", "toolchain", "kernel", "baseline", "best [95% CI]", "x bound", "x bound true", "speedup",
                   "device-s"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("chip", "kernel") else "right")
    for r in rows:
        over = r.ratio is None or r.ratio > TARGETS.get(r.chip, 1.15)
        ratio = n(r.ratio, ".3f") + (" [red](over)[/red]" if over else "")
        table.add_row(r.chip, r.toolchain, r.kernel, n(r.baseline), f"{n(r.best)} [{n(r.ci[0])}, {n(r.ci[1])}]",
                      ratio, n(r.true_ratio, ".3f"), n(r.speedup, ".2f") + "x", n(r.device_s))  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
