"""`ferc stats` without --json: a ProgramStats as plain-text tables a person reads in a terminal."""

from __future__ import annotations

from chiplore.core.stats import Counters, ProgramStats


def stats_text(stats: ProgramStats, path: str, show_ops: bool = False) -> str:
    """The summary line, the program totals, one table per kind of resource (engines, contexts,
    clusters, inputs, outputs), the peaks and, with `show_ops`, every op."""
    dmas, passes = stats.of_kind("dma"), stats.of_kind("pass")
    commands = sum(len(op.parts) for op in dmas)
    lines = [f"{path}: kernel {stats.kernel} under toolchain {stats.version}: {len(stats.ops)} ops "
             f"({len(dmas)} DMAs in {commands} commands, {len(passes)} passes)", ""]  # fmt: skip
    lines += _pairs("totals", stats.totals)
    groups: dict[tuple[str, ...], list[tuple[str, Counters]]] = {}
    for name, counters in stats.by_resource.items():
        groups.setdefault(tuple(counters), []).append((name, counters))
    for columns, rows in groups.items():
        lines += ["", *_table(["resource", *columns], [[name, *(_number(c[k]) for k in columns)] for name, c in rows])]
    lines += ["", *_pairs("peaks (per slice unless named otherwise)", stats.peaks)]
    if show_ops:
        body = [[op.label, op.kind, "" if op.line is None else str(op.line), " ".join(op.queues),
                 ", ".join(f"{k}={_number(v)}" for k, v in op.counters.items())] for op in stats.ops]  # fmt: skip
        lines += ["", *_table(["op", "kind", "line", "queues", "counters"], body)]
    return "\n".join(lines)


def _pairs(title: str, counters: Counters) -> list[str]:
    width = max((len(k) for k in counters), default=0)
    return [f"{title}:", *(f"  {k:<{width}}  {_number(v):>16}" for k, v in counters.items())]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    last = len(header) - 1

    def line(cells: list[str]) -> str:
        parts = [c.ljust(w) if i in (0, last) and not c[:1].isdigit() else c.rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]  # fmt: skip
        return "  " + "  ".join(parts).rstrip()

    return [line(header), *(line(row) for row in rows)]


def _number(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3f}"
