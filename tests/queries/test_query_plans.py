"""Every named query starts from an index seek on its anchor label, on both backends: the plans come
from the backends' own planners (EXPLAIN, GRAPH.EXPLAIN) over the sample graph, not from timings.
A query that scans, or that carries a cartesian product, fails here with its plan in the message;
and on a copy of the graph without indexes the same check fails, so it is not vacuous."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chiplore import queries
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import FactStatus
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.plans import AllowedScan, plan_problems
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.kg.testing.sample import build_sample_graph, sample_query_params
from tests.conftest import Neo4jServer, wipe_neo4j

# The only whole-label scans a named query may make, each with why its label stays tiny.
ALLOWED_SCANS: dict[str, tuple[AllowedScan, ...]] = {
    "device-time-by-kernel": (
        AllowedScan("DeviceLedger", "one ledger node per kernel and one for the microbenchmarks, whatever the graph"),
    ),
}
CATALOGUE = queries.load_all()
pytestmark = pytest.mark.slow  # two sample graphs (and two unindexed copies) on both backends


def _check(store: GraphStore, name: str, params: dict[str, Any]) -> list[str]:
    query = CATALOGUE[name]
    plan = store.explain(query.text, query.bind(params))
    problems = plan_problems(plan, query.anchors, ALLOWED_SCANS.get(name, ()))
    return [f"{problem}\n{plan.render()}" for problem in problems]


def _fresh_plans(store: GraphStore) -> None:
    """Neo4j caches plans and samples index statistics lazily: the plans made while the graph was being
    written are not the ones to judge."""
    if isinstance(store, Neo4jStore):
        store.write("CALL db.prepareForReplanning(60000)")  # fresh index statistics, no cached plans


@pytest.fixture(scope="module")
def sample(neo4j_server: Neo4jServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    neo4j = neo4j_server.store()
    embedded = EmbeddedStore(Path(tmp_path_factory.mktemp("plans")))
    try:
        wipe_neo4j(neo4j)
        stores: dict[str, GraphStore] = {"neo4j": neo4j, "embedded": embedded}
        for store in stores.values():
            ensure_schema(store)
            summary = build_sample_graph(store, designs_per_kernel=60, seed=3)
            _fresh_plans(store)
        yield {**stores, "params": sample_query_params(summary)}
    finally:
        embedded.close()
        neo4j.close()


def test_every_named_query_names_its_anchor_labels() -> None:
    missing = [name for name, query in CATALOGUE.items() if not query.anchors]
    assert not missing, f"add '// anchors: <Label>' to the header of {missing}"


@pytest.mark.parametrize("backend", ["neo4j", "embedded"])
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_named_query_starts_from_an_index_seek(sample: dict[str, Any], name: str, backend: str) -> None:
    problems = _check(sample[backend], name, sample["params"].get(name, {}))
    assert not problems, f"{name} on {backend}:\n" + "\n".join(problems)


def test_contradicted_claims_starts_from_every_fact_status() -> None:
    # Its index-backed start lists the statuses; a status added to the model must be added there too.
    text = CATALOGUE["contradicted-claims"].text
    assert all(f"'{status}'" in text for status in typing.get_args(FactStatus)), text


# -- the same check fails where the indexes are missing ------------------------------------------------


def _unindexed(store: GraphStore) -> dict[str, Any]:
    summary = build_sample_graph(store, designs_per_kernel=20, seed=3)  # no ensure_schema: no index at all
    _fresh_plans(store)
    return sample_query_params(summary)


@pytest.mark.parametrize("backend", ["neo4j", "embedded"])
def test_the_check_fails_on_an_unindexed_copy(
    backend: str, neo4j_server: Neo4jServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store: GraphStore = request.getfixturevalue(f"{backend}_store")
    params = _unindexed(store)
    passing = [name for name in CATALOGUE if not _check(store, name, params.get(name, {}))]
    # Only an allow-listed scan of a tiny label needs no index.
    assert sorted(passing) == sorted(ALLOWED_SCANS), f"these passed without any index: {passing}"
