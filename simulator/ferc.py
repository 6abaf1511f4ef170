"""`ferc`: the Ferrite compiler's command line (check a file, explain a diagnostic code)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from simulator.diagnostics import render
from simulator.toolchain.check import check
from simulator.toolchain.rules import SEVERITY_NAMES, VERSIONS, lookup
from simulator.toolchain.versions import DEFAULT_VERSION


@click.group()
def main() -> None:
    """The Ferrite toolchain of SimRNGD."""


@main.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--toolchain", type=click.Choice(VERSIONS), default=None, help="Version (default: the file's header).")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnostics as JSON.")
def check_command(file: Path, toolchain: str | None, as_json: bool) -> None:
    """Parse FILE and apply the legality rules; exit 1 when it has errors."""
    try:
        source = file.read_text(errors="replace")
    except OSError as error:
        click.secho(f"error: cannot read {file}: {error.strerror}", fg="red", err=True)
        sys.exit(2)
    result = check(source, toolchain)
    if as_json:
        click.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        for diagnostic in result.diagnostics:
            click.echo(render(diagnostic, source, str(file)) + "\n")
        errors = sum(d.is_error for d in result.diagnostics)
        warnings = len(result.diagnostics) - errors
        verdict = "ok" if result.ok else "failed"
        click.echo(f"{file}: {verdict} under toolchain {result.version} ({errors} errors, {warnings} warnings/notes)")
    sys.exit(0 if result.ok else 1)


@main.command()
@click.argument("code")
@click.option("--toolchain", type=click.Choice(VERSIONS), default=DEFAULT_VERSION, show_default=True)
def explain(code: str, toolchain: str) -> None:
    """The long form of a diagnostic code (E0301, W0205, ...)."""
    rule = lookup(code.upper())
    if rule is None:
        click.secho(f"error: no diagnostic {code!r}", fg="red", err=True)
        sys.exit(2)
    emitted = rule.code(toolchain)
    click.echo(f"{emitted or code.upper()}: {rule.template}")
    click.echo(f"  checks: {rule.predicate}")
    if emitted is None:
        click.echo(f"  toolchain {toolchain}: not checked")
    else:
        click.echo(f"  toolchain {toolchain}: {SEVERITY_NAMES[emitted[0]]}")
    others = ", ".join(f"{v}: {rule.code(v) or 'not checked'}" for v in VERSIONS if v != toolchain)
    click.echo(f"  other versions: {others}")
    if rule.fix:
        click.echo(f"  fix: {rule.fix}")


if __name__ == "__main__":
    main()
