"""`chiplore query`, `chiplore params` and `chiplore cypher`: the named queries with their typed
parameters, the parameter keys the graph holds, and read-only Cypher."""

from __future__ import annotations

import re
from typing import Any

import click

from chiplore import queries as named_queries
from chiplore.app import App
from chiplore.cli.complete import query_names, query_params
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, parse_params, split_params, store_options
from chiplore.cli.render import FORMAT_HELP, FORMATS, emit_records
from chiplore.core.errors import ChiploreError, QueryParameterError, UnknownQuery
from chiplore.kg.graph_io import refuse_unfinished_import
from chiplore.kg.guard import UntrustedLimits, code_only, parameter_names

CYPHERLESS_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # what a query's name may look like; Cypher has spaces or ( )

# When a named query returns nothing for one of these parameters, what lists the values it takes.
VERSIONS = "`chiplore toolchain list` lists the versions, oldest first (`from` is older than `to`)"
VALUE_LISTS = {"param": "`chiplore params` lists the parameter keys the graph holds",
               "kernel": "`chiplore status` lists the graph's kernels",
               "toolchain": "`chiplore toolchain list` lists the versions",
               "from": VERSIONS, "to": VERSIONS}  # fmt: skip


@main.command()
@click.argument("name", required=False, shell_complete=query_names)
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE", shell_complete=query_params,
              help="A parameter of the query, converted to the type its header declares.")  # fmt: skip
@store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help=FORMAT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the same as --format json).")
def query(app: App, name: str | None, params: tuple[str, ...], fmt: str, as_json: bool) -> None:
    """Run a named query read-only; without NAME, list the named queries with their typed parameters."""
    fmt = "json" if as_json else fmt
    if name is None:
        catalogue = [
            {"name": q.name,
             "params": [{"name": p.name, "type": p.type, "required": p.required, "default": p.default}
                        for p in q.params] if fmt == "json" else ", ".join(_signature(p) for p in q.params),
             "description": q.description}
            for q in named_queries.load_all().values()
        ]  # fmt: skip
        emit_records(console, catalogue, fmt, title="named queries")
        return
    catalogue = named_queries.load_all()
    if name not in catalogue and not CYPHERLESS_NAME.fullmatch(name):  # Cypher text, not a name
        raise UnknownQuery(f"no named query {name[:60]!r}: `chiplore query` runs the named queries (listed by "
                           "`chiplore query`); run Cypher text with `chiplore cypher \"MATCH ...\"`")  # fmt: skip
    named = named_queries.get(name, catalogue)
    given = _typed(named, params)
    try:
        bound = named.bind(given)  # before opening the store: a bad call costs nothing
    except QueryParameterError as error:
        missing = next((p.name for p in named.params if p.required and p.name not in given), None)
        raise QueryParameterError(f"{error}; pass -p {missing}=..." if missing else str(error)) from None
    with app.open_store() as store:
        refuse_unfinished_import(store)  # a fragment's answers would read as the graph's
        rows = store.read(named.text, bound)
        unlearnt = _unlearnt(store, [str(bound[key]) for key in VERSION_PARAMS if key in bound]) if not rows else []
    emit_records(console, rows, fmt, title=name)
    if not rows:
        listed = [key for key in bound if key in VALUE_LISTS]
        if listed:  # every value asked for is named: the one with no match may be any of them
            asked = ", ".join(f"{key}={value!r}" for key, value in given.items())
            hints = "; ".join(dict.fromkeys(VALUE_LISTS[key] for key in listed))  # each said once
            if unlearnt:  # the version is listed: what it lacks is anything learnt under it
                hints = "; ".join([*(f"the graph knows toolchain {v} but learnt nothing under it" for v in unlearnt),
                                   hints])  # fmt: skip
            err_console.print(f"[dim]no rows for {asked}: {hints}[/dim]", highlight=False)


VERSION_PARAMS = ("toolchain", "from", "to")


def _unlearnt(store: Any, versions: list[str]) -> list[str]:
    """Those of `versions` the graph has as toolchains with no fact under them (no rule, measurement or
    claim): a named query finds nothing there though `chiplore toolchain list` lists them."""
    if not versions:
        return []
    rows = store.read("MATCH (t:Toolchain) WHERE t.version IN $v AND NOT (t)<-[:UNDER|HOLDS_UNDER]-() "
                      "RETURN DISTINCT t.version AS v ORDER BY v", {"v": sorted(set(versions))})  # fmt: skip
    return [str(row["v"]) for row in rows]


def _signature(param: named_queries.QueryParam) -> str:
    return f"{param.name}:{param.type}" + ("" if param.required else f"={param.default}")


def _typed(named: named_queries.NamedQuery, params: tuple[str, ...]) -> dict[str, Any]:
    """The `-p` texts of a named query: its header types them (`-p limit=5` is an int because the
    query says so); a `NAME:TYPE=` that contradicts the header is refused."""
    declared = {p.name: p for p in named.params}
    given: dict[str, Any] = {}
    for param in split_params(params):
        query_param = declared.get(param.name)
        if query_param is not None and param.type not in (None, query_param.type):
            raise QueryParameterError(f"parameter {param.name!r} of query {named.name!r} is {query_param.type}, "
                                      f"not {param.type}")  # fmt: skip
        given[param.name] = param.text
    return given


@main.command("params")
@store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help=FORMAT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the same as --format json).")
def params_command(app: App, fmt: str, as_json: bool) -> None:
    """The parameter keys the graph holds (measured, or stated by the docs): unit, counts, latest
    value, meaning. `chiplore query measurements-of -p param=KEY` takes one."""
    with app.session() as session:
        rows = session.parameter_keys()
    emit_records(console, rows, "json" if as_json else fmt, title="parameter keys")
    if not rows:
        err_console.print("[dim]no parameter yet: `chiplore learn` measures them[/dim]", highlight=False)


@main.command()
@click.argument("text")
@click.option("-p", "--param", "params", multiple=True, metavar="NAME[:TYPE]=VALUE",
              help="A parameter, once each: a literal (3, 2.5, true, null, 'text', a list or map in Cypher's "
                   "or JSON's words: ['a', 'b'], {k: 1}; anything else is text), or of the TYPE it names (str, "
                   "int, float, bool, json): -p v:str=3. One the query does not read is refused.")  # fmt: skip
@store_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help=FORMAT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the same as --format json).")
@click.option("--max-rows", type=click.IntRange(min=1), default=UntrustedLimits.max_rows, show_default=True,
              help="Rows to show at most; the rest is cut as it arrives (and stderr says so).")  # fmt: skip
def cypher(app: App, text: str, params: tuple[str, ...], fmt: str, as_json: bool, max_rows: int) -> None:
    """Run a Cypher query read-only: the database's planner refuses anything that writes, loads files
    or administers; it ends at the query timeout (CHIPLORE_QUERY_TIMEOUT_S) whatever the server does,
    and at once on Ctrl-C; rows past --max-rows or 4 MB are cut (docs/graph.md, section 6). TEXT `-`
    reads the query from stdin (`chiplore cypher - < query.cypher`)."""
    if text == "-":  # a query kept in a file, or one longer than a shell argument may be
        with click.open_file("-") as stream:
            text = stream.read()
    limits = UntrustedLimits(max_rows=max_rows, timeout_s=app.settings.query_timeout_s)
    values = parse_params(params)
    unused = sorted(set(values) - parameter_names(text))
    if unused:  # as `query` refuses a parameter its query does not take (a misspelt name did nothing)
        raise click.BadParameter(f"the query reads no ${unused[0]}", param_hint="-p")
    with app.open_store() as store:
        refuse_unfinished_import(store)  # a fragment's answers would read as the graph's
        result = store.read_untrusted(text, values, limits=limits)
        absent = _absent_names(store, text) if not result.rows else []
    emit_records(console, result.rows, "json" if as_json else fmt, columns=result.columns)
    if result.truncated:
        err_console.print(f"[yellow]cut:[/yellow] {result.cut_reason}", highlight=False)
    if absent:  # as Neo4j warns: a misspelt label reads as an empty answer
        err_console.print(f"[dim]the graph has no {'; no '.join(absent)}: `CALL db.labels()` and "
                          "`CALL db.relationshipTypes()` list them (docs/graph.md, sections 2 and 3)[/dim]",
                          highlight=False)  # fmt: skip


_LABELS = re.compile(r"\(\s*\w*\s*((?::\s*\w+\s*)+)")  # `(n:Label:Other`
_TYPES = re.compile(r"\[\s*\w*\s*:\s*(\w+(?:\s*\|\s*:?\s*\w+)*)")  # `[r:TYPE|OTHER`


def _absent_names(store: Any, text: str) -> list[str]:
    """The labels and relationship types a query's patterns name that no node or relationship has."""
    code = code_only(text)
    labels = {name for found in _LABELS.findall(code) for name in re.findall(r"\w+", found)}
    types = {name for found in _TYPES.findall(code) for name in re.findall(r"\w+", found)}
    if not labels and not types:
        return []
    try:  # a hint: the answer stands without it
        have_labels = {str(row["label"]) for row in store.read("CALL db.labels() YIELD label RETURN label")}
        have_types = {str(row["t"]) for row in store.read("CALL db.relationshipTypes() YIELD relationshipType AS t "
                                                           "RETURN t")}  # fmt: skip
    except ChiploreError:
        return []
    return ([f"label {name}" for name in sorted(labels - have_labels)]
            + [f"relationship type {name}" for name in sorted(types - have_types)])  # fmt: skip
