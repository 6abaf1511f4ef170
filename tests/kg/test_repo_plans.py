"""The repository queries on hot paths (the loop's every step, `chiplore status`, `tree`) start from an
index seek, on both backends. Each entry of HOT_PATHS is one call of a chiplore.kg.repo function; the test
runs it on the sample graph through a store that notes every statement, then reads each statement's
plan from the backend (EXPLAIN / GRAPH.EXPLAIN) and fails on a scan or a cartesian product.

To cover a repository function, add one line to HOT_PATHS: a name and a call on (store, sample).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import Activity, Comparison, DesignNode, DeviceRun, KernelVersion
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.plans import AllowedScan, plan_problems
from chiplore.kg.repo import designs, docs, knowledge, measurements, overview, predictions, progress, runs, targets
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import DEFAULT_BATCH_SIZE, GraphStore, Params, Record
from chiplore.kg.testing.sample import KERNELS, NEW, PARAMS, TARGET, build_sample_graph
from tests.conftest import Neo4jServer, wipe_neo4j

pytestmark = pytest.mark.slow  # two sample graphs, then every hot-path statement explained on each

# Labels a repository query may scan whole: each stays a handful of nodes, whatever the graph's size.
TINY_LABELS = (
    AllowedScan("Kernel", "one node per kernel of the target (a handful)"),
    AllowedScan("Target", "one node per registered target"),
    AllowedScan("DeviceLedger", "one node per kernel and one for the microbenchmarks"),
    AllowedScan("ACTIVE", "one ACTIVE relationship per target (its active toolchain)"),
)


@dataclass(frozen=True)
class Sample:
    """Names in the sample graph the calls below use."""

    kernel: str = KERNELS[0]
    design: str = f"{KERNELS[0]}-d3"
    parent: str = f"{KERNELS[0]}-d0"
    best: str = f"{KERNELS[0]}-d7"
    param: str = PARAMS[0][0]
    version: str = NEW
    target: str = TARGET


ACTIVITY = Activity(id="act-refiner", role="refiner", policy="llm", model="scripted", started_at="2026-01-01T00:00:00Z")


def _new_design(store: GraphStore, s: Sample) -> object:
    version = KernelVersion(sha="plan-probe-sha", kernel=s.kernel, source="// plan probe", toolchain=s.version)
    design = DesignNode(id="plan-probe", kernel=s.kernel, role="refiner", policy="llm", rationale="r", change="c",
                        status="proposed", depth=1, created_at="2026-02-01T00:00:00Z")  # fmt: skip
    return designs.add_design(store, design, version=version, parent=s.parent, activity=ACTIVITY,
                              consulted=[f"Measurement:meas-0.6.0-{s.param}"])  # fmt: skip


def _new_run(store: GraphStore, s: Sample) -> object:
    run = DeviceRun(id="plan-probe-run", kernel=s.kernel, job_id="job-plan-probe", cycles=[1.0, 2.0], median_cycles=1.5,
                    status="ok", device_s=0.5, toolchain=s.version, finished_at="2026-02-01T00:00:01Z")  # fmt: skip
    unrecorded: GraphStore = getattr(store, "inner", store)  # looking the sha up is not the hot path
    sha = unrecorded.read("MATCH (:DesignNode {id: $id})-[:HAS_VERSION]->(v) RETURN v.sha AS sha", {"id": s.design})
    return runs.record_device_runs(store, [(run, sha[0]["sha"])], activity=ACTIVITY)


def _new_comparison(store: GraphStore, s: Sample) -> object:
    comparison = Comparison(id="plan-probe-cmp", kernel=s.kernel, ratio=0.9, ci_low=0.88, ci_high=0.92,
                            p_value=0.01, pairs=8, method="paired-log-ratio", decision="reject",
                            decided_at="2026-02-01T00:00:02Z")  # fmt: skip
    return runs.record_comparison(store, comparison, candidate=s.design, incumbent=s.parent,
                                  run_ids=[f"{s.design}-run"], activity=ACTIVITY)  # fmt: skip


@dataclass(frozen=True)
class HotPath:
    name: str
    call: Callable[[GraphStore, Sample], object]
    # The statement looks several nodes up by their unique keys: the product of point lookups is one row.
    keyed_lookups: bool = False
    # Labels its statements may start from (empty: any index seek will do).
    anchors: tuple[str, ...] = ()
    # A known plan problem on these backends, waiting on the change named in `waiting_for` (strict:
    # the entry fails once the change is made, so that the mark is removed with it).
    waiting_for: str | None = None
    broken_on: tuple[str, ...] = ()


HOT_PATHS: tuple[HotPath, ...] = (
    # the loop, every step
    HotPath("designs.best_of", lambda st, s: designs.best_of(st, s.kernel)),
    HotPath("designs.root_of", lambda st, s: designs.root_of(st, s.kernel)),
    HotPath("designs.source_of", lambda st, s: designs.source_of(st, s.design)),
    HotPath("designs.children_of", lambda st, s: designs.children_of(st, s.parent)),
    HotPath("designs.get_design", lambda st, s: designs.get_design(st, s.design)),
    HotPath("designs.tried", lambda st, s: designs.tried(st, s.kernel, ["0" * 64, "1" * 64])),
    HotPath("designs.proposals_since_accept", lambda st, s: designs.proposals_since_accept(st, s.kernel)),
    HotPath("designs.unfinished_designs", lambda st, s: designs.unfinished_designs(st, s.kernel)),
    HotPath("designs.recent_failures", lambda st, s: designs.recent_failures(st, s.kernel, 5)),
    HotPath("designs.lineage_ids", lambda st, s: designs.lineage_ids(st, s.kernel)),
    HotPath("designs.prediction_pairs", lambda st, s: designs.prediction_pairs(st, s.kernel)),
    HotPath("predictions.predictions_of", lambda st, s: predictions.predictions_of(st, s.kernel)),
    HotPath("designs.add_design", _new_design, keyed_lookups=True),
    HotPath("designs.update_design", lambda st, s: designs.update_design(st, s.design, reason="plan probe")),
    HotPath("designs.set_best", lambda st, s: designs.set_best(st, s.kernel, s.best, status="accepted"), True),
    HotPath("designs.set_best replacing", lambda st, s: designs.set_best(st, s.kernel, s.best, replaces=s.best), True),
    HotPath("runs.record_device_runs", _new_run, keyed_lookups=True),
    HotPath("runs.record_comparison", _new_comparison, keyed_lookups=True),
    HotPath(
        "runs.graded_runs",
        lambda st, s: runs.graded_runs(st, s.design),
        anchors=("DesignNode",),
    ),
    HotPath("runs.latest_comparison", lambda st, s: runs.latest_comparison(st, s.design, s.parent)),
    HotPath("runs.supersede_comparisons", lambda st, s: runs.supersede_comparisons(st, s.design, s.parent)),
    HotPath("runs.last_accepted_ratio", lambda st, s: runs.last_accepted_ratio(st, s.kernel)),
    HotPath("runs.ledger_seconds", lambda st, s: runs.ledger_seconds(st, s.kernel)),
    HotPath("knowledge.measurements_of", lambda st, s: knowledge.measurements_of(st, s.param)),
    HotPath("measurements.latest_value", lambda st, s: measurements.latest_value(st, s.version, s.param)),
    HotPath(
        "measurements.values_under",
        lambda st, s: measurements.values_under(st, s.target, s.version),
    ),
    HotPath("docs.search_chunks", lambda st, s: docs.search_chunks(st, s.version, ["the"], 8)),
    HotPath("targets.active_toolchain", lambda st, s: targets.active_toolchain(st, s.target)),
    # chiplore status and tree
    HotPath("overview.overview", lambda st, s: overview.overview(st, s.target)),
    HotPath(
        "progress.kernel_progress",
        lambda st, s: progress.kernel_progress(st, s.param),
        anchors=("Kernel", "Target", "Toolchain", "Measurement", "DesignNode", "Revalidation", "DeviceLedger"),
    ),
    HotPath(
        "progress.pooled_cycles",
        lambda st, s: progress.pooled_cycles(st, s.best, s.version),
        anchors=("DesignNode",),
    ),
    HotPath("progress.design_tree", lambda st, s: progress.design_tree(st, s.kernel)),
)


class RecordingStore:
    """A real store that notes every statement it runs, with its parameters (the first batch's rows)."""

    def __init__(self, inner: GraphStore) -> None:
        self.inner = inner
        self.statements: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        self.statements.append((query, dict(params or {})))
        return self.inner.read(query, params, timeout_s=timeout_s)

    def write(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        self.statements.append((query, dict(params or {})))
        return self.inner.write(query, params, timeout_s=timeout_s)

    def write_rows(
        self,
        query: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        params: Params | None = None,
    ) -> int:
        self.statements.append((query, {**(params or {}), "rows": list(rows[:batch_size])}))
        return self.inner.write_rows(query, rows, batch_size=batch_size, params=params)


@pytest.fixture(scope="module")
def sample(neo4j_server: Neo4jServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, GraphStore]]:
    neo4j = neo4j_server.store()
    embedded = EmbeddedStore(Path(tmp_path_factory.mktemp("repo-plans")))
    try:
        wipe_neo4j(neo4j)
        for store in (neo4j, embedded):
            ensure_schema(store)
            build_sample_graph(store, designs_per_kernel=60, seed=5)
            if isinstance(store, Neo4jStore):
                store.write("CALL db.prepareForReplanning(60000)")  # fresh index statistics, no cached plans
        yield {"neo4j": neo4j, "embedded": embedded}
    finally:
        embedded.close()
        neo4j.close()


def _cases() -> list[object]:
    cases = []
    for path in HOT_PATHS:
        for backend in ("neo4j", "embedded"):
            waiting = backend in path.broken_on
            marks = [pytest.mark.xfail(strict=True, reason=f"waiting for {path.waiting_for}")] if waiting else []
            cases.append(pytest.param(path, backend, id=f"{path.name}-{backend}", marks=marks))
    return cases


@pytest.mark.parametrize(("path", "backend"), _cases())
def test_hot_path_statements_start_from_an_index_seek(
    sample: dict[str, GraphStore], path: HotPath, backend: str
) -> None:
    store = sample[backend]
    recorder = RecordingStore(store)
    path.call(recorder, Sample())  # type: ignore[arg-type]
    assert recorder.statements, f"{path.name} ran no statement: the entry tests nothing"
    failures = []
    for query, params in recorder.statements:
        plan = store.explain(query, params)
        problems = plan_problems(plan, path.anchors, TINY_LABELS, keyed_products=path.keyed_lookups)
        if problems:
            failures.append(f"{query}\n  " + "\n  ".join(problems) + "\n" + plan.render())
    assert not failures, f"{path.name} on {backend}:\n\n" + "\n\n".join(failures)
