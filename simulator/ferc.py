"""`ferc`: the Ferrite compiler's command line (check a file, count what it does, explain a diagnostic code).

Exit status: 0 ok, 1 the program has errors, 2 bad input (an unreadable file, an unknown code, a
bad CHIPLORE_SIM_TRUTH), which is always one line on stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from chiplore.simulator.cli_common import OneLineErrors, fail, package_version, read_source
from chiplore.simulator.diagnostics import render
from chiplore.simulator.stats_table import stats_text
from chiplore.simulator.toolchain.capacity import dm_limit
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.rules import SEVERITY_NAMES, VERSIONS, Rule, lookup
from chiplore.simulator.toolchain.stats import analyze
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION


@click.group(cls=OneLineErrors)
@click.version_option(
    package_version(),
    prog_name="ferc",
    message=f"%(prog)s %(version)s (toolchains {', '.join(VERSIONS)}; default {DEFAULT_VERSION})",
)
def main() -> None:
    """The Ferrite toolchain of SimRNGD."""


@main.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--toolchain", type=click.Choice(VERSIONS), default=None, help="Version (default: the file's header).")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnostics as JSON.")
def check_command(file: Path, toolchain: str | None, as_json: bool) -> None:
    """Parse FILE and apply the legality rules; exit 1 when it has errors."""
    source = read_source(file)
    # The compile-time limits come from the chip's configuration: a bad CHIPLORE_SIM_TRUTH is the
    # user's one-line error here, not an "internal compiler error" diagnostic inside check().
    dm_limit(toolchain or DEFAULT_VERSION)
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


@main.command("stats")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--toolchain", type=click.Choice(VERSIONS), default=None, help="Version (default: the file's header).")
@click.option("--json", "as_json", is_flag=True, help="Print the ProgramStats as JSON.")
@click.option("--ops", "show_ops", is_flag=True, help="List every op with its queues and counters too.")
def stats_command(file: Path, toolchain: str | None, as_json: bool, show_ops: bool) -> None:
    """What FILE does once lowered, counted statically: per engine, context and cluster the bytes, DMA
    commands, packets, passes and their work; switch and reduction flits; DM, TRF and VRF peaks. No
    cycles: only the device measures. Exit 1 when the program does not compile."""
    source = read_source(file)
    dm_limit(toolchain or DEFAULT_VERSION)  # a bad CHIPLORE_SIM_TRUTH is one line, as for check
    result = analyze(source, toolchain)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    elif not result.compiled:
        for diagnostic in result.diagnostics:
            click.echo(render(diagnostic, source, str(file)) + "\n")
        errors = sum(d.is_error for d in result.diagnostics)
        click.echo(f"{file}: failed under toolchain {result.version} ({errors} errors): nothing to count")
    else:
        click.echo(stats_text(result, str(file), show_ops))
    sys.exit(0 if result.compiled else 1)


@main.command()
@click.argument("code")
@click.option("--toolchain", type=click.Choice(VERSIONS), default=DEFAULT_VERSION, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the rule as JSON.")
def explain(code: str, toolchain: str, as_json: bool) -> None:
    """The long form of a diagnostic code (E0301, W0205, ...)."""
    rule = lookup(code.upper())
    if rule is None:
        fail(f"no diagnostic {code!r} (a code is E, W or N and four digits, e.g. E0301)")
    if as_json:
        click.echo(json.dumps(_explained(rule, code, toolchain), indent=2))
        return
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


def _explained(rule: Rule, code: str, toolchain: str) -> dict[str, object]:
    """What `explain --json` prints: the same facts as the text form, one key each."""
    emitted = rule.code(toolchain)
    return {
        "code": emitted or code.upper(),
        "rule": rule.number,
        "toolchain": toolchain,
        "severity": SEVERITY_NAMES[emitted[0]] if emitted else None,  # None: not checked in this version
        "message": rule.template,
        "checks": rule.predicate,
        "versions": {version: rule.code(version) for version in VERSIONS},
        "fix": rule.fix or None,
    }


if __name__ == "__main__":
    main()
