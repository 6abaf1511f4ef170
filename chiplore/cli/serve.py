"""`chiplore mcp` (the graph to any MCP client over stdio) and `chiplore completion` (the script that
makes a shell complete chiplore's commands, named queries, kernels and toolchain versions)."""

from __future__ import annotations

import click

from chiplore.app import App
from chiplore.cli.complete import completion_script
from chiplore.cli.main import main
from chiplore.cli.options import store_options


@main.command("mcp")
@store_options
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1, max=600), default=10.0, show_default=True,
              help="Seconds a client's Cypher query may run before the server stops it.")  # fmt: skip
def mcp_command(app: App, timeout_s: float) -> None:
    """Serve the graph to a Model Context Protocol client over stdio, read-only: Cypher (writes
    refused, rows capped, a timeout), the named queries, status, design trees, BEST's program."""
    from chiplore.mcp_server import serve_stdio  # the MCP SDK loads only for this command

    with app.session() as session:
        serve_stdio(session, timeout_s=timeout_s)


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the script that makes SHELL complete chiplore: `eval "$(chiplore completion bash)"` in
    ~/.bashrc (zsh: the same in ~/.zshrc; fish: `chiplore completion fish | source`)."""
    click.echo(completion_script(main, shell))
