"""The design generator on every kernel pack SimRNGD ships (the built-in kernels first, then the packs
of other shapes, each with its kernel.toml op graph): how big its space is, whether its programs
compile, and how close its best design comes to the weight-movement bound, in true cycles.

    python benchmarks/generator.py [--kernels K,...] [--random SEED,...] [--packs DIR,...] [--versions 0.6.0,0.7.0]
                                   [--chip FILE]
                                   [--evals 200] [--seconds 900] [--exhaustive] [--sample 30] [--json FILE]

Per kernel and toolchain: the space's valid points (`points`, with the compile-time facts the pack's
own probes find: `learnt.compile_facts`), how many of the programs compile (every program the search
visits, and a random `--sample` of the others), the best true cycles a hill climb over the space finds
(restarts from the best sampled point of each k-group choice, one knob moved at a time, at most
`--evals` estimates or `--seconds`), that over the kernel's bound and over its floor (the bound plus
what every program pays besides moving weights: `chiplore.simulator.cost.bound.floor_cycles`), and
whether the best program passes the host test. `--chip FILE` measures on another chip (a
CHIPLORE_SIM_TRUTH file; the bound is that chip's). `--packs DIR,...` adds packs of your own.
`--random 6,17` adds random packs (`chiplore.simulator.testing.random_pack`, as
benchmarks/unseen_kernels.py draws them; `--kernels ''` leaves the shipped ones out); `--exhaustive`
prices every valid point instead of searching, so the best is the space's own.

True cycles come from `chiplore.simulator.cost.estimate` (the harness's noise-free cycles): the benchmark
measures the generator, which itself never calls it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.core.pack import DesignSpace, Facts, Params, points
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.cost.bound import floor_cycles, weight_bound_cycles
from chiplore.simulator.execute.grading import host_test
from chiplore.simulator.kernels.builtin import shipped_folders
from chiplore.simulator.kernels.pack import KernelPack, read_pack
from chiplore.simulator.pack.generator import generated_space, generation_problem, vocab
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.testing import random_pack
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.harness import builtin_kernels

console = Console(width=160)
# the built-in kernels in offering order, then the other shipped packs
ALL = (*builtin_kernels(), *(f.name for f in shipped_folders() if f.name not in builtin_kernels()))


def shipped_pack(kernel: str) -> KernelPack:
    """A shipped pack by kernel name: its spec (with the op graph) and its case (fixtures, reference)."""
    found = [folder for folder in shipped_folders() if folder.name == kernel]
    if not found:
        raise SystemExit(f"no shipped kernel {kernel!r}; --kernels takes {', '.join(ALL)}")
    return read_pack(found[0], "built-in")


def random_packs(seeds: list[int], scratch: Path) -> dict[str, KernelPack]:
    """Random packs by kernel name (a seed whose pack does not build is said so and left out)."""
    packs = {}
    for seed in seeds:
        built = random_pack(seed, scratch / str(seed))
        if built.status != "built":
            console.print(f"[red]random pack {seed}: {built.status} {built.reason}")
            continue
        pack = read_pack(built.folder, "installed")
        packs[pack.spec.name] = pack
    return packs


def key(p: Params) -> str:
    return json.dumps(p, sort_keys=True)


def lines(space: DesignSpace, here: Params, facts: Facts) -> list[Params]:
    """Every valid setting that differs from `here` in one knob (any value of it: a plateau one step
    away does not stop the climb)."""
    out = []
    for knob in space.knobs:
        for value in knob.values:
            if value != here.get(knob.name):
                moved = {**here, knob.name: value}
                if space.valid(moved, facts):
                    out.append(moved)
    return out


def climb(
    space: DesignSpace, facts: Facts, cost: Callable[[Params], float], evals: int, seconds: float = math.inf
) -> tuple[float, Params, int]:
    """The best point a search finds within `evals` estimates: a seeded sample of a quarter of them over
    the valid points, then hill climbs (the best move of one knob to any of its values, while it
    improves) from the best sampled point of each value of the first knob, best first."""
    valid = list(points(space, facts))
    if not valid:
        return math.inf, {}, 0
    seen: dict[str, float] = {}
    deadline = time.perf_counter() + seconds

    def spent() -> bool:
        return len(seen) >= evals or time.perf_counter() > deadline

    def priced(p: Params) -> float:
        if key(p) not in seen and not spent():
            seen[key(p)] = cost(p)
        return seen.get(key(p), math.inf)

    sample = random.Random(0).sample(valid, min(len(valid), max(evals // 4, 1)))
    ranked = sorted(sample, key=priced)
    first = space.knobs[0].name  # one climb from the best sampled point of each of its values
    starts = [next(p for p in ranked if p[first] == value) for value in dict.fromkeys(p[first] for p in ranked)]
    best = (priced(ranked[0]), ranked[0])
    for start in sorted(starts, key=priced):
        here, value = start, priced(start)
        while not spent():
            moves = [(priced(n), n) for n in lines(space, here, facts)]
            better = min(moves, key=lambda m: m[0], default=(math.inf, here))
            if better[0] >= value:
                break
            value, here = better
        best = min(best, (value, here), key=lambda b: b[0])
    return best[0], best[1], len(seen)


def run(pack: KernelPack, version: str, search: Search) -> dict[str, object]:
    spec, kernel = pack.spec, pack.spec.name
    problem = generation_problem(spec)
    bound, floor = weight_bound_cycles(spec.weight_bytes), floor_cycles(spec.weight_bytes)
    row: dict[str, object] = {"kernel": kernel, "version": version, "bound": bound, "floor": floor}
    if problem:
        return {**row, "problem": problem}
    facts = compile_facts(version)
    space = generated_space(spec, vocab.chip(facts))  # the shape the compile probes find on the chip
    assert space is not None
    start = time.perf_counter()
    valid = list(points(space, facts))
    failures: list[str] = []

    def cost(p: Params) -> float:
        source = space.source(p, facts, version)
        try:
            return estimate(source, version).cycles
        except NotCompiled as error:
            failures.append(f"{key(p)}: {error}")
            return math.inf

    if search.exhaustive:
        priced = [(cost(p), p) for p in valid]
        best, best_p = min(priced, key=lambda c: c[0], default=(math.inf, {}))
        visited = len(priced)
    else:
        best, best_p, visited = climb(space, facts, cost, search.evals, search.seconds)
    others = random.Random(1).sample(valid, min(search.sample, len(valid)))
    refused = [p for p in others if not check(space.source(p, facts, version), version).ok]
    failures += [f"{key(p)}: does not compile" for p in refused]
    tested = host_test(space.source(best_p, facts, version), pack.case, version) if best < math.inf else None
    row.update(points=len(valid), checked=visited + len(others), failed=len(failures), failures=failures[:3],
               cycles=best, ratio=best / bound, floor_ratio=best / floor, params=best_p,
               seconds=time.perf_counter() - start,
               host=None if tested is None or tested.correctness is None else tested.correctness.passed)  # fmt: skip
    return row


@dataclass(frozen=True)
class Search:
    """How each space is searched: a climb within `evals` estimates or `seconds`, or every point."""

    evals: int
    seconds: float
    sample: int
    exhaustive: bool = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(ALL))
    parser.add_argument("--random", default="", help="seeds of random packs to add (benchmarks/unseen_kernels.py's)")
    parser.add_argument("--packs", default="", help="folders of kernel packs of your own to add (comma-separated)")
    parser.add_argument("--exhaustive", action="store_true", help="price every valid point instead of searching")
    parser.add_argument("--versions", default="0.6.0,0.7.0")
    parser.add_argument("--chip", help="a CHIPLORE_SIM_TRUTH file: measure on that chip")
    parser.add_argument("--evals", type=int, default=200, help="estimates per search")
    parser.add_argument("--seconds", type=float, default=900, help="search time per kernel and toolchain")
    parser.add_argument("--sample", type=int, default=30, help="further points only compiled")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    rows = []
    table = Table(title=f"generated designs ({'chip ' + args.chip if args.chip else 'default chip'}; true cycles)")
    for column in ("kernel", "toolchain", "points", "compile", "best cycles", "x bound", "x floor", "host",
                   "best knobs", "s"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("kernel", "best knobs") else "right")
    scratch = Path(tempfile.mkdtemp(prefix="chiplore-generator-"))
    packs = {kernel: shipped_pack(kernel) for kernel in args.kernels.split(",") if kernel}
    packs |= random_packs([int(seed) for seed in args.random.split(",") if seed], scratch)
    for folder in (Path(f).expanduser() for f in args.packs.split(",") if f):  # read as `kernel add` reads them
        pack = read_pack(folder, "installed")
        packs[pack.spec.name] = pack
    if args.chip:  # after the random packs: a pack is written (and its baseline checked) for the documented chip
        os.environ["CHIPLORE_SIM_TRUTH"] = str(Path(args.chip).resolve())
    search = Search(args.evals, args.seconds, args.sample, args.exhaustive)
    for kernel, pack in packs.items():
        for version in args.versions.split(","):
            row = run(pack, version, search)
            rows.append(row)
            if "problem" in row:
                table.add_row(kernel, version, "-", "-", "-", "-", "-", "-", str(row["problem"]), "-")
                continue
            checked, failed = int(row["checked"]), int(row["failed"])  # type: ignore[call-overload]
            table.add_row(kernel, version, str(row["points"]), f"{checked - failed}/{checked}",
                          f"{row['cycles']:,.0f}", f"{row['ratio']:.3f}", f"{row['floor_ratio']:.3f}", str(row["host"]),
                          key(row["params"]), f"{row['seconds']:.0f}")  # type: ignore[arg-type]  # fmt: skip
            for failure in row["failures"]:  # type: ignore[attr-defined]
                console.print(f"[red]{kernel} {version}: {failure}")
    console.print(table)
    shutil.rmtree(scratch, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
