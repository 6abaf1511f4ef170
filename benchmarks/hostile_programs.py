"""Hostile programs through `ferc check` and `fe-run submit`: every input gets coded diagnostics, a
device result or one line of refusal, bounded in time and memory (docs/simrngd.md §5.6).

    python benchmarks/hostile_programs.py [--programs 1000] [--seed 0] [--workers 2] [--timeout-s 120]
                                          [--memory-mb 2048] [--spawn] [--json FILE]

Input i of seed s is `chiplore.simulator.toolchain.hostile.hostile(s, i)` (deep nesting of every
construct that nests, long files, binary garbage, invalid UTF-8, NUL bytes, huge literals, axes,
loop ranges, tile offsets and tensors, shadowed names, mutants of the shipped programs). Each tool
runs on each input in a process of its own, under a wall-time limit (SIGALRM, whose default action
ends the process) and an address-space limit (RLIMIT_AS): `ferc check FILE`, then `fe-run submit FILE
--kernel K --fixtures smoke` on a device of the campaign's own. By default that process is forked
from a worker that has imported both tools and checked nothing (the command line's own `main`, its
exit status, stdout and stderr; an exception it lets escape is printed and exits 1, as the
interpreter does), which saves the 1-2 s of imports each run would pay; `--spawn` starts a fresh
interpreter per run instead, exactly as a user's shell does. Prints one table per tool, a row per
kind: the runs, how they were answered, the uncoded ones (a traceback, E0100, a timeout, a kill, an
unexpected exit or refusal) and the worst wall time and peak RSS. Exits 1 when any run is uncoded.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.simulator.fe_run import main as fe_run
from chiplore.simulator.ferc import main as ferc
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


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int
    spawn: bool


def arguments(tool: str, path: Path, item: Hostile, data_dir: Path) -> list[str]:
    if tool == "ferc check":
        return ["check", str(path)]
    return ["submit", str(path), "--kernel", item.kernel, "--fixtures", "smoke", "--agent", f"hostile{item.index}",
            "--data-dir", str(data_dir)]  # fmt: skip


# --spawn: the tool in a fresh interpreter, under an address-space limit and an alarm it sets on itself
# before anything is imported, then run as `python -m` runs it.
LAUNCH = (
    "import resource, runpy, signal, sys; limit = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_AS, "
    "(limit, limit)); signal.alarm(int(sys.argv[2])); sys.argv = [sys.argv[3], *sys.argv[4:]]; "
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)"
)
MODULES = {"ferc check": "chiplore.simulator.ferc", "fe-run submit": "chiplore.simulator.fe_run"}


def _start(tool: str, args: list[str], out: int, err: int, limits: Limits) -> int:
    """The run's process id; its stdout and stderr go to the descriptors `out` and `err`."""
    memory = limits.memory_mb * 1024 * 1024
    alarm = math.ceil(limits.timeout_s)
    if limits.spawn:
        env = os.environ | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        command = [sys.executable, "-c", LAUNCH, str(memory), str(alarm), MODULES[tool], *args]
        return subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True).pid
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:  # the child: the tool's command line, as its console script runs it
        os.setsid()
        os.dup2(out, 1)
        os.dup2(err, 2)
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        signal.alarm(alarm)  # the default action of SIGALRM ends the process: a timeout
        cli, name = (ferc, "ferc") if tool == "ferc check" else (fe_run, "fe-run")
        try:
            cli.main(args=args, prog_name=name)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException:  # what the interpreter does with an exception that escapes main
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run_one(tool: str, item: Hostile, folder: Path, limits: Limits) -> Run:
    """One tool on one input in a process of its own, its wall time and peak RSS (from wait4)."""
    path = folder / f"{item.index:05d}.fe"
    path.write_bytes(item.data)
    out_path, err_path = folder / f"{item.index:05d}.{tool[0]}.out", folder / f"{item.index:05d}.{tool[0]}.err"
    started = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        pid = _start(tool, arguments(tool, path, item, folder / "data"), out.fileno(), err.fileno(), limits)
        _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - started
    exit_code = os.waitstatus_to_exitcode(status)
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    verdict = answer(exit_code, stdout, stderr, tool)
    if exit_code == -signal.SIGALRM:
        verdict = verdict._replace(answer="timeout", detail=f"ended by its {limits.timeout_s:.0f} s alarm")
    missed = tool == "ferc check" and bool(item.expect) and not (set(verdict.codes) & item.expect)
    for leftover in (out_path, err_path, *([path] if tool == TOOLS[-1] else [])):
        leftover.unlink()
    return Run(index=item.index, kind=item.kind, tool=tool, answer=verdict.answer, codes=list(verdict.codes),
               missed=missed, exit_code=exit_code, seconds=seconds, max_rss_mb=usage.ru_maxrss / 1024,
               detail=verdict.detail)  # fmt: skip


def _work(job: tuple[int, int, Path, Limits]) -> list[Run]:
    """Both tools on one input (in a worker process, single-threaded, so forking it is safe)."""
    seed, index, folder, limits = job
    item = hostile(seed, index)
    return [run_one(tool, item, folder, limits) for tool in TOOLS]


def campaign(programs: int, seed: int, workers: int, limits: Limits) -> list[Run]:
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="hostile-") as scratch:
        folders = [Path(scratch) / f"w{w}" for w in range(workers)]
        for folder in folders:
            folder.mkdir()
        jobs = [(seed, index, folders[index % workers], limits) for index in range(programs)]
        with multiprocessing.get_context("fork").Pool(workers, maxtasksperchild=50) as pool:
            for done in pool.imap_unordered(_work, jobs):
                runs.extend(done)
                if len(runs) // 2 % 50 == 0:
                    bad = sum(r.answer in UNCODED for r in runs)
                    console.print(f"  {len(runs) // 2:,} of {programs:,} inputs, {bad} uncoded", style="dim")
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
    parser.add_argument("--spawn", action="store_true", help="a fresh interpreter per run (slower: imports each time)")
    parser.add_argument("--json", type=Path, default=None, help="write every run here")
    args = parser.parse_args()

    started = time.perf_counter()
    runs = campaign(args.programs, args.seed, args.workers, Limits(args.timeout_s, args.memory_mb, args.spawn))
    wall = time.perf_counter() - started
    for tool in TOOLS:
        console.print(table(runs, tool, args.seed))
    uncoded = [r for r in runs if r.answer in UNCODED]
    missed = [r for r in runs if r.missed]
    how = "a fresh interpreter each" if args.spawn else "forked from a worker that imported the tools"
    console.print(f"{len(runs):,} runs ({how}) in {wall:,.0f} s (limits per run: {args.timeout_s:.0f} s, "
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
