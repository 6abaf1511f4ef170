"""Hostile programs through `ferc check` and `fe-run submit`: every input gets coded diagnostics, a
device result or one line of refusal, bounded in time and memory (docs/simrngd.md §5.6).

    python benchmarks/hostile_programs.py [--programs 1000] [--seed 0] [--workers 2] [--timeout-s 120]
                                          [--memory-mb 2048] [--json FILE]

Input i of seed s is `chiplore.simulator.toolchain.hostile.hostile(s, i)` (deep nesting of every
construct that nests, long files, binary garbage, invalid UTF-8, NUL bytes, huge literals, axes,
loop ranges, tile offsets and tensors, shadowed names, mutants of the shipped programs). Each runs
as a user would run it, in its own process under a wall-time limit and an address-space limit:
`ferc check FILE`, then `fe-run submit FILE --kernel K --fixtures smoke` on a device of the
campaign's own. Prints one table per tool, a row per kind: the runs, how they were answered, the
uncoded ones (a traceback, E0100, a timeout, a kill, an unexpected exit or refusal) and the worst
wall time and peak memory. Exits 1 when any run is uncoded.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.simulator.toolchain.hostile import ALL_KINDS, UNCODED, Hostile, answer, hostile

console = Console(width=160)
TOOLS = ("ferc check", "fe-run submit")


@dataclass
class Run:
    index: int
    kind: str
    tool: str
    answer: str  # chiplore.simulator.toolchain.hostile.answer: "coded", "clean", "ran", "refused" or uncoded
    codes: list[str]
    missed: bool  # the kind's expected code was not among them (ferc only)
    exit_code: int
    seconds: float
    max_rss_mb: float
    detail: str


# The tool under an address-space limit it sets on itself before anything is imported, then run as
# `python -m` runs it (a preexec_fn would not be safe beside the campaign's threads).
LAUNCH = (
    "import resource, runpy, sys; limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, (limit, limit)); "
    "sys.argv = [sys.argv[2], *sys.argv[3:]]; runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)


def command(tool: str, path: Path, item: Hostile, data_dir: Path, memory_mb: int) -> list[str]:
    module, args = ("chiplore.simulator.ferc", ["check", str(path)]) if tool == "ferc check" else (
        "chiplore.simulator.fe_run", ["submit", str(path), "--kernel", item.kernel, "--fixtures", "smoke", "--agent",
                                      f"hostile{item.index}", "--data-dir", str(data_dir)])  # fmt: skip
    return [sys.executable, "-c", LAUNCH, str(memory_mb * 1024 * 1024), module, *args]


def run_one(tool: str, item: Hostile, folder: Path, timeout_s: float, memory_mb: int) -> Run:
    """One tool on one input in a process of its own, its wall time and peak RSS (from wait4)."""
    path = folder / f"{item.index:05d}.fe"
    path.write_bytes(item.data)
    out_path, err_path = folder / f"{item.index:05d}.{tool[0]}.out", folder / f"{item.index:05d}.{tool[0]}.err"
    env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "0"}
    started = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen(command(tool, path, item, folder / "data", memory_mb), stdout=out, stderr=err,
                                   env=env, start_new_session=True)  # fmt: skip
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            os.killpg(process.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        _, status, usage = os.wait4(process.pid, 0)
        timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    seconds = time.perf_counter() - started
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    verdict = answer(process.returncode, stdout, stderr, tool)
    if timed_out.is_set():
        verdict = verdict._replace(answer="timeout", detail=f"killed after {timeout_s:.0f} s")
    missed = tool == "ferc check" and bool(item.expect) and not (set(verdict.codes) & item.expect)
    for leftover in (out_path, err_path):
        leftover.unlink()
    return Run(index=item.index, kind=item.kind, tool=tool, answer=verdict.answer, codes=list(verdict.codes),
               missed=missed, exit_code=process.returncode, seconds=seconds, max_rss_mb=usage.ru_maxrss / 1024,
               detail=verdict.detail)  # fmt: skip


def campaign(programs: int, seed: int, workers: int, timeout_s: float, memory_mb: int) -> list[Run]:
    runs: list[Run] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="hostile-") as scratch:
        folders = [Path(scratch) / f"w{w}" for w in range(workers)]
        for folder in folders:
            folder.mkdir()

        def work(index: int) -> None:
            item = hostile(seed, index)
            folder = folders[index % workers]
            done = [run_one(tool, item, folder, timeout_s, memory_mb) for tool in TOOLS]
            (folder / f"{index:05d}.fe").unlink()
            with lock:
                runs.extend(done)
                if len(runs) // 2 % 50 == 0:
                    bad = sum(r.answer in UNCODED for r in runs)
                    console.print(f"  {len(runs) // 2:,} of {programs:,} inputs, {bad} uncoded", style="dim")

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, range(programs)))
    return sorted(runs, key=lambda r: (r.index, TOOLS.index(r.tool)))


def table(runs: list[Run], tool: str, seed: int) -> Table:
    rows: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if run.tool == tool:
            rows[run.kind].append(run)
    title = f"{tool}: {sum(len(r) for r in rows.values()):,} hostile inputs, seed {seed}"
    out = Table(title=title)
    columns = ("kind", "inputs", "coded", "clean/ran", "refused", "tracebacks", "E0100", "timeouts", "killed",
               "other", "expected code missing", "max s", "max RSS MB")  # fmt: skip
    for column in columns:
        out.add_column(column, justify="left" if column == "kind" else "right")
    for kind in [*[k for k in ALL_KINDS if k in rows], "all"]:
        group = [r for r in runs if r.tool == tool] if kind == "all" else rows[kind]
        count = {name: sum(r.answer == name for r in group) for name in (*UNCODED, "coded", "clean", "ran", "refused")}
        answered = count["clean"] + count["ran"]
        out.add_row(
            kind, f"{len(group):,}", f"{count['coded']:,}", f"{answered:,}", f"{count['refused']:,}",
            f"{count['traceback']:,}", f"{count['internal']:,}", f"{count['timeout']:,}", f"{count['killed']:,}",
            f"{count['unexpected']:,}", f"{sum(r.missed for r in group):,}", f"{max(r.seconds for r in group):.1f}",
            f"{max(r.max_rss_mb for r in group):.0f}", style="bold" if kind == "all" else None,
        )  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout-s", type=float, default=120.0, help="wall-time limit of one run")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit of one run")
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    args = parser.parse_args()

    started = time.perf_counter()
    runs = campaign(args.programs, args.seed, args.workers, args.timeout_s, args.memory_mb)
    wall = time.perf_counter() - started
    for tool in TOOLS:
        console.print(table(runs, tool, args.seed))
    uncoded = [r for r in runs if r.answer in UNCODED]
    missed = [r for r in runs if r.missed]
    console.print(f"{len(runs):,} runs in {wall:,.0f} s (limits per run: {args.timeout_s:.0f} s, "
                  f"{args.memory_mb:,} MB of address space); {len(uncoded)} uncoded, {len(missed)} without their "
                  "expected code")  # fmt: skip
    for run in (uncoded + missed)[:20]:
        console.print(f"  {run.tool} on input {run.index} ({run.kind}, `hostile({args.seed}, {run.index})`): "
                      f"{run.answer} {run.codes[:3]} {run.detail}", style="red")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=1))
    sys.exit(1 if uncoded or missed else 0)


if __name__ == "__main__":
    main()
