"""`chiplore query` and `chiplore cypher`: the named queries, and read-only Cypher."""

from __future__ import annotations

import click

import queries as named_queries
from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, parse_params, store_options
from chiplore.cli.render import print_records
from kg.guard import UntrustedLimits


@main.command()
@click.argument("name", required=False)
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", help="A query parameter.")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def query(app: App, name: str | None, params: tuple[str, ...], as_json: bool) -> None:
    """Run a named query read-only; without NAME, list the named queries."""
    if name is None:
        catalogue = [
            {
                "name": q.name,
                "params": ", ".join(f"{p.name}:{p.type}" + ("" if p.required else f"={p.default}") for p in q.params),
                "description": q.description,
            }
            for q in named_queries.load_all().values()
        ]
        print_records(console, catalogue, as_json=as_json, title="named queries")
        return
    named = named_queries.get(name)
    bound = named.bind(parse_params(params))  # before opening the store: a bad call costs nothing
    with app.open_store() as store:
        rows = store.read(named.text, bound)
    print_records(console, rows, as_json=as_json, title=name)


@main.command()
@click.argument("text")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", help="A parameter (string).")
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--max-rows", type=click.IntRange(min=1), default=UntrustedLimits.max_rows, show_default=True,
              help="Rows to show at most; the rest is cut as it arrives (and stderr says so).")  # fmt: skip
def cypher(app: App, text: str, params: tuple[str, ...], as_json: bool, max_rows: int) -> None:
    """Run a Cypher query read-only: the database's planner refuses anything that writes, loads files
    or administers; the server stops it at the query timeout; rows past --max-rows or 4 MB are cut."""
    limits = UntrustedLimits(max_rows=max_rows, timeout_s=app.settings.query_timeout_s)
    with app.open_store() as store:
        result = store.read_untrusted(text, parse_params(params), limits=limits)
    print_records(console, result.rows, as_json=as_json)
    if result.truncated:
        err_console.print(f"[yellow]cut:[/yellow] {result.cut_reason}", highlight=False)
