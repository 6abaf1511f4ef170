"""`chiplore query` and `chiplore cypher`: the named queries, and read-only Cypher."""

from __future__ import annotations

import click

import queries as named_queries
from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import console, parse_params, store_options
from chiplore.cli.render import print_records


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
def cypher(app: App, text: str, params: tuple[str, ...], as_json: bool) -> None:
    """Run a Cypher query read-only (writes are refused)."""
    with app.open_store() as store:
        rows = store.read(text, parse_params(params))
    print_records(console, rows, as_json=as_json)
