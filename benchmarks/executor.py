"""The functional executor's speed and its exactness: host tests, device grading and the executor's
fast tests timed before and after a change, and a check that every output bit stays the same.

    python benchmarks/executor.py [--repeats 3] [--save FILE] [--before FILE]
    python benchmarks/executor.py --record FILE      # every output's digest, programs included
    python benchmarks/executor.py --check FILE       # the same programs again: every digest must match

Timing: each figure is the median of `--repeats` fresh processes (so no cache of an earlier figure
helps; imports are not timed):

* `check`: the toolchain's check of a pack's baseline (0.6.0; the host test's first step, which
  also lowers it). Not the executor's, shown to read the host test against.
* `host test`: `SimRNGD().host_test` of the pack's baseline after that check: the smoke set's
  fixtures, the reference and the executor. `execute (warm)`: the executor alone on a second set, in
  the same process (lowering and fixtures ready).
* `a generated design, 2nd set`: the executor alone on the first valid point of the pack's design
  space (what the loop executes), after a first set has warmed its lowering.
* `grade 7 sets`: what the device's grader does for a `fixtures = "graded"` job of a built-in
  baseline (checked first, as the device does): draw, execute and compare on g0..g6.
* `fast tests`: the wall time of `pytest -m "not slow"` on the executor's test files.

`--save FILE` writes the figures; `--before FILE` prints them beside this run's. To measure an older
commit with this script: `git archive REV | tar -x -C /tmp/old` and run it with
`PYTHONPATH=/tmp/old` (the old tree's `chiplore` then comes first; its tests run in /tmp/old).

Exactness: `--record` runs every program of the corpus (each pack's baseline, the hand-written
programs and the bug zoo under tests/simulator/programs, and generated designs of every pack's design space
under 0.6.0 and 0.7.0) on all nine fixture sets and writes, per output, the sha256 of its bytes with
its shape and dtype (an error's type and message where it raises). `--check` reruns the recorded
programs (their text is in the file, so a changed generator does not change the corpus) and lists
every difference; it exits 1 if there is one. Record with the old tree on PYTHONPATH, check with the new.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

console = Console(width=150)
VERSION = "0.6.0"
DESIGN_VERSIONS = ("0.6.0", "0.7.0")
DESIGNS_PER_VERSION = 3  # the space's first valid point and two drawn at random
ALL_SETS = (*(f"g{i}" for i in range(7)), "exact", "cancel")
GRADED = tuple(f"g{i}" for i in range(7))
TEST_FILES = ("tests/simulator/test_executor.py", "tests/simulator/test_factored.py",
              "tests/simulator/test_fixtures.py", "tests/simulator/test_digits.py")  # fmt: skip


def root() -> Path:
    """The tree whose `chiplore` this process imports (PYTHONPATH may name an older one)."""
    import chiplore

    return Path(chiplore.__file__).resolve().parents[1]


def pack_folders() -> list[Path]:
    from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

    return sorted(p.parent for p in BUILTIN_PACKS.glob("*/kernel.toml"))


def packs() -> dict[str, object]:
    """Every shipped pack by kernel name (built-in or not)."""
    from chiplore.simulator.kernels.builtin import builtin_packs
    from chiplore.simulator.kernels.pack import read_pack

    found: dict[str, object] = dict(builtin_packs())
    for folder in pack_folders():
        if folder.name not in found:
            found[folder.name] = read_pack(folder, "CHIPLORE_KERNELS")
    return found


# ---- the corpus and its digests ---------------------------------------------------------------------


def corpus() -> list[dict[str, str | None]]:
    """(id, kernel, version, source) of every program the exactness check runs."""
    from chiplore.core.pack import points
    from chiplore.simulator.dsl.parser import parse
    from chiplore.simulator.pack import SimRNGDPack
    from chiplore.simulator.pack.generator.learnt import compile_facts

    entries: list[dict[str, str | None]] = []
    by_name = packs()
    for name, pack in by_name.items():
        entries.append({"id": f"{name}/baseline", "kernel": name, "version": None,
                        "source": pack.baseline})  # type: ignore[attr-defined]  # fmt: skip
    programs = root() / "tests" / "simulator" / "programs"
    if not programs.is_dir():  # an older tree kept them under simulator/kernels
        programs = root() / "simulator" / "kernels"
    for folder in ("examples", "bugs"):  # the baselines are the packs' own, above
        for path in sorted((programs / folder).glob("*.fe")):
            source = path.read_text()
            entries.append({"id": f"{folder}/{path.stem}", "kernel": parse(source).kernels[0].name, "version": None,
                            "source": source})  # fmt: skip
    target_pack = SimRNGDPack()
    for version in DESIGN_VERSIONS:
        facts = compile_facts(version)
        for name, pack in by_name.items():
            space = target_pack.design_space(pack.spec)  # type: ignore[attr-defined]
            if space is None:
                continue
            valid = list(points(space, facts))
            chosen = valid[:1] + random.Random(f"{name}/{version}").sample(valid[1:], min(2, len(valid) - 1))
            for p in chosen[:DESIGNS_PER_VERSION]:
                label = ",".join(f"{k}={v}" for k, v in sorted(p.items()))
                entries.append({"id": f"{name}/{version}/{label}", "kernel": name, "version": version,
                                "source": space.source(p, facts, version)})  # fmt: skip
    return entries


def digests(source: str, kernel: str, version: str | None) -> dict[str, object]:
    """Per fixture set, each output's digest (or the error the executor raised)."""
    from chiplore.simulator.execute.executor import execute_program
    from chiplore.simulator.execute.grading import case_inputs

    case = packs()[kernel].case  # type: ignore[attr-defined]
    out: dict[str, object] = {}
    for fixture_set in ALL_SETS:
        try:
            outputs = execute_program(source, case_inputs(case, fixture_set), version)
        except Exception as error:
            out[fixture_set] = f"{type(error).__name__}: {error}"
            continue
        out[fixture_set] = {name: _digest(value) for name, value in sorted(outputs.items())}
    return out


def _digest(value: np.ndarray) -> str:
    array = np.asarray(value)
    return f"{hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()} {array.dtype} {array.shape}"


def record(path: Path) -> None:
    entries = corpus()
    for number, entry in enumerate(entries, 1):
        started = time.perf_counter()
        entry["outputs"] = digests(entry["source"], entry["kernel"], entry["version"])  # type: ignore[arg-type,assignment]
        console.print(f"[{number}/{len(entries)}] {entry['id']}: {time.perf_counter() - started:.1f} s")
        path.write_text(json.dumps(entries, indent=1))


def check(path: Path, only: str | None = None) -> int:
    entries = [e for e in json.loads(path.read_text()) if "outputs" in e and (only is None or only in e["id"])]
    differences = 0
    for number, entry in enumerate(entries, 1):
        started = time.perf_counter()
        now = digests(entry["source"], entry["kernel"], entry["version"])
        differ = [s for s in ALL_SETS if now[s] != entry["outputs"][s]]
        differences += len(differ)
        status = "same" if not differ else f"DIFFERS on {', '.join(differ)}"
        console.print(f"[{number}/{len(entries)}] {entry['id']}: {status} ({time.perf_counter() - started:.1f} s)")
        for s in differ:
            console.print(f"    {s}: was {entry['outputs'][s]}\n    {s}: now {now[s]}")
    sets = sum(len(e["outputs"]) for e in entries)
    console.print(f"{len(entries)} programs, {sets} runs: {differences} differ")
    return 1 if differences else 0


# ---- timing ---------------------------------------------------------------------------------------


def worker(kind: str, kernel: str) -> dict[str, float]:
    """One fresh process's figures (printed as JSON for the parent)."""
    from chiplore.simulator.target import SimRNGD
    from chiplore.simulator.toolchain.check import check as ferc_check
    from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

    pack = packs()[kernel]
    source = pack.baseline  # type: ignore[attr-defined]
    # The target first: registering its packs forgets earlier checks, and the host test is timed after
    # the check (in the loop the compile screen has checked the program before its host test).
    target = SimRNGD(kernel_paths=(BUILTIN_PACKS,))
    started = time.perf_counter()
    ferc_check(source, VERSION)
    figures = {"check": time.perf_counter() - started}
    if kind == "host":
        started = time.perf_counter()
        result = target.host_test(source, kernel, VERSION)
        figures["host"] = time.perf_counter() - started
        if result.correctness is None:
            raise SystemExit(f"{kernel}: {result.message}")
        from chiplore.simulator.execute.executor import execute_program
        from chiplore.simulator.execute.grading import case_inputs

        inputs = case_inputs(pack.case, "g1")  # type: ignore[attr-defined]
        started = time.perf_counter()
        execute_program(source, inputs, VERSION)
        figures["execute_warm"] = time.perf_counter() - started
        design = first_design(kernel)
        if design is not None:  # what the loop executes: generated designs, not the baseline
            execute_program(design, case_inputs(pack.case, "g0"), VERSION)  # its lowering, warm
            started = time.perf_counter()
            execute_program(design, inputs, VERSION)
            figures["design_warm"] = time.perf_counter() - started
    else:
        from chiplore.simulator.target import grade_job

        started = time.perf_counter()
        correctness = grade_job(source, kernel, VERSION, GRADED)
        figures["grade"] = time.perf_counter() - started
        if correctness is None or not correctness.passed:
            raise SystemExit(f"{kernel}: not graded or failed")
    return figures


def first_design(kernel: str) -> str | None:
    """The program of the first valid point of the kernel's design space under VERSION (None: no space)."""
    from chiplore.core.pack import points
    from chiplore.simulator.pack import SimRNGDPack
    from chiplore.simulator.pack.generator.learnt import compile_facts

    space = SimRNGDPack().design_space(packs()[kernel].spec)  # type: ignore[attr-defined]
    if space is None:
        return None
    facts = compile_facts(VERSION)
    point = next(iter(points(space, facts)), None)
    return None if point is None else space.source(point, facts, VERSION)


def in_fresh_process(kind: str, kernel: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, "--worker", kind, kernel], capture_output=True, text=True,
                          check=False, env=os.environ.copy())  # fmt: skip
    if done.returncode:
        raise SystemExit(f"worker {kind} {kernel} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def fast_tests() -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *TEST_FILES, "-q", "-m", "not slow", "-p",
                           "no:cacheprovider", "-x", "--timeout=3000"], cwd=root(), capture_output=True, text=True,
                          check=False, env=os.environ.copy())  # fmt: skip
    if done.returncode:
        raise SystemExit(f"the executor's fast tests failed:\n{done.stdout[-3000:]}")
    return time.perf_counter() - started


def timings(repeats: int) -> dict[str, float]:
    from chiplore.simulator.toolchain.harness import builtin_kernels

    figures: dict[str, list[float]] = {}
    for kernel in packs():
        for _ in range(repeats):
            for name, value in in_fresh_process("host", kernel).items():
                figures.setdefault(f"{name} {kernel}", []).append(value)
    for kernel in builtin_kernels():
        for _ in range(repeats):
            figures.setdefault(f"grade {kernel}", []).append(in_fresh_process("grade", kernel)["grade"])
    for _ in range(repeats):
        figures.setdefault("fast tests", []).append(fast_tests())
    return {name: statistics.median(values) for name, values in figures.items()}


LABELS = {"check": "check (toolchain)", "host": "host test", "execute_warm": "execute, 2nd set (warm)",
          "design_warm": "a generated design, 2nd set", "grade": "grade 7 sets (device)"}  # fmt: skip


def show(now: dict[str, float], before: dict[str, float] | None) -> None:
    table = Table(title=f"The executor (median of fresh processes; {VERSION}; this machine), seconds")
    for header in ("figure", "kernel", *(("before", "after", "speedup") if before else ("seconds",))):
        table.add_column(header, justify="left" if header in ("figure", "kernel") else "right")
    for name, value in now.items():
        kind, _, kernel = name.partition(" ")
        label = "fast tests (-m 'not slow')" if name == "fast tests" else LABELS[kind]
        if before is None:
            table.add_row(label, kernel, f"{value:.2f}")
            continue
        old = before.get(name)
        table.add_row(label, kernel, f"{old:.2f}" if old is not None else "-", f"{value:.2f}",
                      f"{old / value:.1f}x" if old else "-")  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--check", type=Path, default=None)
    parser.add_argument("--only", default=None, help="with --check: the programs whose id contains this")
    parser.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.record:
        record(args.record)
        return
    if args.check:
        raise SystemExit(check(args.check, args.only))
    now = timings(args.repeats)
    if args.save:
        args.save.write_text(json.dumps(now, indent=1))
    show(now, json.loads(args.before.read_text()) if args.before else None)


if __name__ == "__main__":
    main()
