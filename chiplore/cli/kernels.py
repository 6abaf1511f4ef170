"""`chiplore kernel list|show|add`: the kernels the target offers, one's baseline, and adding one as a kernel pack
(docs/kernels.md). Neither touches the graph: `optimize` registers a kernel when it first runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from chiplore.app import App
from chiplore.cli.complete import kernel_names
from chiplore.cli.main import main
from chiplore.cli.options import console, store_options
from chiplore.cli.render import print_records, to_json
from chiplore.core.target import KernelSpec


@main.group("kernel")
def kernel() -> None:
    """The kernels the target offers: list them, show one's baseline, add one from a kernel pack."""


@kernel.command("list")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def kernel_list(app: App, as_json: bool) -> None:
    """Each kernel: its short name, weight bytes, the bound they set, and where it comes from."""
    with app.session() as session:
        rows = [_record(listing.spec, listing.origin) for listing in session.kernels()]
    if not as_json:
        rows = [_human(row) for row in rows]
    print_records(console, rows, as_json=as_json, title="kernels")


@kernel.command("add")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the added kernel as JSON.")
def kernel_add(app: App, folder: Path, as_json: bool) -> None:
    """Validate the kernel pack in FOLDER and install it: `optimize` then runs it like any kernel."""
    with app.session() as session:
        spec = session.add_kernel(folder)
        notes = session.pack_notes(spec)
    if as_json:
        click.echo(to_json({**_record(spec, "installed"), "notes": notes}))
        return
    console.print(f"added kernel [bold]{spec.name}[/bold] ({spec.label or spec.name}): "
                  f"{byte_size(spec.weight_bytes)} of weights, bound {spec.bound_cycles:,.0f} cycles; "
                  f"`chiplore optimize {spec.name}` optimizes it")  # fmt: skip
    for note in notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)


@kernel.command("show")
@click.argument("name", shell_complete=kernel_names)
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the kernel, its description and its baseline as JSON.")
def kernel_show(app: App, name: str, as_json: bool) -> None:
    """Print kernel NAME's official baseline program, exactly as its pack holds it (`> baseline.fe` keeps
    it): the shipped baselines are worked examples of a norm, RoPE and f4 decoding."""
    with app.session() as session:
        listing = session.kernel(name)
    if as_json:
        click.echo(to_json({**_record(listing.spec, listing.origin), "baseline": listing.spec.baseline_source}))
        return
    click.echo(listing.spec.baseline_source, nl=not listing.spec.baseline_source.endswith("\n"))


def _record(spec: KernelSpec, origin: str) -> dict[str, Any]:
    return {"kernel": spec.name, "label": spec.label or spec.name, "weight_bytes": spec.weight_bytes,
            "bound_cycles": spec.bound_cycles, "from": origin, "description": spec.description}  # fmt: skip


def _human(row: dict[str, Any]) -> dict[str, Any]:
    """The table's cells: bytes in the unit that shows them, whole cycles; the description is for --json."""
    return {"kernel": row["kernel"], "label": row["label"], "weights": byte_size(row["weight_bytes"]),
            "bound (cycles)": f"{row['bound_cycles']:,.0f}", "from": row["from"]}  # fmt: skip


def byte_size(count: float) -> str:
    """Bytes in decimal units, three significant digits at least (a 20 KB pack's weights were "0.0 MB")."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:,.0f} B"
