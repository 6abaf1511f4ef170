"""`python -m chiplore.kg.neo4j_local start|stop|status|uri|install [--name N] [--fresh]`."""

from __future__ import annotations

import os
import sys

import click

from chiplore.kg import neo4j_local


@click.group()
def main() -> None:
    """A real Neo4j 5.26 on 127.0.0.1 without Docker (needs Java 17+ and Maven). The jars and each
    instance's data (instances/NAME) live in CHIPLORE_NEO4J_LOCAL_HOME (default ~/.cache/chiplore/neo4j-local)."""


@main.command()
def install() -> None:
    """Fetch Neo4j with Maven and compile the launcher."""
    classpath, _ = neo4j_local.install()
    click.echo(
        f"Neo4j {neo4j_local.NEO4J_VERSION} ready in {neo4j_local.cache_dir()} ({classpath.count(os.pathsep) + 1} jars)"
    )


@main.command()
@click.option("--name", default="default", show_default=True, help="Instance name (one data dir each).")
@click.option("--fresh", is_flag=True, help="Delete the instance's data first.")
def start(name: str, fresh: bool) -> None:
    """Start Neo4j; print its Bolt URI (Browser's URL on stderr). Password: CHIPLORE_NEO4J_PASSWORD (unset: no auth)."""
    password = os.environ.get("CHIPLORE_NEO4J_PASSWORD", "")
    try:
        started = neo4j_local.start(name, password, fresh=fresh)
    except neo4j_local.Neo4jLocalError as error:
        click.secho(f"error: {error}", fg="red", err=True)
        sys.exit(1)
    if not password:
        click.echo("auth disabled (CHIPLORE_NEO4J_PASSWORD is not set)", err=True)
    if started.browser:
        click.echo(f"Neo4j Browser: {started.browser}", err=True)
    click.echo(started.uri)


@main.command()
@click.option("--name", default="default", show_default=True)
def stop(name: str) -> None:
    """Stop the instance."""
    click.echo("stopped" if neo4j_local.stop(name) else "not running")


@main.command()
@click.option("--name", default="default", show_default=True)
def uri(name: str) -> None:
    """Print the running instance's Bolt URI alone (`export CHIPLORE_NEO4J_URI=$(... uri)`)."""
    current = neo4j_local.instance(name)
    if not current.running:
        click.secho(f"error: instance {name!r} is not running", fg="red", err=True)
        sys.exit(3)
    click.echo(current.uri)


@main.command()
@click.option("--name", default="default", show_default=True)
def status(name: str) -> None:
    """Say whether the instance runs, and its Bolt URI."""
    current = neo4j_local.instance(name)
    if current.running:
        browser = f" browser={current.browser}" if current.browser else ""
        click.echo(f"running pid={current.pid} {current.uri}{browser}")
    else:
        click.echo("not running")
        sys.exit(3)


if __name__ == "__main__":
    main()
