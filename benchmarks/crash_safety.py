"""Crash safety: `kill -9` at random points of learn, optimize and a toolchain upgrade, each command
rerun until it finishes, then two optimize runs at once on the same graph; after every kill and at
the end, the graph's invariants are checked (kg/repo/integrity.py: one design per program, every
run linked, BEST accepted, the ledger equal to its runs, a design measured once per toolchain,
decided designs released).

    python benchmarks/crash_safety.py [--kills 20] [--seed 7]

Prints one table: per phase, the kills, the reruns it took to finish, and the violations found.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.integrity import violations

ROOT = Path(__file__).resolve().parents[1]

PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("learn 0.6.0", ("learn", "--json")),
    ("optimize 0.6.0", ("optimize", "sliding_attention_output", "sliding_project_qkv", "--budget", "600", "--json")),
    ("upgrade to 0.7.0", ("toolchain", "upgrade", "0.7.0", "--budget", "300", "--json")),
    ("optimize 0.7.0", ("optimize", "sliding_attention_output", "--budget", "300", "--json")),
)


@dataclass
class Phase:
    name: str
    kills: int = 0
    runs: int = 0
    finished: bool = False
    violations: list[str] = field(default_factory=list)


def command(env: dict[str, str], args: tuple[str, ...]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "chiplore.cli", *args], env=env, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def check(data_dir: Path) -> list[str]:
    with EmbeddedStore(data_dir) as store:
        return violations(store)


def run_phase(phase: Phase, args: tuple[str, ...], env: dict[str, str], data_dir: Path, kills: int,
              rng: random.Random) -> None:  # fmt: skip
    """Run a command to its end, killing it at random points `kills` times first."""
    kills_left = kills
    while not phase.finished:
        process = command(env, args)
        phase.runs += 1
        if kills_left > 0:
            time.sleep(rng.uniform(1.0, 12.0))
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)  # the whole session: no cleanup anywhere
                process.wait(timeout=60)
                phase.kills += 1
                kills_left -= 1
                phase.violations += check(data_dir)
                continue
        _, err = process.communicate(timeout=3600)
        if process.returncode != 0:
            last = err.strip().splitlines()[-1] if err.strip() else f"exit {process.returncode}"
            raise SystemExit(f"{phase.name} failed: {last}")
        phase.finished = True
        phase.violations += check(data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chiplore-crash-") as scratch:
        data_dir = Path(scratch) / "data"
        env = {**os.environ, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data_dir),
               "PYTHONPATH": str(ROOT)}  # fmt: skip
        subprocess.run([sys.executable, "-m", "chiplore.cli", "init"], env=env, check=True, capture_output=True)
        phases = [Phase(name) for name, _ in PHASES]
        kills_left = args.kills
        per_phase = -(-args.kills // len(PHASES))
        for phase, (_, phase_args) in zip(phases, PHASES, strict=True):
            run_phase(phase, phase_args, env, data_dir, min(per_phase, kills_left), rng)
            kills_left -= phase.kills
        concurrent = Phase("two optimize runs at once")
        both = [command(env, ("optimize", "decoder_feedforward", "--budget", "300", "--json")) for _ in range(2)]
        concurrent.runs = 2
        ended = [(p, *p.communicate(timeout=3600)) for p in both]
        concurrent.finished = all(p.returncode == 0 for p, _, _ in ended)
        for p, _, err in ended:
            if p.returncode:
                last = (err.strip().splitlines() or ["-"])[-1]
                Console(width=140).print(f"an optimize run exited {p.returncode}: {last}")
        concurrent.violations = check(data_dir)
        phases.append(concurrent)
    table = Table(title=f"kill -9 at random points (seed {args.seed}), then two runs at once")
    for column in ("phase", "kills", "runs", "finished", "violations"):
        table.add_column(column, justify="left" if column in ("phase", "violations") else "right")
    for phase in phases:
        table.add_row(phase.name, str(phase.kills), str(phase.runs), "yes" if phase.finished else "no",
                      "; ".join(phase.violations) or "none")  # fmt: skip
    total = sum(p.kills for p in phases)
    found = sum(len(p.violations) for p in phases)
    table.caption = f"{total} kills, {found} violations, {time.perf_counter() - started:.0f} s of wall time"
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
