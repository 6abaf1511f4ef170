"""`chiplore toolchain list|upgrade`: the target's toolchain versions, and moving the graph to a newer one."""

from __future__ import annotations

import click

from chiplore.app import App
from chiplore.cli.complete import toolchain_versions
from chiplore.cli.main import main
from chiplore.cli.options import FiniteFloat, console, err_console, store_options
from chiplore.cli.progress import ProgressStyle, Reporter, from_graph, progress_options
from chiplore.cli.render import print_records, print_upgrade, to_json
from chiplore.kg.repo.targets import toolchains


@main.group()
def toolchain() -> None:
    """The target's toolchain versions: list them, upgrade the graph to a newer one."""


@toolchain.command("list")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def toolchain_list(app: App, as_json: bool) -> None:
    """The toolchain versions the graph knows, oldest first, and which is active."""
    with app.session() as session:
        rows = toolchains(session.store, session.target.name)
    print_records(console, rows, as_json=as_json)


@toolchain.command("upgrade")
@click.argument("version", shell_complete=toolchain_versions)
@store_options
@click.option("--budget", "budget_s", type=FiniteFloat(), default=None,
              help="Device seconds for re-measuring and re-validating [default: 20 % of what learning the "
                   "current version took].")  # fmt: skip
@progress_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def toolchain_upgrade(app: App, version: str, budget_s: float | None, progress_style: ProgressStyle,
                      as_json: bool) -> None:  # fmt: skip
    """Move the graph to toolchain VERSION: stale facts re-checked, rules re-probed, kernels re-validated."""
    with (
        app.session() as session,
        Reporter(err_console, progress_style, transient=True, refresh=from_graph(session)) as reporter,
    ):
        reporter.step(f"upgrade {session.target.name} to {version}")
        summary = session.upgrade(version, budget_s=budget_s, on_event=reporter.note)
    if as_json:
        click.echo(to_json(summary.model_dump()))
        return
    print_upgrade(console, summary)
