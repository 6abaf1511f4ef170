"""A session: one open graph store and one target, and what chiplore does with them. The CLI is a
thin shell over it, and a Python user drives chiplore the same way:

    with App(Settings()).session() as session:
        session.learn()
        session.optimize(["decoder_feedforward"], budget_s=600)
        print(session.status())
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import ValidationError

from chiplore import queries as named_queries
from chiplore.agents.callbacks import Note
from chiplore.agents.knowledge import chip_refused_under, read_knowledge
from chiplore.agents.loop import OptimizeContext, OptimizeSummary, choose_kernels, optimize
from chiplore.agents.proposers import BuiltinArchitect
from chiplore.agents.proposers.search import SearchBudget
from chiplore.agents.schedule import OptimizeConfig, Roles
from chiplore.agents.upgrade import UpgradeSummary, upgrade
from chiplore.core.errors import ConfigError, OutputError, QueryError
from chiplore.core.target import KernelSpec, Target
from chiplore.ingest.learn import DEFAULT_BUDGET_S as LEARN_BUDGET_S
from chiplore.ingest.learn import LearnSummary, learn
from chiplore.ingest.librarian import Librarian
from chiplore.kg.cypher_script import export_cypher
from chiplore.kg.graph_io import Exported, Imported, copy_graph, export_jsonl, import_jsonl
from chiplore.kg.guard import GuardedResult, UntrustedLimits
from chiplore.kg.models import DesignNode
from chiplore.kg.repo.designs import any_best, lineage_ids, root_of
from chiplore.kg.repo.devices import DeviceUsage, device_usage
from chiplore.kg.repo.knowledge import close_orphaned_activities, learnt_counts
from chiplore.kg.repo.overview import Overview, overview
from chiplore.kg.repo.progress import KernelProgress, design_tree, kernel_progress
from chiplore.kg.repo.results import (
    Snapshot,
    baseline_under,
    designs_starting_with,
    lineage,
    parameter_keys,
    program_of,
    snapshot,
)
from chiplore.kg.repo.targets import active_toolchain, register_target
from chiplore.kg.schema import SchemaReport, ensure_schema
from chiplore.kg.store import GraphStore, Record
from chiplore.results import BestProgram, DesignProgram, comment_prefix, with_header

GRAPH_FORMATS = ("jsonl", "cypher")


@dataclass(frozen=True)
class Workers:
    """Where optimize runs: `count` CPU workers for the free screens; more than one (or a Ray address)
    runs every kernel and every design of a round at once on Ray, one actor per device."""

    count: int = 1
    ray_address: str | None = None

    @property
    def pooled(self) -> bool:
        return self.count > 1 or bool(self.ray_address)


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

    def as_record(self) -> dict[str, Any]:
        """The tree as nested JSON: each design with its children, BEST and the path to it marked."""

        def node(design: DesignNode) -> dict[str, Any]:
            return {"id": design.id, "role": design.role, "policy": design.policy, "status": design.status,
                    "measured_cycles": design.measured_cycles, "predicted_cycles": design.predicted_cycles,
                    "change": design.change, "reason": design.reason, "flagged": design.flagged,
                    "best": design.id == self.best, "on_best_path": design.id in self.lineage,
                    "children": [node(child) for child in self.children.get(design.id, [])]}  # fmt: skip

        return {"kernel": self.root.kernel, "best": self.best, "root": node(self.root)}


class Session:
    """chiplore's operations on one store and one target. Every operation prepares the graph first
    (schema migrations, the target and its toolchains registered), once per session."""

    def __init__(self, store: GraphStore, target: Target, *, target_factory: Callable[[], Target] | None = None,
                 search_predictions: int | None = None) -> None:  # fmt: skip
        """`target_factory` builds the same target in another process (a Ray worker's); `optimize`
        needs it for `workers > 1` (App.session gives one). `search_predictions`: what the builtin
        architect may spend of the cost model per proposal (None: its default)."""
        self.store, self.target, self.target_factory = store, target, target_factory
        self.search_predictions = search_predictions
        self.pack = target.pack()
        self._schema: SchemaReport | None = None

    def prepare(self) -> SchemaReport:
        """Idempotent: the schema at its latest version and the target registered with its toolchains."""
        if self._schema is None:
            self._schema = ensure_schema(self.store)
            register_target(self.store, self.target.name, self.target.toolchains(), self.target.default_toolchain(),
                            self.target.description or self.target.name)  # fmt: skip
            close_orphaned_activities(self.store)  # runs that died without a word read `running` no more
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
              librarian: Librarian | None = None,
              on_probe: Callable[[str, float], None] | None = None) -> LearnSummary:  # fmt: skip
        """Docs into claims, compiler probes into rules, microbenchmarks into measurements."""
        version = self.toolchain(toolchain)
        self._not_behind(version)
        return learn(self.store, self.target, version, budget_s=budget_s, librarian=librarian, on_probe=on_probe)

    def _not_behind(self, version: str) -> None:
        """Refuse a version older than the graph's active one once the graph has work under that one: its
        facts would stand beside the newer ones as current (a user's `learn --toolchain 0.5.0` on a 0.7.0
        graph made 0.5.0's DM size current). A fresh graph learns any version."""
        active, versions = self.active_toolchain(), self.target.toolchains()
        behind = active in versions and versions.index(version) < versions.index(active)
        if behind and (any_best(self.store) or learnt_counts(self.store, str(active))["measured_params"]):
            raise ConfigError(f"the graph is on toolchain {active} and does not go back to {version} (upgrades "
                              f"only move forward): use another data dir for {version}")  # fmt: skip

    def default_roles(self) -> Roles:
        """The builtin roles, the architect searching within the session's budget of predictions."""
        if self.search_predictions is None:
            return Roles()
        return Roles(architect=BuiltinArchitect(SearchBudget(predictions=self.search_predictions)))

    def optimize(self, kernels: str | Sequence[str] | None = None, *, toolchain: str | None = None,
                 roles: Roles | None = None, on_event: Note | None = None, workers: Workers | None = None,
                 **config: Any) -> OptimizeSummary:  # fmt: skip
        """Propose, screen, run and judge designs of the kernels (all by default) against BEST. The
        designs an earlier run left unfinished (killed, or stopped by its budget) are finished first;
        another live run's are left to it, so several runs may share a graph.

        `config` holds OptimizeConfig's fields (`budget_s`, `seed`, `patience`, `target_ratio`, ...);
        `roles` who designs, screens and judges (default: `default_roles()`). `workers` with more
        than one worker (or a Ray address) runs every kernel and every design of a round at once on
        Ray: free screens on its CPU workers, device jobs on one actor per device of the target (a
        local Ray is started unless it names a cluster); the summary then also holds the run's
        calendar, each device's use and when each BEST was decided (chiplore.agents.scale)."""
        if isinstance(kernels, str):  # one kernel's name, not its letters
            kernels = [kernels]
        chosen = [spec.name for spec in choose_kernels(self.target, list(kernels) if kernels else None)]
        try:
            settings = OptimizeConfig.model_validate({**config, "kernels": tuple(chosen)})
        except ValidationError as error:
            problem = error.errors()[0]
            raise ConfigError(f"optimize: {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None
        version = self.toolchain(toolchain)
        self._not_behind(version)
        active = self.active_toolchain()
        if active and version != active and any_best(self.store):
            raise ConfigError(
                f"the graph's kernels are on toolchain {active}: run `chiplore toolchain upgrade {version}` first "
                "(it re-validates each BEST and re-checks the graph's facts)"
            )
        context = OptimizeContext(self.store, self.target, version)
        roles = roles or self.default_roles()
        if workers is None or not workers.pooled or chip_refused_under(self.store, self.target, version):
            return optimize(context, settings, roles, on_event)  # a refused graph: recorded and refused here, no Ray
        if self.target_factory is None:
            raise ConfigError("optimize on several workers builds the target in each worker: open the session with "
                              "a target_factory (App.session does)")  # fmt: skip
        try:  # Ray loads only for --workers > 1
            from chiplore.agents.scale.loop import PooledExecutor
            from chiplore.agents.scale.ray_engine import RayEngine
        except ImportError as error:
            raise ConfigError(f"--workers > 1 runs on Ray, which is not installed ({error}): "
                              "pip install 'chiplore[ray]'") from None  # fmt: skip
        with RayEngine(self.target_factory, self.target.devices(), workers=workers.count,
                       address=workers.ray_address, chip=self.target.chip()) as engine:  # fmt: skip
            return optimize(context, settings, roles, on_event, PooledExecutor(engine))

    def devices(self) -> list[DeviceUsage]:
        """Each device's use in the last run with `--workers` above 1 (none after `--workers 1` runs only)."""
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
        """A kernel's Design Tree (a one-line ConfigError for a kernel the target does not offer, or
        one not optimized yet)."""
        root, children, best = design_tree(self.store, kernel)
        if root is None:
            raise ConfigError(self._not_optimized(kernel, "has no design tree yet"))
        return DesignTree(root, children, best, lineage_ids(self.store, kernel))

    # -- results out (chiplore best, show) -------------------------------------------------------

    def best(self, kernel: str) -> BestProgram:
        """A kernel's BEST: its program, where it stands (what `status` says of the kernel) and the
        accepted path from the baseline to it."""
        progress = next((k for k in self.status() if k.kernel == kernel), None)
        if progress is None or progress.best_design is None:
            raise ConfigError(self._not_optimized(kernel, "has no BEST yet"))
        program = self.design(progress.best_design)
        baseline = baseline_under(self.store, kernel, self.active_toolchain())
        return BestProgram.of(program, progress, lineage(self.store, kernel), baseline)

    def design(self, design: str) -> DesignProgram:
        """A design and its program, by its id or a prefix of it that names one design (`tree` prints
        the first 10 characters)."""
        if len(design) < 4:
            raise ConfigError(
                f"design {design!r}: give at least 4 characters of its id (`chiplore tree KERNEL` lists them)"
            )
        found = program_of(self.store, design)
        if found is None:
            matches = designs_starting_with(self.store, design)
            if len(matches) != 1:
                kind = (
                    "no design"
                    if not matches
                    else f"{len(matches)}+ designs"
                    if len(matches) > 5
                    else f"{len(matches)} designs"
                )
                hint = "`chiplore tree KERNEL` lists a kernel's designs" if not matches else "give more of the id"
                raise ConfigError(f"{kind} with an id starting {design!r}: {hint}")
            found = program_of(self.store, matches[0])
            assert found is not None
        return DesignProgram.of(found.design, toolchain=found.toolchain, sha=found.sha, source=found.source,
                                parent=found.parent)  # fmt: skip

    def baseline(self, kernel: str) -> DesignProgram | None:
        """The kernel's baseline as it runs under the active toolchain (an upgrade's port of the
        official one, after an upgrade), or None before the kernel is optimized."""
        found = baseline_under(self.store, kernel, self.active_toolchain())
        return self.design(found) if found else None

    def program_text(self, program: BestProgram | DesignProgram, *, header: bool = True) -> str:
        """The program to write to a file: with a header comment (BEST's standing and lineage, or a
        design's role and cycles) where the target's compiler reads the program the same with it,
        else the program exactly as the graph holds it."""
        if not header:
            return program.source
        version = program.toolchain

        def verdict(source: str) -> tuple[bool, tuple[str, ...]]:
            checked = self.target.check(source, version)
            return checked.ok, tuple(sorted(d.code for d in checked.diagnostics))

        prefix = comment_prefix(self.pack.lexer())
        return with_header(program.source, program.header(), prefix, verdict) or program.source

    def _not_optimized(self, kernel: str, what: str) -> str:
        if kernel not in {spec.name for spec in self.target.kernels()}:
            return self._unknown(kernel)
        root = root_of(self.store, kernel)
        if root is not None and root.status == "failed" and root.reason:
            # optimize ran and could not start (a baseline this chip refuses, nothing to stand in): its
            # advice would be to run it again
            return f"{kernel} {what}: its optimization could not start: {root.reason}"
        return f"{kernel} {what}: `chiplore optimize {kernel}` optimizes it"

    def kernels(self) -> list[KernelListing]:
        """The kernels the target offers, each with where it comes from (a target that does not say:
        "target"). Reads nothing from the graph."""
        origins = self.target.kernel_origins()
        return [KernelListing(spec, origins.get(spec.name, "target")) for spec in self.target.kernels()]

    def kernel(self, name: str) -> KernelListing:
        """One kernel the target offers (a one-line ConfigError naming those it offers for another name)."""
        listing = next((k for k in self.kernels() if k.spec.name == name), None)
        if listing is None:
            raise ConfigError(self._unknown(name))
        return listing

    def _unknown(self, kernel: str) -> str:
        offered = ", ".join(spec.name for spec in self.target.kernels())
        return f"unknown kernel {kernel!r}; {self.target.name} offers {offered}"

    def add_kernel(self, folder: Path) -> KernelSpec:
        """Validate the kernel pack in `folder` and install it into the target (a one-line TargetError
        when it is not valid). The graph is not touched: `optimize` registers the kernel like any other."""
        return self.target.add_kernel(Path(folder))

    def pack_notes(self, spec: KernelSpec) -> list[str]:
        """What a user adding the kernel should know before `optimize`: the graph's toolchain refuses its
        baseline as written (the loop then ports it or stands a generated design in for it), and the
        builtin proposers have no design space for it (the loop then measures the baseline and stops)."""
        version = self.toolchain()
        notes = []
        checked = self.target.check(spec.baseline_source, version)
        if not checked.ok:
            first = next(d for d in checked.diagnostics if d.is_error)
            notes.append(f"its baseline does not compile under this graph's toolchain {version} ({first.code}: "
                         f"{first.message}): optimize ports it where the toolchain refuses it, or stands a "
                         "generated design in for it (where the chip's shape does: no port mends that), and the "
                         "speedups are then over that design")  # fmt: skip
        facts = read_knowledge(self.store, version).facts
        if self.pack.design_space(spec, facts) is None:
            why = self.pack.no_space_reason(spec, facts) or "the target pack does not say why"
            notes.append(f"the target pack has no design space for it ({why}): optimize measures its baseline "
                         "and proposes nothing")  # fmt: skip
        return notes

    def labels(self) -> dict[str, str]:
        """Each kernel's short name for tables and figures."""
        return {spec.name: spec.label or spec.name for spec in self.target.kernels()}

    def report(self) -> str:
        """One self-contained HTML page of what the graph holds."""
        from chiplore.report import render_report  # matplotlib loads only for a report

        return render_report(self.store, self.pack.roof.key, self.labels(), lexer=self.pack.lexer())

    # -- asking the graph ----------------------------------------------------------------------------

    def query(self, name: str, params: Mapping[str, Any] | None = None) -> list[Record]:
        """Run a named query (`queries/*.cypher`) read-only; its parameters are checked and typed
        against its header first (QueryParameterError names what is wrong)."""
        named = named_queries.get(name)
        return self.store.read(named.text, named.bind(params or {}))

    def cypher(self, text: str, params: Mapping[str, Any] | None = None, *,
               limits: UntrustedLimits | None = None) -> GuardedResult:  # fmt: skip
        """Run Cypher someone wrote on the guarded read path: the planner refuses writes, file loads
        and administration; the server stops it at the timeout; rows past the caps are cut."""
        if not isinstance(text, str):
            raise QueryError(f"a Cypher query is text, not {type(text).__name__}")
        return self.store.read_untrusted(text, params, limits=limits or UntrustedLimits())

    def parameter_keys(self) -> list[Record]:
        """The parameter keys the graph holds (measured or stated by the docs), with unit, meaning,
        counts and the latest value: what `measurements-of -p param=KEY` takes."""
        return parameter_keys(self.store)

    def snapshot(self, kernel: str | None = None) -> Snapshot:
        """Device seconds charged so far and a kernel's BEST (the progress lines read it)."""
        return snapshot(self.store, kernel)

    # -- the graph as a file -------------------------------------------------------------------------

    def export_graph(self, path: str | os.PathLike[str], *, format: Literal["jsonl", "cypher"] = "jsonl") -> Exported:
        """Write the whole graph to `path`: JSON lines (chiplore.kg.graph_io's format, which `import_graph`
        reads) or a Cypher script for Neo4j. Written beside `path` first, then moved into place (through
        a symbolic link, to the file it names); a path that is not a file (a device, a pipe) is refused."""
        path = Path(path)
        _graph_format(format)
        if path.exists() and not path.is_file():
            raise OutputError(f"cannot write {path}: it is not a regular file (export writes a file; `-` is stdout)")
        path = path.resolve() if path.is_symlink() else path
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                done = self.write_graph(out, format=format)
            partial.replace(path)
        except OSError as error:  # a full disk, a folder it may not write: nothing half-written is left
            partial.unlink(missing_ok=True)
            raise OutputError(f"cannot write {path}: {error.strerror or error}") from None
        return done

    def write_graph(self, out: TextIO, *, format: Literal["jsonl", "cypher"] = "jsonl") -> Exported:
        """Write the whole graph to an open text stream (stdout, say), as `export_graph` does to a file."""
        _graph_format(format)
        return export_jsonl(self.store, out) if format == "jsonl" else export_cypher(self.store, out)

    def import_graph(self, path: str | os.PathLike[str], *, replace: bool = False,
                     on_progress: Callable[[str, int], None] | None = None) -> Imported:  # fmt: skip
        """Read a JSON-lines graph file into this session's store, which must be empty (`replace`
        empties it first). The file is checked whole before anything is written."""
        return import_jsonl(self.store, Path(path), replace=replace, on_progress=on_progress)

    def copy_graph(self, destination: GraphStore, *, replace: bool = False,
                   on_progress: Callable[[str, int], None] | None = None) -> Imported:  # fmt: skip
        """Copy this session's graph into another store (empty, or emptied by `replace`): the
        embedded graph into a Neo4j server, to explore a run in Neo4j Browser."""
        return copy_graph(self.store, destination, replace=replace, on_progress=on_progress)


def _graph_format(format: str) -> None:
    if format not in GRAPH_FORMATS:
        raise ConfigError(f"no graph format {format!r}: export writes {' or '.join(map(repr, GRAPH_FORMATS))}")
