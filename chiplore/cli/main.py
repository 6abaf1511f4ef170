"""The `chiplore` command group: one red line and a non-zero exit for every chiplore error, a
traceback only with --debug."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click
from rich.markup import escape

from chiplore import __version__
from chiplore.cli.hints import explain
from chiplore.cli.options import CliState, err_console
from chiplore.core.errors import ChiploreError
from chiplore.core.secrets import redact, secrets_from_environment


class ChiploreGroup(click.Group):
    """Turns chiplore errors into one red line and a non-zero exit; tracebacks only with --debug.
    A usage error (a bad option value, a missing argument) is one line too, with exit status 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            outcome = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as error:
            hint = f" (see `{error.ctx.command_path} --help`)" if error.ctx is not None else ""
            err_console.print(f"[red]error:[/red] {escape(error.format_message())}{hint}", highlight=False)
            sys.exit(error.exit_code)
        except click.ClickException as error:
            err_console.print(f"[red]error:[/red] {escape(error.format_message())}", highlight=False)
            sys.exit(error.exit_code)
        except click.exceptions.Abort:
            err_console.print("[red]error:[/red] aborted", highlight=False)
            sys.exit(130)
        sys.exit(outcome if isinstance(outcome, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ChiploreError as error:
            state = ctx.find_object(CliState)
            if state is not None and state.debug:
                raise
            message = escape(redact(explain(error), secrets_from_environment()))
            err_console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
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
