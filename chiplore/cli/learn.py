"""`chiplore learn`: docs into claims, compiler probes into rules, microbenchmarks into measurements."""

from __future__ import annotations

import click

from chiplore.agents.llm.config import LLMConfig
from chiplore.app import App
from chiplore.cli.complete import toolchain_versions
from chiplore.cli.main import main
from chiplore.cli.options import POLICIES, FiniteFloat, console, err_console, llm_options, store_options
from chiplore.cli.progress import Reporter
from chiplore.cli.render import to_json
from chiplore.cli.run_options import Output, output_options
from chiplore.ingest.learn import DEFAULT_BUDGET_S


@main.command()
@store_options
@click.option("--toolchain", default=None, shell_complete=toolchain_versions,
              help="Toolchain version [default: the graph's active one].")  # fmt: skip
@click.option("--budget", "budget_s", type=FiniteFloat(), default=DEFAULT_BUDGET_S, show_default=True,
              help="Device seconds the microbenchmarks may spend.")  # fmt: skip
@click.option("--policy", type=click.Choice(POLICIES), default="builtin", show_default=True,
              help="The librarian's policy: the builtin extractor, or an LLM that cites its paragraphs.")  # fmt: skip
@llm_options
@output_options
def learn(app: App, toolchain: str | None, budget_s: float, policy: str, llm: LLMConfig, output: Output) -> None:
    """Learn the chip: docs into claims, compiler probes into rules, microbenchmarks into measurements."""
    with app.session() as session:
        version = session.toolchain(toolchain)
        librarian = app.librarian(session, policy, llm)
        with Reporter(err_console, output.progress, transient=True) as reporter:
            note = reporter.step(f"learning {session.target.name} {version}", total=len(session.pack.fits))
            reporter.update(device_s=0.0, budget_s=budget_s)
            spent = [0.0]

            def advance(probe: str, device_s: float) -> None:
                spent[0] += device_s
                reporter.update(device_s=spent[0])
                reporter.note(f"probe {probe}", advance=1)

            note("docs, then compile probes, then microbenchmarks")
            summary = session.learn(toolchain=version, budget_s=budget_s, librarian=librarian, on_probe=advance)
    if output.as_json:
        click.echo(to_json(summary.model_dump()))
        return
    docs, measured = summary.docs, summary.measurements
    console.print(
        f"[green]learnt[/green] {summary.target} {version}: {docs.pages} page(s) read ({docs.unchanged} unchanged), "
        f"{summary.claims} claims ({summary.contradicted_claims} contradicted), {summary.rules_in_force} rules, "
        f"{summary.measured_params} parameters measured; {measured.probes_run} probe(s) run, "
        f"{len(measured.probes_skipped)} skipped, {len(measured.probes_failed)} failed; "
        f"{summary.device_s:.0f} device-s, {summary.wall_s:.1f} s"
    )
    if policy != "builtin" and docs.pages == 0 and docs.unchanged:
        console.print(f"[yellow]the {policy} librarian read no page:[/yellow] the graph holds these {docs.unchanged} "
                      f"page(s) of {version} already, and a page is read again only when its text changes "
                      "(learn into a fresh --data-dir to have the model read them)", highlight=False)  # fmt: skip
    if measured.probes_failed:
        console.print("[yellow]failed probes (recorded, skipped):[/yellow]")
        for probe in measured.probes_failed:
            why = measured.failure_reasons.get(probe, "no reason recorded")
            console.print(f"  {why}" if why.startswith(probe) else f"  {probe}: {why}", markup=False, highlight=False)
