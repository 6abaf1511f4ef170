"""A session: one open graph store and one target, and what chiplore does with them. The CLI is a
thin shell over it, and a Python user drives chiplore the same way:

    with App(Settings()).session() as session:
        session.learn()
        session.optimize(["decoder_feedforward"], budget_s=600)
        print(session.status())
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.callbacks import Note
from agents.loop import DEFAULT_BUDGET_S as OPTIMIZE_BUDGET_S
from agents.loop import PATIENCE, TARGET_RATIO, OptimizeSummary, choose_kernels, optimize
from agents.proposers import Proposer
from agents.upgrade import UpgradeSummary, upgrade
from chiplore.core.errors import ConfigError
from chiplore.core.target import KernelSpec, Target
from ingest.learn import DEFAULT_BUDGET_S as LEARN_BUDGET_S
from ingest.learn import LearnSummary, learn
from ingest.librarian import Librarian, PageLibrarian
from kg.models import DesignNode
from kg.repo.designs import any_best, lineage_ids
from kg.repo.devices import DeviceUsage, device_usage
from kg.repo.overview import Overview, overview
from kg.repo.progress import KernelProgress, design_tree, kernel_progress
from kg.repo.targets import active_toolchain, register_target
from kg.schema import SchemaReport, ensure_schema
from kg.store import GraphStore


@dataclass(frozen=True)
class KernelListing:
    """A kernel the target offers and where it comes from (SimRNGD: built-in, CHIPLORE_KERNELS, installed)."""

    spec: KernelSpec
    origin: str


@dataclass(frozen=True)
class DesignTree:
    """A kernel's Design Tree: its root, each design's children, BEST and BEST's lineage."""

    root: DesignNode
    children: dict[str, list[DesignNode]]
    best: str | None
    lineage: set[str]


class Session:
    """chiplore's operations on one store and one target. Every operation prepares the graph first
    (schema migrations, the target and its toolchains registered), once per session."""

    def __init__(self, store: GraphStore, target: Target, *,
                 target_factory: Callable[[], Target] | None = None) -> None:  # fmt: skip
        """`target_factory` builds the same target in another process (a Ray worker's); `optimize`
        needs it for `workers > 1` (App.session gives one)."""
        self.store, self.target, self.target_factory = store, target, target_factory
        self.pack = target.pack()
        self._schema: SchemaReport | None = None

    def prepare(self) -> SchemaReport:
        """Idempotent: the schema at its latest version and the target registered with its toolchains."""
        if self._schema is None:
            self._schema = ensure_schema(self.store)
            register_target(self.store, self.target.name, self.target.toolchains(), self.target.default_toolchain(),
                            getattr(self.target, "description", self.target.name))  # fmt: skip
        return self._schema

    def active_toolchain(self) -> str | None:
        return active_toolchain(self.store, self.target.name)

    def toolchain(self, requested: str | None = None) -> str:
        """The version to work under: the one asked for, else the graph's active one, else the default."""
        self.prepare()
        version = requested or self.active_toolchain() or self.target.default_toolchain()
        if version not in self.target.toolchains():
            raise ConfigError(f"unknown toolchain {version!r}; {self.target.name} has "
                              f"{', '.join(self.target.toolchains())}")  # fmt: skip
        return version

    def learn(self, *, toolchain: str | None = None, budget_s: float = LEARN_BUDGET_S,
              librarian: Librarian | PageLibrarian | None = None,
              on_probe: Callable[[str, float], None] | None = None) -> LearnSummary:  # fmt: skip
        """Docs into claims, compiler probes into rules, microbenchmarks into measurements."""
        version = self.toolchain(toolchain)
        return learn(self.store, self.target, version, budget_s=budget_s, librarian=librarian, on_probe=on_probe)

    def optimize(self, kernels: Sequence[str] | None = None, *, toolchain: str | None = None,
                 budget_s: float = OPTIMIZE_BUDGET_S, seed: int = 0, patience: int = PATIENCE,
                 target_ratio: float = TARGET_RATIO, architect: Proposer | None = None,
                 refiner: Proposer | None = None, on_event: Note | None = None, workers: int = 1,
                 ray_address: str | None = None) -> OptimizeSummary:  # fmt: skip
        """Propose, screen, run and judge designs of the kernels (all by default) against BEST. The
        designs an earlier run left unfinished (killed, or stopped by its budget) are finished first;
        another live run's are left to it, so several runs may share a graph.

        `workers > 1` (or a `ray_address`) runs every kernel and every design of a round at once on
        Ray: free screens on `workers` CPU workers, device jobs on one actor per device of the target
        (a local Ray is started unless `ray_address` names a cluster). The summary then also holds
        the run's calendar, each device's use and when each BEST was decided (agents.scale)."""
        chosen = [spec.name for spec in choose_kernels(self.target, list(kernels) if kernels else None)]
        version = self.toolchain(toolchain)
        active = self.active_toolchain()
        if active and version != active and any_best(self.store):
            raise ConfigError(
                f"the graph's kernels are on toolchain {active}: run `chiplore toolchain upgrade {version}` first "
                "(it re-validates each BEST and re-checks the graph's facts)"
            )
        if workers <= 1 and not ray_address:
            return optimize(self.store, self.target, version, kernels=chosen, budget_s=budget_s, seed=seed,
                            patience=patience, target_ratio=target_ratio, architect=architect, refiner=refiner,
                            on_event=on_event)  # fmt: skip
        return self._optimize_on_ray(version, workers, ray_address, kernels=chosen, budget_s=budget_s, seed=seed,
                                     patience=patience, target_ratio=target_ratio, architect=architect,
                                     refiner=refiner, on_event=on_event)  # fmt: skip

    def _optimize_on_ray(self, version: str, workers: int, ray_address: str | None,
                         **loop: Any) -> OptimizeSummary:  # fmt: skip
        if self.target_factory is None:
            raise ConfigError("optimize on several workers builds the target in each worker: open the session with "
                              "a target_factory (App.session does)")  # fmt: skip
        try:  # Ray loads only for --workers > 1
            from agents.scale.loop import optimize_on_devices
            from agents.scale.ray_engine import RayEngine
        except ImportError as error:
            raise ConfigError(f"--workers > 1 runs on Ray, which is not installed ({error}): "
                              "pip install 'chiplore[ray]'") from None  # fmt: skip
        with RayEngine(self.target_factory, self.target.devices(), workers=workers, address=ray_address) as engine:
            return optimize_on_devices(self.store, self.target, version, engine, **loop)

    def devices(self) -> list[DeviceUsage]:
        """Each device's use in the last run on several devices (none after `--workers 1` runs only)."""
        return device_usage(self.store)

    def upgrade(self, version: str, *, budget_s: float | None = None,
                on_event: Callable[[str], None] | None = None) -> UpgradeSummary:  # fmt: skip
        """Move the graph to toolchain `version`: stale facts re-checked, rules re-probed, kernels re-validated."""
        self.prepare()
        return upgrade(self.store, self.target, version, budget_s=budget_s, on_event=on_event)

    def status(self) -> list[KernelProgress]:
        """Each kernel's BEST against its baseline and bound, under the active toolchain."""
        return kernel_progress(self.store, self.pack.roof.key, self.target.name)

    def overview(self) -> Overview:
        """The graph at a glance: the target, its toolchains, node counts, device time."""
        return overview(self.store, self.target.name)

    def tree(self, kernel: str) -> DesignTree:
        root, children, best = design_tree(self.store, kernel)
        if root is None:
            raise ConfigError(f"no design tree for {kernel!r}: it has not been optimized yet")
        return DesignTree(root, children, best, lineage_ids(self.store, kernel))

    def kernels(self) -> list[KernelListing]:
        """The kernels the target offers, each with where it comes from (a target that does not say:
        "target"). Reads nothing from the graph."""
        origins_of = getattr(self.target, "kernel_origins", None)
        origins: dict[str, str] = origins_of() if callable(origins_of) else {}
        return [KernelListing(spec, origins.get(spec.name, "target")) for spec in self.target.kernels()]

    def add_kernel(self, folder: Path) -> KernelSpec:
        """Validate the kernel pack in `folder` and install it into the target (a one-line TargetError
        when it is not valid). The graph is not touched: `optimize` registers the kernel like any other."""
        return self.target.add_kernel(Path(folder))

    def labels(self) -> dict[str, str]:
        """Each kernel's short name for tables and figures."""
        return {spec.name: spec.label or spec.name for spec in self.target.kernels()}

    def report(self) -> str:
        """One self-contained HTML page of what the graph holds."""
        from chiplore.report import render_report  # matplotlib loads only for a report

        return render_report(self.store, self.pack.roof.key, self.labels())
