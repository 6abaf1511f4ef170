"""`chiplore optimize` and `chiplore tree`: the acceptance loop, and the Design Tree it grows."""

from __future__ import annotations

import click

from agents.llm.config import LLMConfig
from agents.loop import DEFAULT_BUDGET_S, PATIENCE, TARGET_RATIO
from chiplore.app import App
from chiplore.cli.main import main
from chiplore.cli.options import POLICIES, FiniteFloat, console, err_console, llm_options, store_options
from chiplore.cli.render import design_tree, kernels_table, to_json


@main.command()
@click.argument("kernels", nargs=-1)
@store_options
@click.option("--toolchain", default=None, help="Toolchain version [default: the graph's active one].")
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
@llm_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def optimize(app: App, kernels: tuple[str, ...], toolchain: str | None, budget_s: float, seed: int | None,
             patience: int, target_ratio: float, resume: bool, policy: str, architect: str | None,
             refiner: str | None, llm: LLMConfig, as_json: bool) -> None:  # fmt: skip
    """Optimize kernels (all by default): propose, screen, run and judge designs against BEST.

    The LLM policy reads its API key from the environment only ($OPENAI_API_KEY for openai:...)."""

    def say(kernel: str, message: str) -> None:
        if not as_json:
            err_console.print(f"[bold]{kernel}[/bold] {message}")

    with app.session() as session:
        roles = app.proposers(session, llm, architect or policy, refiner or policy)
        summary = session.optimize(list(kernels) or None, toolchain=toolchain, budget_s=budget_s,
                                   seed=app.settings.seed if seed is None else seed, patience=patience,
                                   target_ratio=target_ratio, on_event=say, **roles)  # fmt: skip
        progress = [k for k in session.status() if k.kernel in summary.kernels]
    if as_json:
        click.echo(to_json({**summary.model_dump(), "kernels": [k.model_dump() for k in progress]}))
        return
    console.print(kernels_table(progress))
    console.print(f"{summary.proposals} proposals, {summary.accepted} accepted, {summary.device_s:.0f} device-s")


@main.command()
@click.argument("kernel")
@store_options
def tree(app: App, kernel: str) -> None:
    """A kernel's Design Tree: each design's status, cycles and change; BEST and its lineage in bold."""
    with app.session() as session:
        found = session.tree(kernel)
    console.print(design_tree(found))
