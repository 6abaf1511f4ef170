"""`chiplore optimize` and `chiplore tree`: the acceptance loop, and the Design Tree it grows."""

from __future__ import annotations

import click

from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.loop import DEFAULT_BUDGET_S, PATIENCE, TARGET_RATIO
from chiplore.agents.scale.loop import PoolSummary
from chiplore.app import App
from chiplore.cli.complete import kernel_names, toolchain_versions
from chiplore.cli.devices import devices_table
from chiplore.cli.main import main
from chiplore.cli.options import POLICIES, FiniteFloat, console, err_console, llm_options, store_options
from chiplore.cli.progress import ProgressStyle, Reporter, from_graph, progress_options
from chiplore.cli.render import design_tree, kernels_table, to_json


@main.command()
@click.argument("kernels", nargs=-1, shell_complete=kernel_names)
@store_options
@click.option("--toolchain", default=None, shell_complete=toolchain_versions,
              help="Toolchain version [default: the graph's active one].")  # fmt: skip
@click.option("--budget", "budget_s", type=FiniteFloat(), default=DEFAULT_BUDGET_S, show_default=True,
              help="Device seconds for all the kernels together.")  # fmt: skip
@click.option("--seed", type=int, default=None, help="Seed of the builtin policies [default: the settings' seed].")
@click.option("--patience", type=click.IntRange(min=1), default=PATIENCE, show_default=True,
              help="Stop a kernel after this many proposals without an accepted change.")  # fmt: skip
@click.option("--target", "target_ratio", type=FiniteFloat(1.0), default=TARGET_RATIO, show_default=True,
              help="Stop a kernel once BEST is within this factor of the measured weight-movement bound.")  # fmt: skip
@click.option("--resume", is_flag=True, hidden=True,
              help="Kept for scripts: an interrupted run's unfinished designs are always finished first.")  # fmt: skip
@click.option("--policy", type=click.Choice(POLICIES), default="builtin", show_default=True,
              help="The policy of both the architect and the refiner.")  # fmt: skip
@click.option(
    "--architect", type=click.Choice(POLICIES), default=None, help="The architect's policy [default: --policy]."
)
@click.option("--refiner", type=click.Choice(POLICIES), default=None, help="The refiner's policy [default: --policy].")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="CPU workers for the free screens; more than 1 runs every kernel and design at once on Ray, "
                   "with one runner per device [env CHIPLORE_WORKERS; default: 1, no Ray].")  # fmt: skip
@click.option("--ray-address", default=None, metavar="ADDR",
              help="Join this Ray cluster (`ray start --head` prints it) instead of starting a local Ray "
                   "[env CHIPLORE_RAY_ADDRESS].")  # fmt: skip
@click.option("--devices", type=click.IntRange(min=1, max=256), default=None,
              help="Devices of a simulated target, each with its own queue, clock and noise "
                   "[env CHIPLORE_DEVICES; default: 1].")  # fmt: skip
@llm_options
@progress_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def optimize(app: App, kernels: tuple[str, ...], toolchain: str | None, budget_s: float, seed: int | None,
             patience: int, target_ratio: float, resume: bool, policy: str, architect: str | None,
             refiner: str | None, workers: int | None, ray_address: str | None, devices: int | None, llm: LLMConfig,
             progress_style: ProgressStyle, as_json: bool) -> None:  # fmt: skip
    """Optimize kernels (all by default): propose, screen, run and judge designs against BEST.

    With --workers N (N > 1), every kernel and every design of a round run at once on Ray. A second
    optimize on the same graph joins the work. The LLM policy reads its API key from the environment
    only ($OPENAI_API_KEY for openai:...)."""

    def say(kernel: str, message: str) -> None:
        reporter.note(message, kernel=kernel)

    if devices is not None:
        app = App(app.settings.model_copy(update={"devices": devices}))
    settings = app.settings
    with app.session() as session:
        roles = app.proposers(session, llm, architect or policy, refiner or policy)
        with Reporter(err_console, progress_style, transient=True, refresh=from_graph(session)) as reporter:
            reporter.step(f"optimize {', '.join(kernels) or 'every kernel'}")
            reporter.update(budget_s=budget_s)
            summary = session.optimize(list(kernels) or None, toolchain=toolchain, budget_s=budget_s,
                                       seed=settings.seed if seed is None else seed, patience=patience,
                                       target_ratio=target_ratio, on_event=say, workers=workers or settings.workers,
                                       ray_address=ray_address or settings.ray_address or None, **roles)  # fmt: skip
        progress = [k for k in session.status() if k.kernel in summary.kernels]
    if as_json:
        click.echo(to_json({**summary.model_dump(), "kernels": [k.model_dump() for k in progress]}))
        return
    console.print(kernels_table(progress))
    if isinstance(summary, PoolSummary):
        console.print(devices_table(summary.devices))
        calendar = f", {summary.calendar_s:,.0f} s on the devices' calendar"
    else:
        calendar = ""
    console.print(f"{summary.proposals} proposals, {summary.accepted} accepted, {summary.device_s:.0f} device-s"
                  f"{calendar}")  # fmt: skip


@main.command()
@click.argument("kernel", shell_complete=kernel_names)
@store_options
@click.option("--json", "as_json", is_flag=True, help="Print the tree as nested JSON.")
def tree(app: App, kernel: str, as_json: bool) -> None:
    """A kernel's Design Tree: each design's status, cycles and change; BEST and its lineage in bold."""
    with app.session() as session:
        found = session.tree(kernel)
    if as_json:
        click.echo(to_json(found.as_record()))
        return
    console.print(design_tree(found))
