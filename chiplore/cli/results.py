"""`chiplore best` and `chiplore show`: a kernel's BEST program, or any design's, out of the graph
and into a file that the target's own tools take (`ferc check`, `fe-run submit` for SimRNGD)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from chiplore.app import App
from chiplore.cli.complete import kernel_names
from chiplore.cli.main import main
from chiplore.cli.options import err_console, store_options, write_file
from chiplore.cli.render import to_json
from chiplore.results import BestProgram, DesignProgram, unified_diff
from chiplore.session import Session

OUT = click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
                   help="Write the program to FILE [default: stdout].")  # fmt: skip
BARE = click.option("--bare", is_flag=True,
                    help="The program exactly as the graph holds it, without the header comment.")  # fmt: skip
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON: the program and what the graph knows of it.")


@main.command()
@click.argument("kernel", shell_complete=kernel_names)
@store_options
@OUT
@BARE
@JSON
def best(app: App, kernel: str, out: Path | None, bare: bool, as_json: bool) -> None:
    """Write KERNEL's BEST program, with a header comment: kernel, toolchain, cycles and their 95 %
    interval, speedup, ratio to the bound, and the lineage from the baseline."""
    with app.session() as session:
        found = session.best(kernel)
        text = session.program_text(found, header=not bare)
    _emit(found, text, out, as_json)
    if out is not None:
        cycles = f"{found.best_cycles:,.0f} cycles, " if found.best_cycles else ""
        speedup = f"{found.speedup_vs_baseline:.2f}x the baseline" if found.speedup_vs_baseline else "not measured"
        err_console.print(f"[green]wrote[/green] {escape(str(out))}: BEST {found.design[:10]} of {kernel} "
                          f"({cycles}{speedup}; toolchain {found.toolchain})", highlight=False)  # fmt: skip


@main.command()
@click.argument("design")
@store_options
@OUT
@BARE
@click.option("--diff", "against", flag_value="parent", default=None,
              help="Print the design's diff against its parent instead of its program.")  # fmt: skip
@click.option("--diff-baseline", "against", flag_value="baseline",
              help="Print the design's diff against its kernel's baseline under the active toolchain.")  # fmt: skip
@JSON
def show(app: App, design: str, out: Path | None, bare: bool, against: str | None, as_json: bool) -> None:
    """Write DESIGN's program (DESIGN: its id, or the first characters of it that `chiplore tree`
    prints), with a header comment: its role, status, cycles and change."""
    with app.session() as session:
        found = session.design(design)
        text = session.program_text(found, header=not bare) if against is None else _diff(session, found, against)
    _emit(found, text, out, as_json)
    if out is not None:
        err_console.print(f"[green]wrote[/green] {escape(str(out))}: design {found.design[:10]} of {found.kernel} "
                          f"({found.role}, {found.status})", highlight=False)  # fmt: skip


def _diff(session: Session, found: DesignProgram, against: str) -> str:
    other = session.baseline(found.kernel) if against == "baseline" else (
        session.design(found.parent) if found.parent else None)  # fmt: skip
    if other is None:
        raise click.UsageError(f"design {found.design[:10]} has no {against} to compare with")
    return unified_diff(other.source, found.source, f"{against} {other.design[:10]} ({other.toolchain})",
                        f"design {found.design[:10]} ({found.toolchain})")  # fmt: skip


def _emit(found: BestProgram | DesignProgram, text: str, out: Path | None, as_json: bool) -> None:
    if as_json:
        payload = to_json({**found.model_dump(), "text": text})
        if out is None:
            click.echo(payload)
        else:
            write_file(out, payload + "\n")
        return
    if out is None:
        click.echo(text, nl=not text.endswith("\n"))
    else:
        write_file(out, text)
