"""What one price costs the builtin architect: ferc's analysis (check, lowering, statistics) of
generated designs, cold, and a check that every answer stays the same.

    python benchmarks/pricing.py [--designs 6] [--repeats 3] [--save FILE] [--before FILE]
    python benchmarks/pricing.py --record FILE     # each design's diagnostics and statistics, digested
    python benchmarks/pricing.py --check FILE      # the same designs again: every digest must match

The architect prices a budgeted search of each space, and each price is a cold analysis of a new
program (the pack's cost model works on ferc's statistics), so this is what an optimize's wall time
mostly is. The corpus: per shipped pack with a design space, under 0.6.0 and 0.7.0 (the facts the
generator compiles with), the space's first valid point and `--designs - 1` more drawn with a seed.

Timing: every cache of the toolchain is cleared before each analysis; per pack and version, the
median over the designs of the median over `--repeats`. Exactness: `--record` writes, per design, its
source and the sha256 of its diagnostics and of its statistics (ProgramStats as JSON); `--check`
reanalyzes the recorded sources and lists every difference (exit 1 on one). Record with the old tree
on PYTHONPATH (`git archive REV | tar -x -C /tmp/old`), check with the new.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console(width=140)
VERSIONS = ("0.6.0", "0.7.0")


def corpus(designs: int) -> list[dict[str, str]]:
    """(id, group, version, source) of every generated design the benchmark analyzes."""
    from chiplore.core.pack import points
    from chiplore.simulator.kernels.builtin import builtin_packs
    from chiplore.simulator.kernels.pack import read_pack
    from chiplore.simulator.pack import SimRNGDPack
    from chiplore.simulator.pack.generator.learnt import compile_facts
    from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

    packs: dict[str, object] = dict(builtin_packs())
    for folder in sorted(p.parent for p in BUILTIN_PACKS.glob("*/kernel.toml")):
        packs.setdefault(folder.name, read_pack(folder, "CHIPLORE_KERNELS"))
    target_pack = SimRNGDPack()
    entries: list[dict[str, str]] = []
    for version in VERSIONS:
        facts = compile_facts(version)
        for name, pack in sorted(packs.items()):
            space = target_pack.design_space(pack.spec)  # type: ignore[attr-defined]
            if space is None:
                continue
            valid = list(points(space, facts))
            drawn = random.Random(f"{name}/{version}").sample(valid[1:], min(designs - 1, len(valid) - 1))
            for p in valid[:1] + drawn:
                label = ",".join(f"{k}={v}" for k, v in sorted(p.items()))
                entries.append({"id": f"{name}/{version}/{label}", "group": f"{name} {version}", "version": version,
                                "source": space.source(p, facts, version)})  # fmt: skip
    return entries


def clear_caches() -> None:
    """Every bounded memo of the toolchain: the per-program ones (found by name, so an older tree's
    are cleared too). Unbounded ones (the grammar, a version's spec) are built once per process."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(("chiplore.simulator.toolchain", "chiplore.simulator.dsl")):
            continue
        for value in list(vars(module).values()):
            info = getattr(value, "cache_info", None)
            if callable(info) and info().maxsize is not None:
                value.cache_clear()


def analyze(source: str, version: str) -> tuple[str, str]:
    """The digests of the design's diagnostics and of its statistics."""
    from chiplore.simulator.toolchain.stats import analyze as ferc_analyze

    stats = ferc_analyze(source, version)
    diagnostics = json.dumps([d.model_dump(mode="json") for d in stats.diagnostics], sort_keys=True)
    body = stats.model_dump(mode="json")
    body.pop("diagnostics", None)
    return _sha(diagnostics), _sha(json.dumps(body, sort_keys=True))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def record(path: Path, designs: int) -> None:
    entries = corpus(designs)
    for entry in entries:
        clear_caches()
        entry["diagnostics"], entry["stats"] = analyze(entry["source"], entry["version"])
    path.write_text(json.dumps(entries, indent=1))
    console.print(f"recorded {len(entries)} designs in {path}")


def check(path: Path) -> int:
    entries = json.loads(path.read_text())
    differ = 0
    for entry in entries:
        clear_caches()
        diagnostics, stats = analyze(entry["source"], entry["version"])
        changed = [what for what, now in (("diagnostics", diagnostics), ("stats", stats)) if entry[what] != now]
        if changed:
            differ += 1
            console.print(f"DIFFERS ({', '.join(changed)}): {entry['id']}")
    console.print(f"{len(entries)} designs: {differ} differ")
    return 1 if differ else 0


def timings(designs: int, repeats: int) -> dict[str, float]:
    per_group: dict[str, list[float]] = {}
    for entry in corpus(designs):
        runs = []
        for _ in range(repeats):
            clear_caches()
            started = time.perf_counter()
            analyze(entry["source"], entry["version"])
            runs.append(time.perf_counter() - started)
        per_group.setdefault(entry["group"], []).append(statistics.median(runs))
    figures = {group: statistics.median(values) for group, values in per_group.items()}
    figures["all designs"] = statistics.median([v for values in per_group.values() for v in values])
    return figures


def show(now: dict[str, float], before: dict[str, float] | None) -> None:
    table = Table(title="One cold analysis of a generated design (median, this machine), seconds")
    for header in ("pack, version", *(("before", "after", "speedup") if before else ("seconds",))):
        table.add_column(header, justify="left" if header == "pack, version" else "right")
    for name, value in now.items():
        if before is None:
            table.add_row(name, f"{value:.3f}")
            continue
        old = before.get(name)
        table.add_row(name, f"{old:.3f}" if old is not None else "-", f"{value:.3f}",
                      f"{old / value:.2f}x" if old else "-")  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--designs", type=int, default=6, help="designs per pack and version")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--before", type=Path, default=None)
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--check", type=Path, default=None)
    args = parser.parse_args()
    if args.record:
        record(args.record, args.designs)
        return
    if args.check:
        raise SystemExit(check(args.check))
    now = timings(args.designs, args.repeats)
    if args.save:
        args.save.write_text(json.dumps(now, indent=1))
    show(now, json.loads(args.before.read_text()) if args.before else None)


if __name__ == "__main__":
    main()
