"""`chiplore optimize` and `chiplore tree`: the acceptance loop, and the Design Tree it grows."""

from __future__ import annotations

import click

from chiplore.app import App, RoleChoice
from chiplore.cli.complete import kernel_names
from chiplore.cli.devices import devices_table
from chiplore.cli.main import main
from chiplore.cli.options import console, err_console, store_options
from chiplore.cli.progress import Reporter, from_graph
from chiplore.cli.render import design_tree, far_from_bound, kernels_table, to_json
from chiplore.cli.run_options import (
    Output,
    Schedule,
    output_options,
    role_options,
    schedule_options,
    toolchain_option,
    worker_options,
)
from chiplore.session import Workers


@main.command()
@click.argument("kernels", nargs=-1, shell_complete=kernel_names)
@store_options
@toolchain_option
@worker_options
@click.option("--resume", is_flag=True, hidden=True, expose_value=False,
              help="Kept for scripts: an interrupted run's unfinished designs are always finished first.")  # fmt: skip
@role_options
@output_options
@schedule_options(
    "Device seconds for all the kernels together: each starts with an equal share, and what one leaves unspent "
    "goes to those that start after it (a decision under way finishes past it)."
)  # below --toolchain and the worker options
def optimize(app: App, kernels: tuple[str, ...], schedule: Schedule, roles: RoleChoice, output: Output) -> None:
    """Optimize kernels (all by default): propose, screen, run and judge designs against BEST.

    With --workers N (N > 1), every kernel and every design of a round run at once on Ray. A second
    optimize on the same graph joins the work. The LLM policy reads its API key from the environment
    only ($OPENAI_API_KEY for openai:...). Exits 1 when no kernel could start (none has a measured
    baseline or a design standing in for one, or an unfinished upgrade left each BEST to re-validate):
    each one's reason is printed."""
    workers = schedule.workers
    if workers.devices is not None:
        app = App(app.settings.model_copy(update={"devices": workers.devices}))
    settings = app.settings
    with app.session() as session:
        chosen = app.roles(session, roles)
        pool = Workers(workers.workers or settings.workers, workers.ray_address or settings.ray_address or None)
        if settings.devices > 1 and not pool.pooled:  # the sequential loop runs one job at a time, on device 0
            err_console.print(f"[yellow]note:[/yellow] {settings.devices} devices, one worker: jobs run one at a "
                              "time on one device; --workers N (N > 1) runs them on every device at once",
                              highlight=False)  # fmt: skip
        with Reporter(err_console, output.progress, transient=True, refresh=from_graph(session)) as reporter:
            reporter.step(f"optimize {', '.join(kernels) or 'every kernel'}")
            reporter.update(budget_s=schedule.budget_s)
            summary = session.optimize(list(kernels) or None, toolchain=schedule.toolchain, roles=chosen, workers=pool,
                                       on_event=lambda kernel, message: reporter.note(message, kernel=kernel),
                                       **schedule.config(settings.seed))  # fmt: skip
        progress = [k for k in session.status() if k.kernel in summary.kernels]
    # a script must see a run where no kernel could start (no baseline measured, nothing standing in, a
    # BEST an unfinished upgrade left un-re-validated): exit 1
    started = (any(k.best_design is not None for k in progress) or not progress) and (
        not summary.kernels or any(kernel not in summary.unstarted for kernel in summary.kernels)
    )
    if output.as_json:
        click.echo(to_json({**summary.model_dump(), "kernels": [k.model_dump() for k in progress]}))
        if not started:
            raise SystemExit(1)
        return
    console.print(kernels_table(progress))
    for kernel, reason in summary.stopped.items():
        console.print(f"{kernel} stopped: {reason}", highlight=False)
    for line in far_from_bound(progress):
        console.print(line, highlight=False)
    if summary.devices:
        console.print(devices_table(summary.devices))
    calendar = f", {summary.calendar_s:,.0f} s on the devices' calendar" if summary.calendar_s is not None else ""
    repeated = f" ({summary.repeated} repeated a design the tree holds)" if summary.repeated else ""
    console.print(f"{summary.proposals} proposals{repeated}, {summary.accepted} accepted (the baseline aside), "
                  f"{summary.device_s:.0f} device-s{calendar}")  # fmt: skip
    if not started:
        raise SystemExit(1)


@main.command()
@click.argument("kernel", shell_complete=kernel_names)
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the tree as nested JSON.")
def tree(app: App, kernel: str, as_json: bool) -> None:
    """A kernel's Design Tree: each design's status, cycles (as recorded when it was decided; `status` gives
    BEST's median over every run of it) and change; BEST and its lineage in bold."""
    with app.session() as session:
        found = session.tree(kernel)
    if as_json:
        click.echo(to_json(found.as_record()))
        return
    console.print(design_tree(found))
