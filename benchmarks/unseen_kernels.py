"""Kernels nobody here wrote: random well-formed kernel packs through `kernel add`, the design space,
the compiler and the host test, and what goes wrong, counted.

    python benchmarks/unseen_kernels.py [--packs 300] [--seed 0] [--points 40] [--jobs 1]
                                        [--results FILE] [--fresh] [--show SEED [--files] [--shrink]] [--json]

Pack i is `chiplore.simulator.testing.random_pack(seed * 1,000,000 + i)`: a random op graph over the
whole vocabulary (its kind is the seed mod 6), random shapes, dtypes, scales and clashing names, no
reference.py (the op graph's reference grades it) and a baseline the design generator writes. Each
is built, added to a SimRNGD as `chiplore kernel add` adds it, designed (40 seeded valid points of
its space compiled, the first one host-tested on the smoke set); `chiplore.simulator.testing.campaign`
says what is counted. With CHIPLORE_SIM_TRUTH naming a chip file (simulator/chips/), packs, baselines
and spaces are written for that chip's shape. Prints a table by kind of pack, then every distinct
failure reason (names and numbers generalised) with how many packs show it and the seed of the
smallest one.

Resumable: each pack's outcome is a line of `--results` (default
benchmarks/results/unseen_kernels-seed<S>-points<P>.jsonl); a rerun skips the seeds it holds
(`--fresh` starts over). `--show SEED` prints that pack in brief (its axes, signature and ops;
`--files`: its kernel.toml and baseline.fe as well; `--shrink`: the smallest pack that fails to build
as it does, `chiplore.simulator.testing.shrink`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.simulator.target import SimRNGD
from chiplore.simulator.testing import random_pack
from chiplore.simulator.testing.campaign import COLUMNS, PackOutcome, failure_reasons, tabulate, try_pack
from chiplore.simulator.testing.shrink import shrink

console = Console(width=200)
RESULTS = Path(__file__).resolve().parent / "results"
_worker: tuple[Path, SimRNGD] | None = None  # one target and work folder per process


def _start_worker() -> None:
    global _worker
    root = Path(tempfile.mkdtemp(prefix="unseen-kernels-"))
    _worker = (root, SimRNGD(kernels_dir=root / "installed"))


def _run(seed: int, points: int) -> dict[str, object]:
    if _worker is None:
        _start_worker()
    root, target = _worker  # type: ignore[misc]
    return try_pack(seed, root / "packs", target, points).to_json()


def campaign(seeds: list[int], points: int, jobs: int, results: Path) -> list[PackOutcome]:
    done = {}
    if results.is_file():
        for line in results.read_text().splitlines():
            if line.strip():
                outcome = PackOutcome.from_json(json.loads(line))
                done[outcome.seed] = outcome
    todo = [seed for seed in seeds if seed not in done]
    if done:
        console.print(f"{len(done)} packs already in {results}; {len(todo)} to go")
    results.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with results.open("a") as out:

        def record(index: int, data: dict[str, object]) -> None:
            outcome = PackOutcome.from_json(data)
            done[outcome.seed] = outcome
            out.write(json.dumps(data) + "\n")
            out.flush()
            elapsed = time.monotonic() - started
            left = elapsed / (index + 1) * (len(todo) - index - 1)
            status = outcome.build if not outcome.loaded else ("loaded" if not outcome.crashes else "crashed")
            status = "refused" if outcome.refused else status
            console.print(f"[{index + 1}/{len(todo)}] seed {outcome.seed} {outcome.kind}: {status}, "
                          f"{outcome.points} points ({sum(outcome.not_compiling.values())} not compiling), "
                          f"host test {outcome.host_test[:60] or '-'}, {len(outcome.crashes)} crashes "
                          f"({outcome.seconds:.0f} s; about {left / 60:.0f} min left)", highlight=False)  # fmt: skip

        if jobs <= 1:
            for index, seed in enumerate(todo):
                record(index, _run(seed, points))
        else:
            with ProcessPoolExecutor(jobs, initializer=_start_worker) as pool:
                for index, data in enumerate(pool.map(_run, todo, [points] * len(todo))):
                    record(index, data)
    return [done[seed] for seed in seeds]


def report(outcomes: list[PackOutcome], as_json: bool) -> None:
    rows = tabulate(outcomes)
    reasons = failure_reasons(outcomes)
    codes: dict[str, int] = {}
    for outcome in outcomes:
        for code, count in outcome.not_compiling.items():
            codes[code] = codes.get(code, 0) + count
    if as_json:
        listed = [{"what": w, "reason": r, "packs": n, "example_seed": s} for w, r, n, s in reasons]
        by_kind = {kind: dict(row) for kind, row in rows.items()}
        print(json.dumps({"by_kind": by_kind, "not_compiling_by_code": codes, "reasons": listed}, indent=2))
        return
    table = Table(title=f"random kernel packs ({len(outcomes)})")
    table.add_column("kind")
    for column in COLUMNS:
        table.add_column(column, justify="right")
    for kind, row in rows.items():
        table.add_row(kind, *(f"{row[column]:,}" for column in COLUMNS))
    console.print(table)
    console.print("points not compiling, by the code of their first error: "
                  + (", ".join(f"{code} {count}" for code, count in sorted(codes.items())) or "none"))  # fmt: skip
    reasons_table = Table(title="distinct failure reasons (names and numbers generalised)")
    for column in ("what", "packs", "example seed", "reason"):
        reasons_table.add_column(column, overflow="fold")
    for what, reason, count, seed in reasons:
        reasons_table.add_row(what, str(count), str(seed), reason)
    console.print(reasons_table)


def show(seed: int, files: bool, smallest: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        build = random_pack(seed, Path(folder))
        if smallest and not build.built:
            build = shrink(build.sketch, Path(folder) / "shrink")[1]
        print(f"# seed {seed}: {build.status} {build.reason}\n{build.sketch.summary()}")
        for name in ("kernel.toml", "baseline.fe") if files else ():
            print(f"# ---- {name}\n{(build.folder / name).read_text()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", type=int, default=40, help="valid points compiled per pack")
    parser.add_argument("--jobs", type=int, default=1, help="packs tried at once (one process each)")
    parser.add_argument("--results", type=Path, help="the JSON-lines file of outcomes (resumed from)")
    parser.add_argument("--fresh", action="store_true", help="forget the outcomes in --results")
    parser.add_argument("--show", type=int, metavar="SEED", help="print one pack in brief and stop")
    parser.add_argument("--files", action="store_true", help="with --show: its kernel.toml and baseline.fe too")
    parser.add_argument("--shrink", action="store_true", help="with --show: the smallest pack failing as it does")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.show is not None:
        show(args.show, args.files, args.shrink)
        return
    results = args.results or RESULTS / f"unseen_kernels-seed{args.seed}-points{args.points}.jsonl"
    if args.fresh and results.exists():
        results.unlink()
    seeds = [args.seed * 1_000_000 + i for i in range(args.packs)]
    report(campaign(seeds, args.points, args.jobs, results), args.json)


if __name__ == "__main__":
    sys.exit(main())
