"""`chiplore toolchain list|upgrade`: the target's toolchain versions, and moving the graph to a newer one."""

from __future__ import annotations

import click

from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import FiniteFloat, console, err_console, store_options
from chiplore.cli.render import print_records, print_upgrade, to_json
from kg.repo.targets import toolchains


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
@click.argument("version")
@store_options
@click.option("--budget", "budget_s", type=FiniteFloat(), default=None,
              help="Device seconds for re-measuring and re-validating [default: 20 % of what learning the "
                   "current version took].")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def toolchain_upgrade(app: App, version: str, budget_s: float | None, as_json: bool) -> None:
    """Move the graph to toolchain VERSION: stale facts re-checked, rules re-probed, kernels re-validated."""

    def say(message: str) -> None:
        if not as_json:
            err_console.print(message)

    with app.session() as session:
        summary = session.upgrade(version, budget_s=budget_s, on_event=say)
    if as_json:
        click.echo(to_json(summary.model_dump()))
        return
    print_upgrade(console, summary)
