"""Differential testing of the Ferrite toolchain against the executor (issue 20): generated programs and
mutants through three judges (`ferc check`, the executor, numpy), tallied by class.

    python benchmarks/differential.py [--programs 10000] [--seed 0] [--examples 2] [--json FILE]

Every class is an agreement or a disagreement (simulator/execute/difftest/judges.py says which and
why). A disagreement is a bug of the compiler or the executor: the run exits 1 when it finds any (or
a limit the docs state that no rule enforces), and prints each with the call that regenerates it.
Program i of seed s is the same program on every machine (`campaign.program(s, i)`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiplore.simulator.execute.difftest.campaign import Tally, classes, program
from chiplore.simulator.execute.difftest.judges import DISAGREEMENTS, judge
from chiplore.simulator.execute.difftest.limits import LIMITS, check_limits
from chiplore.simulator.execute.difftest.program import VERSIONS

console = Console(width=150)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=2, help="programs shown per disagreement class")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    tally = Tally()
    seconds: list[float] = []
    started = time.perf_counter()
    for index in range(args.programs):
        start = time.perf_counter()
        verdict = judge(program(args.seed, index))
        seconds.append(time.perf_counter() - start)
        tally.add(verdict, keep=args.examples)
        if (index + 1) % 1000 == 0:
            console.print(f"  {index + 1:,} programs, {tally.disagreements} disagreements", style="dim")
    wall = time.perf_counter() - started

    described = classes()
    table = Table(title=f"Differential testing: {tally.programs:,} programs, seed {args.seed}")
    for column in ("class", "kind", "programs", "share", "what it means"):
        table.add_column(column, justify="right" if column in ("programs", "share") else "left")
    for cls in sorted(described, key=lambda c: (c in DISAGREEMENTS, -tally.counts.get(c, 0))):
        count = tally.counts.get(cls, 0)
        kind = "DISAGREEMENT" if cls in DISAGREEMENTS else "agreement"
        table.add_row(cls, kind, f"{count:,}", f"{count / max(tally.programs, 1):.1%}", described[cls],
                      style="bold red" if cls in DISAGREEMENTS and count else None)  # fmt: skip
    console.print(table)

    families = Table(title="Verdicts by source")
    families.add_column("source")
    names = sorted({cls for _, cls in tally.by_family})
    for cls in names:
        families.add_column(cls, justify="right")
    for source in sorted({s for s, _ in tally.by_family}):
        families.add_row(source, *(f"{tally.by_family.get((source, cls), 0):,}" for cls in names))
    console.print(families)

    codes = Table(title="Refusals by codes (top 25)")
    for column in ("class", "codes", "programs"):
        codes.add_column(column, justify="right" if column == "programs" else "left")
    for (cls, found), count in tally.by_code.most_common(25):
        codes.add_row(cls, found, f"{count:,}")
    console.print(codes)

    limits = Table(title="Limits the docs state: enforced at their value (every version)")
    for column in ("limit", "page", "code", "versions enforced", "note"):
        limits.add_column(column)
    checks = check_limits()
    for limit in LIMITS:
        enforced = [c.version for c in checks if c.limit is limit and c.enforced]
        limits.add_row(limit.name, limit.page, limit.code, ", ".join(enforced) or "NONE", limit.stated,
                       style=None if len(enforced) == len(VERSIONS) else "bold red")  # fmt: skip
    console.print(limits)
    unenforced = sum(1 for c in checks if not c.enforced)

    per_program = statistics.median(seconds) * 1000 if seconds else 0.0
    console.print(f"{tally.programs:,} programs in {wall:.0f} s: {per_program:.1f} ms median per program "
                  f"({tally.programs / max(wall, 1e-9):.0f} programs/s)")  # fmt: skip
    for cls, verdicts in tally.examples.items():
        for verdict in verdicts:
            index = verdict.program.seed
            console.print(f"\n[bold red]{cls}[/]: {verdict.detail} ({', '.join(verdict.codes) or 'accepted'}); "
                          f"regenerate with campaign.program({args.seed}, {index})")  # fmt: skip
            console.print(verdict.program.source, markup=False, highlight=False)
    if args.json:
        report = {"programs": tally.programs, "seed": args.seed, "wall_s": round(wall, 1),
                  "median_ms": round(per_program, 2), "classes": dict(tally.counts),
                  "disagreements": tally.disagreements, "limits_unenforced": unenforced}  # fmt: skip
        args.json.write_text(json.dumps(report, indent=2))
    sys.exit(1 if tally.disagreements or unenforced else 0)


if __name__ == "__main__":
    main()
