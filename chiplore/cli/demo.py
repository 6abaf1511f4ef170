"""`chiplore demo` and `chiplore report`: the main job end to end, and the page that shows it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, store_options, write_file
from chiplore.cli.progress import ProgressStyle, Reporter, from_graph, progress_options
from chiplore.cli.render import FORMATS, demo_records, demo_table, emit_records, to_json
from chiplore.cli.run_options import Schedule, schedule_options
from chiplore.demo import run_demo


@main.command()
@store_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"), show_default=True,
              help="Where to write the report.")  # fmt: skip
def report(app: App, out: Path) -> None:
    """One self-contained HTML page: results, convergence, design trees, decisions, what was learnt, upgrades."""
    with app.session() as session:
        html = session.report()
    write_file(out, html)
    console.print(f"[green]wrote[/green] {out} ({len(html) // 1024} KB)")


@main.command()
@store_options
@schedule_options("Device seconds of each optimize round (before and after the upgrade).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("chiplore-report"),
              show_default=True, help="The folder the report is written to.")  # fmt: skip
@click.option("--resume", is_flag=True, hidden=True, expose_value=False,
              help="Kept for scripts: a demo always continues where an interrupted one stopped.")  # fmt: skip
@progress_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="How to print the results (json: every field, as `status --json` has them).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON (the same as --format json).")
def demo(app: App, schedule: Schedule, out: Path, progress_style: ProgressStyle, fmt: str, as_json: bool) -> None:
    """The main job: learn the chip, optimize every kernel, upgrade the toolchain, optimize again, report."""
    fmt = "json" if as_json else fmt
    with app.session(create=True) as session:
        kernels = {spec.name for spec in session.target.kernels()}
        with Reporter(err_console, progress_style, refresh=from_graph(session)) as reporter:

            def step(title: str) -> Callable[[str], None]:
                reporter.step(title)

                def note(text: str) -> None:
                    kernel, colon, _ = text.partition(":")
                    reporter.note(text, kernel=kernel if colon and kernel in kernels else None)

                return note

            result = run_demo(session, schedule.config(app.settings.seed), step=step)
            reporter.step("report")
            html = session.report()
    write_file(out / "report.html", html)
    if fmt == "json":
        click.echo(to_json({**result.model_dump(), "report": str(out / "report.html")}))
        return
    if fmt in ("csv", "markdown"):
        emit_records(console, demo_records(result), fmt)
        return
    console.print(demo_table(result))
    console.print(f"report: {out / 'report.html'}")
