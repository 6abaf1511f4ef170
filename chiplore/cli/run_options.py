"""The options of the commands that run the loop (`optimize`, `demo`), each group gathered into one
argument: the schedule (`--budget`, `--seed`, `--patience`, `--target`), the roles (`--policy`,
`--architect`, `--refiner`, `--judge`, `--screen` and the LLM's options), the workers (`--workers`,
`--ray-address`, `--devices`) and the output (`-q`, `-v`, `--json`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.schedule import DEFAULT_BUDGET_S, PATIENCE, TARGET_RATIO
from chiplore.app import RoleChoice
from chiplore.cli.complete import toolchain_versions
from chiplore.cli.options import POLICIES, FiniteFloat, Seed, llm_options
from chiplore.cli.progress import ProgressStyle, progress_options

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class WorkerChoice:
    """--workers, --ray-address, --devices as typed (None: the settings')."""

    workers: int | None = None
    ray_address: str | None = None
    devices: int | None = None


@dataclass(frozen=True)
class Schedule:
    """--budget, --seed, --patience, --target (and, where the command has them, --toolchain and the
    worker options) as typed (seed None: the settings' seed)."""

    budget_s: float = DEFAULT_BUDGET_S
    seed: int | None = None
    patience: int = PATIENCE
    target_ratio: float = TARGET_RATIO
    toolchain: str | None = None
    workers: WorkerChoice = WorkerChoice()

    def config(self, default_seed: int) -> dict[str, Any]:
        """The OptimizeConfig fields they set."""
        return {"budget_s": self.budget_s, "seed": default_seed if self.seed is None else self.seed,
                "patience": self.patience, "target_ratio": self.target_ratio}  # fmt: skip


@dataclass(frozen=True)
class Output:
    progress: ProgressStyle
    as_json: bool


def schedule_options(budget_help: str) -> Callable[[F], F]:
    """--budget (with its help), --seed, --patience and --target, gathered into `schedule: Schedule`."""

    def decorate(command: F) -> F:
        @click.option("--budget", "budget_s", type=FiniteFloat(strict=True), default=DEFAULT_BUDGET_S,
                      show_default=True, help=budget_help)  # fmt: skip
        @click.option(
            "--seed", type=Seed(), default=None, help="Seed of the builtin policies [default: the settings' seed]."
        )
        @click.option("--patience", type=click.IntRange(min=1), default=PATIENCE, show_default=True,
                      help="Stop a kernel after this many proposals without an accepted change (far from the bound, "
                           "the architect opens new branches first).")  # fmt: skip
        @click.option("--target", "target_ratio", type=FiniteFloat(1.0), default=TARGET_RATIO, show_default=True,
                      help="Stop a kernel once BEST is within this factor of the measured weight-movement "
                           "bound.")  # fmt: skip
        @functools.wraps(command)
        def wrapper(*args: Any, **options: Any) -> Any:
            schedule = Schedule(*(options.pop(name) for name in ("budget_s", "seed", "patience", "target_ratio")),
                                toolchain=options.pop("toolchain", None),
                                workers=options.pop("worker_choice", WorkerChoice()))  # fmt: skip
            return command(*args, schedule=schedule, **options)

        return wrapper  # type: ignore[return-value]

    return decorate


def toolchain_option(command: F) -> F:
    """--toolchain, for `schedule_options` (which must come below it: it gathers what this passes)."""
    return click.option("--toolchain", default=None, shell_complete=toolchain_versions,
                        help="Toolchain version [default: the graph's active one].")(command)  # fmt: skip


def role_options(command: F) -> F:
    """--policy, --architect, --refiner, --judge, --screen and the LLM's options, gathered into
    `roles: RoleChoice`."""

    @click.option("--policy", type=click.Choice(POLICIES), default="builtin", show_default=True,
                  help="The policy of both the architect and the refiner.")  # fmt: skip
    @click.option("--architect", type=click.Choice(POLICIES), default=None,
                  help="The architect's policy [default: --policy].")  # fmt: skip
    @click.option(
        "--refiner", type=click.Choice(POLICIES), default=None, help="The refiner's policy [default: --policy]."
    )
    @click.option("--judge", default="", metavar="MODULE:FACTORY",
                  help="A judge of your own: a factory (called with no argument) of a "
                       "chiplore.agents.judge.Judge.")  # fmt: skip
    @click.option("--screen", "screens", multiple=True, metavar="MODULE:FACTORY",
                  help="An extra screen, run after the standard ones: a factory of a chiplore.agents.screens.Screen "
                       "(repeatable).")  # fmt: skip
    @llm_options
    @functools.wraps(command)
    def wrapper(*args: Any, **options: Any) -> Any:
        policy, llm = options.pop("policy"), options.pop("llm")
        assert isinstance(llm, LLMConfig)
        roles = RoleChoice(architect=options.pop("architect") or policy, refiner=options.pop("refiner") or policy,
                           llm=llm, judge=options.pop("judge"), screens=tuple(options.pop("screens")))  # fmt: skip
        return command(*args, roles=roles, **options)

    return wrapper  # type: ignore[return-value]


def worker_options(command: F) -> F:
    """--workers, --ray-address and --devices, gathered into the schedule's `workers` (`schedule_options`
    must come below them: it gathers what these pass)."""

    @click.option("--workers", type=click.IntRange(min=1), default=None,
                  help="CPU workers for the free screens; more than 1 runs every kernel and design at once on Ray, "
                       "with one runner per device [env CHIPLORE_WORKERS; default: 1, no Ray].")  # fmt: skip
    @click.option("--ray-address", default=None, metavar="ADDR",
                  help="Join this Ray cluster (`ray start --head` prints it) instead of starting a local Ray "
                       "[env CHIPLORE_RAY_ADDRESS].")  # fmt: skip
    @click.option("--devices", type=click.IntRange(min=1, max=256), default=None,
                  help="Devices of a simulated target, each with its own queue, clock and noise "
                       "[env CHIPLORE_DEVICES; default: 1].")  # fmt: skip
    @functools.wraps(command)
    def wrapper(*args: Any, **options: Any) -> Any:
        workers = WorkerChoice(*(options.pop(name) for name in ("workers", "ray_address", "devices")))
        return command(*args, worker_choice=workers, **options)

    return wrapper  # type: ignore[return-value]


def output_options(command: F) -> F:
    """-q, -v and --json, gathered into `output: Output`."""

    @progress_options
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
    @functools.wraps(command)
    def wrapper(*args: Any, **options: Any) -> Any:
        output = Output(options.pop("progress_style"), options.pop("as_json"))
        return command(*args, output=output, **options)

    return wrapper  # type: ignore[return-value]
