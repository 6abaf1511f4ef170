"""`chiplore init`, `chiplore status` and `chiplore db check`: the graph and where it stands."""

from __future__ import annotations

import click
from rich.table import Table

from chiplore.app import App
from chiplore.cli.devices import devices_table
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, store_options
from chiplore.cli.render import FORMATS, emit_records, far_from_bound, kernels_table, progress_records, to_json
from chiplore.kg.graph_io import unfinished_import
from chiplore.kg.schema import LATEST_VERSION, schema_version


@main.command()
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def init(app: App, as_json: bool) -> None:
    """Set up the graph schema and register the target with its toolchains."""
    with app.session(create=True) as session:
        report = session.prepare()
        state = session.overview()
    result = {
        "backend": app.settings.store,
        "schema_version": report.version_after,
        "migrations_applied": report.applied,
        "target": session.target.name,
        "toolchains": [t["version"] for t in state.toolchains],
        "active_toolchain": state.active_toolchain,
    }
    if as_json:
        click.echo(to_json(result))
        return
    console.print(
        f"[green]ready[/green] {app.settings.store} store, schema v{report.version_after}"
        f" ({len(report.applied)} migration{'s' if len(report.applied) != 1 else ''} applied); "
        f"target [bold]{session.target.name}[/bold], toolchains {', '.join(result['toolchains'])}, "
        f"active {state.active_toolchain}"
    )


@main.command()
@store_options
@click.option("--graph", "graph_only", is_flag=True, help="The graph's overview (target, toolchains, counts) only.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table: the store, the graph and the kernels; json, csv, markdown: one row per kernel.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list with one object per kernel.")
def status(app: App, graph_only: bool, fmt: str, as_json: bool) -> None:
    """Each kernel's best against its baseline and bound; the graph's target, toolchains and counts."""
    as_json = as_json or fmt == "json"
    with app.session() as session:
        info = session.store.server_info()
        state = session.overview()
        progress = session.status()
        devices = session.devices()
    if as_json and graph_only:
        click.echo(to_json({"store": info.model_dump(), **state.model_dump(),
                            "devices": [d.model_dump() for d in devices]}))  # fmt: skip
        return
    if as_json:  # one object per kernel: what a script comparing runs needs
        click.echo(to_json([k.model_dump() for k in progress]))
        return
    if fmt in ("csv", "markdown"):
        emit_records(console, progress_records(progress), fmt)
        return
    console.print(f"[bold]{info.backend}[/bold] store at {info.address} ({info.server_version})")
    target = session.target.name
    if not state.registered:
        console.print(f"[yellow]target {target} is not registered: run `chiplore init`[/yellow]")
    else:
        versions = ", ".join(
            f"[bold]{t['version']}[/bold]" if t["status"] == "active" else t["version"] for t in state.toolchains
        )
        console.print(
            f"target {target}, toolchains {versions} (active: {state.active_toolchain}), schema v{state.schema_version}"
        )
        if state.unfinished_upgrade:
            old, new = state.unfinished_upgrade
            console.print(f"[yellow]the upgrade from {old} to {new} stopped part-way: some BESTs and facts are "
                          f"still {old}'s; `chiplore toolchain upgrade {new}` finishes it[/yellow]",
                          highlight=False)  # fmt: skip
    counts = Table(title="graph", show_header=True)
    counts.add_column("label")
    counts.add_column("nodes", justify="right")
    for label, count in state.counts.items():
        if count:
            counts.add_row(label, str(count))
    if counts.row_count:
        console.print(counts)
    if progress and not graph_only:
        console.print(kernels_table(progress))
        for line in far_from_bound(progress):
            console.print(line, highlight=False)
    if devices:
        console.print(devices_table(devices))
    console.print(f"device time spent: {state.device_s:.1f} s")


@main.group()
def db() -> None:
    """The graph database itself."""


@db.command("check")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def db_check(app: App, as_json: bool) -> None:
    """Connect, authenticate and report the server, the schema version and the constraints."""
    with app.open_store() as store:
        info = store.server_info()
        version = schema_version(store)
        objects = store.schema_objects()
        unfinished = unfinished_import(store)
    result = {
        **info.model_dump(),
        "schema_version": version,
        "schema_current": version == LATEST_VERSION,
        "unique_constraints": sum(o["kind"] == "unique" for o in objects),
        "indexes": sum(o["kind"] == "index" for o in objects),
        "unfinished_import": str(unfinished) if unfinished else None,
        "settings": app.settings.public_view(),
    }
    if as_json:
        click.echo(to_json(result))
        if unfinished:
            raise SystemExit(1)
        return
    console.print(
        f"[green]ok[/green] {info.backend} at {info.address}: {info.server_version}, database {info.database}"
    )
    state = "current" if result["schema_current"] else f"needs `chiplore init` (latest is v{LATEST_VERSION})"
    console.print(
        f"schema v{version} ({state}); {result['unique_constraints']} unique constraints, {result['indexes']} indexes"
    )
    if unfinished:  # the server answers, but the graph is not whole
        err_console.print(f"[red]error:[/red] {unfinished}", highlight=False)
        raise SystemExit(1)
