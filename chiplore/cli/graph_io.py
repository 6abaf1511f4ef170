"""`chiplore graph export|import|copy`: the whole graph as a file (JSON lines, or a Cypher script for
Neo4j), read back into an empty store of either backend, or copied straight into a Neo4j server so
a run on the embedded store can be explored in Neo4j Browser."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any, Literal

import click
from rich.markup import escape

from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, store_options
from chiplore.cli.progress import ProgressStyle, Reporter, progress_options
from chiplore.cli.render import to_json
from chiplore.cli.run_options import Output, output_options
from chiplore.core.errors import ConfigError
from chiplore.core.secrets import redact_uri
from chiplore.kg.graph_io import GraphFileError, Imported

BROWSER_QUERY = "MATCH (k:Kernel)-[:BEST]->(d:DesignNode) RETURN k, d"


@main.group("graph")
def graph_group() -> None:
    """The graph as a file, and copied into another store (Neo4j Browser)."""


@graph_group.command("export")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@store_options
@click.option("--format", "fmt", type=click.Choice(["jsonl", "cypher"]), default=None,
              help="JSON lines (what `graph import` reads), or a Cypher script for Neo4j 5 "
                   "[default: cypher for a .cypher FILE, else jsonl].")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def graph_export(app: App, file: Path, fmt: str | None, as_json: bool) -> None:
    """Write every node and relationship of the graph to FILE (JSON Lines: docs/graph.md, section 7);
    `-` writes them to stdout (the summary then goes to stderr)."""
    chosen: Literal["jsonl", "cypher"] = "cypher" if (fmt or "") == "cypher" or (
        fmt is None and file.suffix == ".cypher") else "jsonl"  # fmt: skip
    to_stdout = str(file) == "-"
    if not to_stdout:  # its folder made first, as `report --out` and `best -o` do
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"cannot write {file}: {error.strerror or error}") from None
    with app.session() as session:
        done = (
            session.write_graph(sys.stdout, format=chosen) if to_stdout else session.export_graph(file, format=chosen)
        )
    result = {"file": str(file), "format": chosen, "nodes": done.nodes, "relationships": done.relationships}
    if as_json:
        click.echo(to_json(result), err=to_stdout)
        return
    (err_console if to_stdout else console).print(
        f"[green]exported[/green] {done.nodes:,} nodes and {done.relationships:,} relationships to "
        f"{'stdout' if to_stdout else escape(str(file))} ({chosen})", highlight=False)  # fmt: skip


@graph_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@store_options
@click.option("--replace", is_flag=True, help="Delete what the store holds first (else it must be empty).")
@progress_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def graph_import(app: App, file: Path, replace: bool, progress_style: ProgressStyle, as_json: bool) -> None:
    """Read a JSON-lines graph FILE (`graph export`) into the store, which must be empty; an
    embedded data dir is made when it does not exist. The file is checked whole first."""
    if not file.is_file():
        raise ConfigError(f"no graph file {file}")
    made = app.settings.store == "embedded" and not app.settings.data_dir.exists()
    try:
        with app.session(create=True, unfinished_import=True) as session, \
                _reporter(progress_style, f"import {file.name}") as reporter:  # fmt: skip
            done = session.import_graph(file, replace=replace, on_progress=_counting(reporter))
    except GraphFileError:  # refused before it wrote: the data dir this command made goes too
        if made:
            shutil.rmtree(app.settings.data_dir, ignore_errors=True)
        raise
    _summary(done, f"{app.settings.store} store", as_json)


@graph_group.command("copy")
@store_options
@click.option("--to", "destination", type=click.Choice(["neo4j", "embedded"]), default="neo4j", show_default=True,
              help="The backend to copy into.")  # fmt: skip
@click.option("--to-uri", default=None, metavar="URI",
              help="The Neo4j to copy into [default: CHIPLORE_NEO4J_URI; user, password and database from "
                   "CHIPLORE_NEO4J_*].")  # fmt: skip
@click.option("--to-data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The embedded data dir to copy into (--to embedded; made when missing).")  # fmt: skip
@click.option("--replace", is_flag=True, help="Delete what the destination holds first (else it must be empty).")
@output_options
def graph_copy(app: App, destination: str, to_uri: str | None, to_data_dir: Path | None, replace: bool,
               output: Output) -> None:  # fmt: skip
    """Copy the graph (the embedded one by default) into another store: into Neo4j, to explore a run
    in Neo4j Browser (README: "Explore a run in Neo4j Browser")."""
    progress_style, as_json = output.progress, output.as_json
    update: dict[str, Any] = {"store": destination}
    if destination == "neo4j" and to_uri:
        update["neo4j_uri"] = to_uri
    if destination == "embedded":
        if to_data_dir is None:
            raise click.UsageError("--to embedded needs --to-data-dir")
        update["data_dir"] = to_data_dir
    target_app = App(app.settings.model_copy(update=update))
    source, copy = app.settings, target_app.settings
    if source.store == copy.store and (
        (source.store == "neo4j" and (source.neo4j_uri, source.neo4j_database) == (copy.neo4j_uri, copy.neo4j_database))
        or (source.store == "embedded" and source.data_dir.resolve() == copy.data_dir.resolve())
    ):  # fmt: skip
        raise ConfigError("the source and the destination are the same store: name another with --to-uri or "
                          "--to-data-dir")  # fmt: skip
    with (
        app.session() as session,
        target_app.open_store(create=True) as into,
        _reporter(progress_style, f"copy into {destination}") as reporter,
    ):
        done = session.copy_graph(into, replace=replace, on_progress=_counting(reporter))
    where = redact_uri(copy.neo4j_uri) if destination == "neo4j" else str(copy.data_dir)
    _summary(done, f"{destination} at {where}", as_json)
    if destination == "neo4j" and not as_json:
        console.print(f"open Neo4j Browser on that server (`scripts/neo4j-local start` prints its URL) and try: "
                      f"[bold]{BROWSER_QUERY}[/bold]", highlight=False)  # fmt: skip


def _reporter(style: ProgressStyle, title: str) -> Reporter:
    reporter = Reporter(err_console, style, transient=True)
    reporter.step(title)
    return reporter


def _counting(reporter: Reporter) -> Any:
    def count(what: str, so_far: int) -> None:
        reporter.note(f"{so_far:,} {what} written")

    return count


def _summary(done: Imported, where: str, as_json: bool) -> None:
    if as_json:
        click.echo(to_json({"nodes": done.nodes, "relationships": done.relationships, "into": where}))
        return
    console.print(f"[green]imported[/green] {done.nodes:,} nodes and {done.relationships:,} relationships into "
                  f"the {escape(where)}", highlight=False)  # fmt: skip
