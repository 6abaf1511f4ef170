"""The `chiplore` command group: one red line and a non-zero exit for every chiplore error, a
traceback only with --debug."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from chiplore import __version__
from chiplore.cli.options import CliState, err_console
from chiplore.core.errors import ChiploreError


class ChiploreGroup(click.Group):
    """Turns chiplore errors into one red line and a non-zero exit; tracebacks only with --debug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ChiploreError as error:
            state = ctx.find_object(CliState)
            if state is not None and state.debug:
                raise
            err_console.print(f"[red]error:[/red] {error}", highlight=False, soft_wrap=True)
            sys.exit(1)


@click.group(cls=ChiploreGroup)
@click.version_option(__version__, prog_name="chiplore")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """chiplore learns an unfamiliar AI accelerator and optimizes kernels for it."""
    ctx.obj = CliState(debug)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not debug:
        # The driver logs each failed connection attempt; our own error line says it once.
        logging.getLogger("neo4j").setLevel(logging.CRITICAL)
