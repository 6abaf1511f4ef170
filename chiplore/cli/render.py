"""Rendering for the CLI: rich tables and trees for people, JSON for programs."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from chiplore.agents.upgrade import UpgradeSummary
from chiplore.core.jsonable import finite
from chiplore.demo import DemoResult
from chiplore.kg.models import DesignNode
from chiplore.kg.repo.progress import KernelProgress
from chiplore.kg.store import Record
from chiplore.session import DesignTree


def to_json(value: Any) -> str:
    """Strict JSON: a non-finite float is null (chiplore.core.jsonable)."""
    return json.dumps(finite(value), indent=2, sort_keys=False, default=str, allow_nan=False)


def records_table(records: Sequence[Record], title: str | None = None) -> Table:
    columns: list[str] = []
    for record in records:
        columns += [key for key in record if key not in columns]
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(*(_cell(record.get(column)) for column in columns))
    return table


def print_records(console: Console, records: Sequence[Record], *, as_json: bool, title: str | None = None) -> None:
    if as_json:
        click.echo(to_json(list(records)))
        return
    if not records:
        console.print("[dim]no rows[/dim]")
        return
    console.print(records_table(records, title))
    console.print(f"[dim]{len(records)} row{'s' if len(records) != 1 else ''}[/dim]")


FORMATS = ("table", "json", "csv", "markdown")
FORMAT_HELP = (
    "Output format: json and csv carry every digit of a float (a non-finite one is null, or an empty csv "
    "field); table and markdown show 12 significant digits; booleans read true/false."
)


def emit_records(console: Console, records: Sequence[Record], fmt: str, *, title: str | None = None,
                 columns: Sequence[str] = ()) -> None:  # fmt: skip
    """Rows in one of FORMATS: a rich table (with a row count), JSON, CSV with a header row, or a
    GitHub-flavoured Markdown table (what a README or an issue takes). `columns`, where the caller knows
    them, come first (a query with no rows still has its header: a csv reader expects one)."""
    if fmt in ("table", "json"):
        print_records(console, records, as_json=fmt == "json", title=title)
        return
    columns = list(columns)
    for record in records:
        columns += [key for key in record if key not in columns]
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_cell(record.get(column), exact=True) for column in columns] for record in records])
        click.echo(buffer.getvalue(), nl=False)
        return
    if not columns:
        click.echo("(no rows)")
        return
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for record in records:
        lines.append("| " + " | ".join(_cell(record.get(c)).replace("|", "\\|").replace("\n", " ") for c in columns)
                     + " |")  # fmt: skip
    click.echo("\n".join(lines))


def _cell(value: Any, *, exact: bool = False) -> str:
    """A table's or a Markdown table's cell: floats to 12 significant digits, booleans as Cypher writes
    them. `exact`, a CSV field: a float to the digits that read back as it (JSON's; a non-finite one,
    JSON's null, is empty). CSV is what a spreadsheet or a dashboard loads: it carried a table's digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "" if exact else str(value)
        # every digit a reader may need: a byte count of 1,048,568 read 1.04857e+06 at six figures
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value) if exact else f"{value:.12g}"
    if isinstance(value, dict | list):
        return json.dumps(finite(value), default=str)
    return visible(str(value))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """Text as a terminal may show it: control characters written as escapes (a model's rationale
    holding ESC[2J cleared a user's screen through `chiplore cypher`); newlines and tabs kept."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def kernels_table(progress: list[KernelProgress], title: str = "kernels") -> Table:
    """Each kernel's baseline, BEST with its interval, both bounds, speedup and device time."""
    table = Table(title=title)
    for column in ("kernel", "baseline", "best [95% CI]", "x bound (true)", "x bound (measured)", "speedup",
                   "device-s", "failed runs", "designs"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("kernel", "designs") else "right")
    for k in progress:
        best = f"{k.best_cycles:,.0f} [{k.best_ci_low:,.0f}, {k.best_ci_high:,.0f}]" if k.best_cycles else ""
        table.add_row(
            k.kernel, f"{k.baseline_cycles:,.0f}" if k.baseline_cycles else "", best,
            f"{k.ratio_to_bound:.3f}" if k.ratio_to_bound else "",
            f"{k.ratio_to_measured_bound:.3f}" if k.ratio_to_measured_bound else "",
            f"{k.speedup_vs_baseline:.2f}x" if k.speedup_vs_baseline else "", f"{k.device_seconds:.0f}",
            str(k.failed_runs) if k.failed_runs else "",
            ", ".join(f"{n} {status}" for status, n in k.nodes_by_status.items()),
        )  # fmt: skip
    return table


FAR_FROM_BOUND = 1.10  # status explains a BEST further than this from its bound


def far_from_bound(progress: Sequence[KernelProgress]) -> list[str]:
    """A line for each kernel whose BEST is far from its bound and whose estimate says what bounds it
    (the pack's cost model when BEST was proposed): why optimize stopped there, in the chip's terms."""
    return [f"{k.kernel} is {k.ratio_to_bound:.2f}x its bound: {k.bound_by}" for k in progress
            if k.ratio_to_bound and k.ratio_to_bound > FAR_FROM_BOUND and k.bound_by]  # fmt: skip


def progress_records(progress: Sequence[KernelProgress]) -> list[Record]:
    """`status`'s rows for csv and markdown: each kernel's numbers, rounded as the table shows them
    (JSON keeps every digit: it is KernelProgress itself)."""
    rows = []
    for k in progress:
        rows.append({"kernel": k.kernel, "baseline_cycles": _round(k.baseline_cycles),
                     "best_cycles": _round(k.best_cycles),
                     "best_ci_low": _round(k.best_ci_low), "best_ci_high": _round(k.best_ci_high),
                     "speedup": _round(k.speedup_vs_baseline, 2), "x_bound_true": _round(k.ratio_to_bound, 3),
                     "x_bound_measured": _round(k.ratio_to_measured_bound, 3),
                     "device_s": _round(k.device_seconds),
                     "failed_runs": k.failed_runs, "best_design": k.best_design or ""})  # fmt: skip
    return rows


def _round(value: float | None, digits: int = 0) -> float | int | None:
    if value is None:
        return None
    return round(value) if digits == 0 else round(value, digits)


def demo_table(result: DemoResult) -> Table:
    """The demo's results: per kernel, what `status --json` says, and the accepted changes."""
    table = Table(title="chiplore demo: results")
    for column in ("kernel", "baseline", "best [95% CI]", "speedup", "x bound", "device-s", "accepted changes"):
        table.add_column(column, justify="left" if column == "kernel" else "right")
    for r in result.kernels:
        best = (
            f"{r['best_cycles']:,.0f} [{r['best_ci_low']:,.0f}, {r['best_ci_high']:,.0f}]" if r["best_cycles"] else ""
        )
        table.add_row(r["kernel"], f"{r['baseline_cycles']:,.0f}" if r["baseline_cycles"] else "", best,
                      f"{r['speedup_vs_baseline']:.2f}x" if r["speedup_vs_baseline"] else "",
                      f"{r['ratio_to_bound']:.3f}" if r["ratio_to_bound"] else "", f"{r['device_seconds']:.0f}",
                      str(r["accepted_changes"]))  # fmt: skip
    if result.geomean_speedup:
        table.caption = f"geomean speedup over the official baselines: {result.geomean_speedup:.2f}x"
    return table


def demo_records(result: DemoResult) -> list[Record]:
    """The demo's rows for csv and markdown: the table's numbers, rounded as it shows them."""
    return [{"kernel": r["kernel"], "baseline_cycles": _round(r["baseline_cycles"]),
             "best_cycles": _round(r["best_cycles"]), "best_ci_low": _round(r["best_ci_low"]),
             "best_ci_high": _round(r["best_ci_high"]), "speedup": _round(r["speedup_vs_baseline"], 2),
             "x_bound": _round(r["ratio_to_bound"], 3), "device_s": _round(r["device_seconds"]),
             "accepted_changes": r["accepted_changes"]} for r in result.kernels]  # fmt: skip


STATUS_STYLE = {"accepted": "green", "rejected": "red", "failed": "bold red", "screened_out": "dim",
                "measured": "yellow", "queued": "yellow", "proposed": "yellow"}  # fmt: skip


def design_tree(tree: DesignTree) -> Tree:
    """A kernel's Design Tree: each design's status, cycles and change; BEST and its lineage in bold."""

    def label(node: DesignNode) -> str:
        style = STATUS_STYLE.get(node.status, "")
        cycles = f" {node.measured_cycles:,.0f} cycles" if node.measured_cycles else ""
        mark = " [bold]BEST[/bold]" if node.id == tree.best else ""
        why = f" [dim]({escape(node.reason)})[/dim]" if node.reason and node.status != "accepted" else ""
        flag = f" [yellow]flagged {escape(node.flagged.split(':')[0])}[/yellow]" if node.flagged else ""
        text = (f"[{style}]{node.id[:10]} {node.role} {node.status}{cycles}[/{style}]{mark}{flag} "
                f"{escape(node.change)}{why}")  # fmt: skip
        return f"[bold]{text}[/bold]" if node.id in tree.lineage else text

    view = Tree(label(tree.root))

    def grow(branch: Tree, node: DesignNode) -> None:
        for child in tree.children.get(node.id, []):
            grow(branch.add(label(child)), child)

    grow(view, tree.root)
    return view


def print_upgrade(console: Console, summary: UpgradeSummary) -> None:
    head = f"{summary.target} {summary.from_version} -> {summary.to_version}"
    if summary.already_done:
        console.print(f"[green]already upgraded[/green] {head}: nothing changed (the first run's summary follows)")
    elif summary.kernels_pending:  # "upgraded" read as done to a user whose rerun had no budget left to do more
        console.print(f"[yellow]upgrade under way[/yellow] {head}: {summary.to_version} is active, "
                      f"{len(summary.kernels_pending)} kernel(s) not re-validated yet")  # fmt: skip
    else:
        console.print(f"[green]upgraded[/green] {head}")
    rules, measured = summary.rules, summary.measurements
    console.print(f"rules: {rules.confirmed} confirmed, {rules.changed} changed, {rules.retired} retired, "
                  f"{rules.new} new")  # fmt: skip
    console.print(f"measurements: {len(measured.confirmed)} confirmed, {len(measured.changed)} changed, "
                  f"{len(measured.stale)} still stale (the old value serves)")  # fmt: skip
    skipped = summary.this_run.skip_reasons if summary.this_run is not None else {}
    for probe, why in skipped.items():
        console.print(f"  {probe} not re-measured: {why} (a larger --budget, or `chiplore learn`, runs it)",
                      highlight=False)  # fmt: skip
    for r in measured.changed:
        console.print(f"  {r.param}: {r.before:,.4g} [{r.before_ci[0]:,.4g}, {r.before_ci[1]:,.4g}] -> "
                      f"{r.after:,.4g} [{r.after_ci[0]:,.4g}, {r.after_ci[1]:,.4g}]")  # fmt: skip
    table = Table("kernel", "design", "outcome", f"cycles {summary.from_version}", f"cycles {summary.to_version}",
                  title="re-validated kernels (before: every run so far; after: one graded job)")  # fmt: skip
    for k in summary.kernels:
        table.add_row(k.kernel, k.role, k.outcome, f"{k.cycles_before:,.0f}" if k.cycles_before else "-",
                      f"{k.cycles_after:,.0f}" if k.cycles_after else "-")  # fmt: skip
    if summary.kernels:
        console.print(table)
    console.print(f"{summary.flagged_designs} design(s) flagged; {summary.device_s:.0f} of {summary.budget_s:.0f} "
                  f"device-s")  # fmt: skip
    if summary.kernels_pending:
        console.print(f"[yellow]not finished:[/yellow] {', '.join(summary.kernels_pending)} not re-validated; "
                      f"rerun `chiplore toolchain upgrade {summary.to_version}` with a --budget over the "
                      f"{summary.device_s:.0f} device-s its runs have spent (the budget counts them all)")  # fmt: skip
