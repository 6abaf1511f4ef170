"""chiplore's loop against peer searches at equal device-seconds on the same simulated device.

    python benchmarks/loop_vs_peers.py [--kernels K,...] [--seeds 1-5 | 1,3] [--chips default,other]
                                       [--methods chiplore,random,optuna-tpe,optuna-cmaes] [--budget 600]
                                       [--results FILE] [--figure FILE] [--json FILE]

Every method gets `--budget` device-seconds per kernel on SimRNGD (seeded per seed), through the
same runner (`DeviceRunner`: its budget, retries and quarantine):

- chiplore: `Session.optimize([kernel], budget_s=...)` on a graph that learnt the chip first (learning's
  device time is not counted: the peers get its facts for free); it may stop before the budget (its
  stop rules are part of it);
- the peers sample the same design space (the pack's `design_space(spec)` under the facts chiplore
  learnt): `random` (uniform over valid settings), `optuna-tpe` (TPE over the knobs as categories),
  `optuna-cmaes` (CMA-ES with margin over each knob's index in its ordered values; needs `cmaes`) and
  `optuna-gp` (Optuna's GP sampler, categorical; needs `torch`). A peer's trial is the host test (the
  correctness screen, free) and then one device job (smoke fixtures, 7 runs); a setting the space
  refuses, or a program seen before, costs no device time. Its best is the fastest measured correct
  design.

Each best is re-measured by noise-free cycles (the harness's `chiplore.simulator.cost.estimate`): the
anytime curve is the true ratio to the bound of the method's best after each device-second (chiplore's
BEST from the graph: `kg.repo.progress.best_history`). Printed per chip, kernel and method, medians
over the seeds: best x bound after 10 / 25 / 50 / 100 % of the budget, the device-seconds until the
best is within 1.10x (seeds that never got there count as the whole budget, a floor), and the device
jobs. The figure (medians over seeds against the fraction of the budget) goes to `--figure`.

Chips: `default`, and `other`, the chip of benchmarks/other_chip.toml (20-40 % other bandwidths and
start-ups; `CHIPLORE_SIM_TRUTH`). Results are appended to `--results` (one JSON line per chip, kernel,
method, seed and budget) and a rerun skips what is there: run a subset, stop, and go on later. Each
(chip, seed) learns once into benchmarks/results/loop_vs_peers/ (kept), and every chiplore run starts
from a copy of that graph. The judge's own errors: benchmarks/judge_errors.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import optuna
from rich.console import Console
from rich.table import Table

from chiplore.agents.knowledge import read_knowledge
from chiplore.agents.runner import DeviceRunner
from chiplore.core.errors import BudgetExhausted
from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Facts, Params
from chiplore.core.target import DeviceJob, DeviceResult, KernelSpec
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.progress import best_history
from chiplore.session import Session
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.target import SimRNGD

VERSION = "0.6.0"
WITHIN = 1.10  # "device-seconds to reach 1.10x"
FRACTIONS = (0.10, 0.25, 0.50, 1.00)
STALE_DRAWS = 200  # draws in a row that find no new program: the peer has seen its space
PEER_REPEATS = 7
HERE = Path(__file__).parent
RESULTS = HERE / "results"
CHIPS = {"default": None, "other": HERE / "other_chip.toml"}
METHODS = ("chiplore", "random", "optuna-tpe", "optuna-cmaes", "optuna-gp")
console = Console(width=150)


def true_cycles(source: str) -> float:
    try:
        return estimate(source, VERSION).cycles
    except NotCompiled:
        return math.inf


def use_chip(chip: str) -> None:
    """The device, the true cycles and the bounds of this chip from here on (CHIPLORE_SIM_TRUTH)."""
    path = CHIPS[chip]
    if path is None:
        os.environ.pop("CHIPLORE_SIM_TRUTH", None)
    else:
        os.environ["CHIPLORE_SIM_TRUTH"] = str(path)


def spec_of(target: SimRNGD, kernel: str) -> KernelSpec:
    return next(spec for spec in target.kernels() if spec.name == kernel)


def space_of(target: SimRNGD, kernel: str) -> DesignSpace:
    space = target.pack().design_space(spec_of(target, kernel))
    if space is None:
        raise SystemExit(f"{target.name}'s pack has no design space for {kernel}: the peers have nothing to sample")
    return space


def designed_kernels(target: SimRNGD) -> list[str]:
    """The kernels the target's pack writes designs for: the only ones the peers can search."""
    pack = target.pack()
    return [spec.name for spec in target.kernels() if pack.design_space(spec) is not None]


# ---- chiplore ------------------------------------------------------------------------------------------


def learnt_graph(chip: str, seed: int) -> tuple[Path, Facts]:
    """The graph of a chip and seed after `learn` (made once, kept), and the facts it learnt."""
    folder = RESULTS / "loop_vs_peers" / f"{chip}-seed{seed}"
    done = folder / "learnt"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        target = SimRNGD(seed=seed)
        with EmbeddedStore(folder / "data") as store:
            Session(store, target).learn(toolchain=VERSION)
        done.write_text("")
    target = SimRNGD(seed=seed)
    with EmbeddedStore(folder / "data") as store:
        facts = read_knowledge(store, VERSION, target.pack().capabilities).facts
    return folder / "data", facts


def chiplore_run(chip: str, kernel: str, seed: int, budget_s: float) -> dict:
    graph, _ = learnt_graph(chip, seed)
    target = SimRNGD(seed=seed)
    bound = spec_of(target, kernel).bound_cycles
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "data"
        shutil.copytree(graph, data, ignore=shutil.ignore_patterns("*.sock", "*.pid"))
        with EmbeddedStore(data) as store:
            start = time.perf_counter()
            Session(store, target).optimize([kernel], toolchain=VERSION, budget_s=budget_s, seed=seed)
            wall = time.perf_counter() - start
            curve = [(spent, true_cycles(source) / bound) for spent, _, source in best_history(store, kernel)]
            jobs = store.read("MATCH (r:DeviceRun {kernel: $k}) RETURN count(r) AS n, sum(r.device_s) AS s",
                              {"k": kernel})[0]  # fmt: skip
    return {"curve": curve, "jobs": int(jobs["n"]), "device_s": float(jobs["s"] or 0.0), "wall_s": wall}


# ---- the peers -----------------------------------------------------------------------------------------


class Trials:
    """A peer's device: the host test, then one job through the runner, each new program once."""

    def __init__(self, kind: str, target: SimRNGD, spec: KernelSpec, space: DesignSpace, facts: Facts,
                 budget_s: float) -> None:  # fmt: skip
        self.kind, self.target, self.spec, self.space, self.facts = kind, target, spec, space, facts
        self.runner = DeviceRunner(target, self._record, budget_s=budget_s, backoff_s=0.0)
        self.seen: dict[str, float] = {}
        self.best = (math.inf, "")
        self.curve: list[tuple[float, float]] = []
        self.jobs = 0

    def _record(self, job: DeviceJob, sha: str, result: DeviceResult) -> str:
        self.jobs += 1
        return f"{self.kind}-{self.jobs}"

    def measure(self, setting: Params) -> float | None:
        """The setting's measured cycles (inf when refused, incorrect or failed; the same program
        is measured once); None once the budget is spent."""
        if not self.space.valid(setting, self.facts):
            return math.inf
        source = self.space.source(setting, self.facts, VERSION)
        if source in self.seen:
            return self.seen[source]
        tested = self.target.host_test(source, self.spec.name, VERSION)
        measured = math.inf
        if tested.correctness is not None and tested.correctness.passed:
            try:
                outcome = self.runner.run(self.spec.name, content_sha(source), source, VERSION, fixtures="smoke",
                                          repeats=PEER_REPEATS)  # fmt: skip
            except BudgetExhausted:
                return None
            correct = outcome.result.correctness is None or outcome.result.correctness.passed
            if outcome.ok and correct and outcome.result.median_cycles:
                measured = float(outcome.result.median_cycles)
        self.seen[source] = measured
        if measured < self.best[0]:
            self.best = (measured, source)
            self.curve.append((self.runner.spent_s, true_cycles(source) / self.spec.bound_cycles))
        return measured


def peer_run(kind: str, chip: str, kernel: str, seed: int, budget_s: float) -> dict:
    _, facts = learnt_graph(chip, seed)
    target = SimRNGD(seed=1000 + seed)
    space, spec = space_of(target, kernel), spec_of(target, kernel)
    trials = Trials(kind, target, spec, space, facts, budget_s)
    start = time.perf_counter()
    ask, tell = _sampler(kind, space, seed, facts)
    stale = 0
    while stale < STALE_DRAWS:
        known = len(trials.seen)
        setting, trial = ask()
        if setting is None:
            break
        measured = trials.measure(setting)
        if measured is None:
            break
        tell(trial, measured)
        stale = 0 if len(trials.seen) > known else stale + 1
    return {"curve": trials.curve, "jobs": trials.jobs, "device_s": trials.runner.spent_s,
            "wall_s": time.perf_counter() - start}  # fmt: skip


def draw(space: DesignSpace, rng: random.Random, facts: Facts | None = None, tries: int = 10_000) -> Params | None:
    """A uniformly random valid setting (each knob drawn uniformly, invalid settings drawn again), so a
    space too large to list is sampled as fairly as a small one; None if `tries` draws find none."""
    for _ in range(tries):
        setting = {knob.name: rng.choice(knob.values) for knob in space.knobs}
        if facts is None or space.valid(setting, facts):
            return setting
    return None


Ask = Callable[[], tuple[Params | None, object]]
Tell = Callable[[object, float], None]


def _sampler(kind: str, space: DesignSpace, seed: int, facts: Facts) -> tuple[Ask, Tell]:
    """(ask, tell) of a peer: ask gives a setting (None: nothing left) and a handle, tell its cycles."""
    if kind == "random":
        rng = random.Random(seed)
        return (lambda: (draw(space, rng, facts), None)), (lambda t, v: None)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if kind == "optuna-tpe":
        sampler: optuna.samplers.BaseSampler = optuna.samplers.TPESampler(seed=seed)
    elif kind == "optuna-cmaes":
        sampler = optuna.samplers.CmaEsSampler(seed=seed, with_margin=True)
    else:
        sampler = optuna.samplers.GPSampler(seed=seed)
    study = optuna.create_study(sampler=sampler, direction="minimize")
    ordinal = kind == "optuna-cmaes"  # CMA-ES moves along each knob's ordered values

    def ask() -> tuple[Params | None, object]:
        trial = study.ask()
        if ordinal:
            setting = {k.name: k.values[trial.suggest_int(k.name, 0, len(k.values) - 1)] for k in space.knobs}
        else:
            setting = {k.name: trial.suggest_categorical(k.name, k.values) for k in space.knobs}
        return setting, trial

    def tell(trial: object, cycles: float) -> None:
        if math.isfinite(cycles):
            study.tell(trial, cycles)  # type: ignore[arg-type]
        else:  # refused or failed: no value a model could fit
            study.tell(trial, state=optuna.trial.TrialState.FAIL)  # type: ignore[arg-type]

    return ask, tell


# ---- the table and the figure --------------------------------------------------------------------------


def at(curve: list[list[float]], spent: float) -> float | None:
    """The true ratio of the method's best once `spent` device-seconds were used (None: nothing
    measured yet). Its best is the one it measured fastest, not always the truly fastest it ran."""
    ratio = None
    for seconds, value in curve:
        if seconds <= spent + 1e-9:
            ratio = value
    return ratio


def reached(curve: list[list[float]], budget_s: float) -> float:
    """Device-seconds until the method's best was first within WITHIN of the bound (the budget if
    never: a floor)."""
    return next((seconds for seconds, value in curve if value <= WITHIN), budget_s)


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def report(rows: list[dict], budget_s: float, figure: Path | None) -> dict:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for row in rows:
        if row["budget_s"] == budget_s:
            groups.setdefault((row["chip"], row["kernel"], row["method"]), []).append(row)
    table = Table(title=f"loop vs peers at {budget_s:.0f} device-s per kernel, toolchain {VERSION} "
                        "(medians over seeds; true ratios)")  # fmt: skip
    columns = ["chip", "kernel", "method", "seeds", *(f"x bound @{f:.0%}" for f in FRACTIONS),
               f"device-s to {WITHIN:.2f}x", "reached", "jobs", "device-s"]  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column in ("chip", "kernel", "method") else "right")
    summary: dict = {}
    for (chip, kernel, method), results in sorted(groups.items()):
        anytime = []
        for fraction in FRACTIONS:
            values = [at(r["curve"], fraction * budget_s) for r in results]
            known = [v for v in values if v is not None]
            anytime.append(statistics.median(known) if len(known) == len(values) else None)
        to_within = statistics.median(reached(r["curve"], budget_s) for r in results)
        got = sum(reached(r["curve"], math.inf) < math.inf for r in results)
        entry = {"seeds": len(results), "anytime": anytime, "to_within_s": to_within, "reached": got,
                 "jobs": statistics.median(r["jobs"] for r in results),
                 "device_s": statistics.median(r["device_s"] for r in results)}  # fmt: skip
        summary[f"{chip}/{kernel}/{method}"] = entry
        table.add_row(chip, kernel, method, str(len(results)), *("-" if v is None else f"{v:.3f}" for v in anytime),
                      f"{to_within:.0f}", f"{got}/{len(results)}", f"{entry['jobs']:.0f}",
                      f"{entry['device_s']:.0f}")  # fmt: skip
    console.print(table)
    for chip, kernel in sorted({(c, k) for c, k, _ in groups}):
        ours, tpe = summary.get(f"{chip}/{kernel}/chiplore"), summary.get(f"{chip}/{kernel}/optuna-tpe")
        if ours and tpe:
            console.print(f"{chip} {kernel}: device-s to {WITHIN:.2f}x, chiplore {ours['to_within_s']:.0f} vs TPE "
                          f"{tpe['to_within_s']:.0f} ({ours['to_within_s'] / max(tpe['to_within_s'], 1e-9):.2f} of "
                          "TPE's; a seed that never got there counts as the budget)")  # fmt: skip
    if figure is not None and groups:
        plot(groups, budget_s, figure)
        console.print(f"figure: {figure}")
    return summary


def plot(groups: dict[tuple[str, str, str], list[dict]], budget_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chips = sorted({c for c, _, _ in groups})
    kernels = sorted({k for _, k, _ in groups})
    figure, axes = plt.subplots(len(chips), len(kernels), figsize=(4.2 * len(kernels), 3.2 * len(chips)),
                                squeeze=False)  # fmt: skip
    grid = [i / 50 for i in range(1, 51)]
    for row, chip in enumerate(chips):
        for col, kernel in enumerate(kernels):
            ax = axes[row][col]
            for method in METHODS:
                results = groups.get((chip, kernel, method))
                if not results:
                    continue
                xs, ys = [], []
                for fraction in grid:
                    values = [at(r["curve"], fraction * budget_s) for r in results]
                    if all(v is not None for v in values):
                        xs.append(fraction)
                        ys.append(statistics.median(values))  # type: ignore[type-var]
                ax.step(xs, ys, where="post", label=f"{method} ({len(results)})")
            ax.axhline(WITHIN, color="grey", linestyle=":", linewidth=0.8)
            ax.set_title(f"{kernel} ({chip} chip)", fontsize=9)
            ax.set_xlabel("fraction of the device budget")
            ax.set_ylabel("best x bound (true)")
            ax.set_ylim(0.98, 1.6)
            ax.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def seeds_of(text: str) -> list[int]:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default="sliding_project_qkv,sliding_attention_output,decoder_feedforward",
                        help="comma-separated kernels the pack designs")  # fmt: skip
    parser.add_argument("--seeds", default="1-5", help="e.g. 1-5 or 1,3")
    parser.add_argument("--chips", default="default,other")
    parser.add_argument("--methods", default="chiplore,random,optuna-tpe,optuna-cmaes")
    parser.add_argument("--budget", type=float, default=600.0, help="device-seconds per kernel, every method")
    parser.add_argument("--results", type=Path, default=RESULTS / "loop_vs_peers.jsonl")
    parser.add_argument("--figure", type=Path, default=RESULTS / "loop_vs_peers.png")
    parser.add_argument("--report-only", action="store_true", help="print what --results holds; run nothing")
    parser.add_argument("--json", type=Path, help="the summary as JSON")
    args = parser.parse_args()
    try:
        seeds = seeds_of(args.seeds)
    except ValueError:
        parser.error(f"--seeds {args.seeds!r}: numbers and ranges, like 1-5 or 1,3")
    chips = [c for c in args.chips.split(",") if c]
    methods = [m for m in args.methods.split(",") if m]
    if bad := [c for c in chips if c not in CHIPS]:
        parser.error(f"unknown chip {', '.join(bad)}; choose from {', '.join(CHIPS)}")
    if bad := [m for m in methods if m not in METHODS]:
        parser.error(f"unknown method {', '.join(bad)}; choose from {', '.join(METHODS)}")
    for method, module in (("optuna-cmaes", "cmaes"), ("optuna-gp", "torch")):
        if method in methods and importlib.util.find_spec(module) is None:
            parser.error(f"{method} needs the {module} package: pip install {module}")
    designed = designed_kernels(SimRNGD())
    kernels = [k for k in args.kernels.split(",") if k]
    if bad := [k for k in kernels if k not in designed]:
        parser.error(f"{', '.join(bad)}: not a kernel the pack designs; it designs {', '.join(designed)}")
    done = {(r["chip"], r["kernel"], r["method"], r["seed"], r["budget_s"]) for r in load(args.results)}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    for chip in chips if not args.report_only else []:
        use_chip(chip)
        for seed in seeds:
            for kernel in kernels:
                for method in methods:
                    if (chip, kernel, method, seed, args.budget) in done:
                        continue
                    run = chiplore_run if method == "chiplore" else lambda *a, m=method: peer_run(m, *a)
                    result = run(chip, kernel, seed, args.budget)
                    row = {"chip": chip, "kernel": kernel, "method": method, "seed": seed, "budget_s": args.budget,
                           **result}  # fmt: skip
                    with args.results.open("a") as out:
                        out.write(json.dumps(row) + "\n")
                    final = row["curve"][-1][1] if row["curve"] else math.inf
                    console.print(f"{chip} {kernel} {method} seed {seed}: {final:.3f}x, {row['device_s']:.0f} "
                                  f"device-s, {row['jobs']} jobs, {row['wall_s']:.0f} s wall")  # fmt: skip
    rows = [r for r in load(args.results) if r["chip"] in chips and r["kernel"] in kernels and r["method"] in methods
            and r["seed"] in seeds]  # fmt: skip
    summary = report(rows, args.budget, args.figure)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
