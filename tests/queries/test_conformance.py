"""Every named query gives the same answer on Neo4j and on the embedded store over the same graph."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chiplore import queries
from chiplore.core.errors import WriteRefused
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.kg.testing.sample import NEW, OLD, SampleSummary, build_sample_graph, sample_query_params
from tests.conftest import Neo4jServer, wipe_neo4j


@pytest.fixture(scope="module")
def seeded(neo4j_server: Neo4jServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    neo4j = neo4j_server.store()
    embedded = EmbeddedStore(Path(tmp_path_factory.mktemp("conformance")))
    try:
        wipe_neo4j(neo4j)
        summaries: list[SampleSummary] = []
        for store in (neo4j, embedded):
            ensure_schema(store)
            summaries.append(build_sample_graph(store, designs_per_kernel=60, seed=7))
        assert summaries[0] == summaries[1]
        yield {"neo4j": neo4j, "embedded": embedded, "summary": summaries[0]}
    finally:
        embedded.close()
        neo4j.close()


def _same(a: Any, b: Any) -> bool:
    """Equal, with floats compared to 1e-9 relative (sums may add in a different order)."""
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("name", sorted(queries.load_all()))
def test_named_query_agrees_on_both_backends(seeded: dict[str, Any], name: str) -> None:
    params = sample_query_params(seeded["summary"]).get(name, {})
    on_neo4j = queries.run(seeded["neo4j"], name, params)
    on_embedded = queries.run(seeded["embedded"], name, params)
    assert on_neo4j, f"{name} returned nothing: the comparison would prove nothing"
    assert list(on_neo4j[0]) == list(on_embedded[0]), "same columns in the same order"
    assert _same(on_neo4j, on_embedded), f"{name} differs:\nneo4j    {on_neo4j}\nembedded {on_embedded}"


def test_toolchain_diff_classifies_every_kind_of_rule_change(seeded: dict[str, Any]) -> None:
    rows = queries.run(seeded["embedded"], "toolchain-diff", {"from": OLD, "to": NEW})
    rule_changes = {row["change"] for row in rows if row["kind"] == "rule"}
    assert rule_changes == {"confirmed", "changed", "retired", "new"}
    measurement_changes = {row["key"]: row["change"] for row in rows if row["kind"] == "measurement"}
    assert measurement_changes["dma_startup_cycles"] == "changed"
    assert measurement_changes["hbm_bytes_per_cycle"] == "confirmed"
    assert measurement_changes["switch_bytes_per_cycle"] == "stale"
    changed = next(row for row in rows if row["key"] == "dma_startup_cycles")
    assert changed["after"] == changed["before"] + 3 and changed["before_ci"] and changed["after_ci"]
    # a confirmed measurement's after is what its re-check found, not its own value again
    confirmed = next(row for row in rows if row["key"] == "hbm_bytes_per_cycle")
    assert confirmed["after"] == confirmed["before"] + 0.25
    assert confirmed["after_ci"] == [confirmed["after"] - 0.5, confirmed["after"] + 0.5]
    assert confirmed["detail"].startswith(f"re-measured under {NEW}")
    assert {row["change"] for row in rows if row["kind"] == "claim"} == {"new", "dropped"}
    kernels = {row["key"]: row["change"] for row in rows if row["kind"] == "kernel"}
    assert sorted(kernels.values()) == ["repaired", "repaired", "survived"]


@pytest.mark.parametrize("backend", ["neo4j", "embedded"])
def test_measurements_of_names_the_versions_a_recheck_confirmed(seeded: dict[str, Any], backend: str) -> None:
    rows = queries.run(seeded[backend], "measurements-of", {"param": "hbm_bytes_per_cycle"})
    assert [row["confirmed_under"] for row in rows] == [[NEW]]
    assert rows[0]["runs"] >= 1


@pytest.mark.parametrize("backend", ["neo4j", "embedded"])
def test_toolchain_diff_of_a_version_with_itself_or_backwards_is_empty(seeded: dict[str, Any], backend: str) -> None:
    """FalkorDB matched one version against itself (83 rows 'confirmed' and 'stale' for 0.6.0 -> 0.6.0), and
    a reversed pair called a changed rule new: `from` must be older than `to`."""
    for params in ({"from": OLD, "to": OLD}, {"from": NEW, "to": NEW}, {"from": NEW, "to": OLD}):
        assert queries.run(seeded[backend], "toolchain-diff", params) == [], params


def test_contradicted_claims_give_the_measurements_own_unit(seeded: dict[str, Any]) -> None:
    """A claim in TB/s stood beside a measurement in B/cycle with no unit for the latter."""
    rows = [r for r in queries.run(seeded["embedded"], "contradicted-claims") if r["measured"] is not None]
    assert rows and all(r["measured_unit"] for r in rows), rows
    # a sentence stated on two pages looked like a duplicate row: each names the page of its version
    assert all(r["page"] == f"{r['param']}.md" and r["claimed_under"] for r in rows), rows


def test_stale_facts_say_what_each_is_about(seeded: dict[str, Any]) -> None:
    """A new user read only ids (`Measurement:0906bc87...`): each row names its parameter, key or text."""
    rows = queries.run(seeded["embedded"], "stale-facts")
    assert rows and all(row["about"] for row in rows), rows
    assert "switch_bytes_per_cycle" in {row["about"] for row in rows}


def test_best_lineage_walks_from_root_to_best(seeded: dict[str, Any]) -> None:
    kernel = seeded["summary"].kernels[0]
    rows = queries.run(seeded["neo4j"], "best-lineage", {"kernel": kernel})
    assert [row["depth"] for row in rows] == list(range(len(rows)))
    assert rows[0]["design"] == f"{kernel}-d0"


@pytest.mark.parametrize("backend", ["neo4j", "embedded"])
def test_named_queries_cannot_write(seeded: dict[str, Any], backend: str) -> None:
    store: GraphStore = seeded[backend]
    with pytest.raises(WriteRefused):
        store.read("MATCH (k:Kernel) SET k.name = 'renamed' RETURN k")
    assert store.read("MATCH (k:Kernel {name: 'renamed'}) RETURN count(k) AS n") == [{"n": 0}]


def test_sample_graph_is_identical_on_both_backends(seeded: dict[str, Any]) -> None:
    counting = "MATCH (n) UNWIND labels(n) AS label RETURN label, count(*) AS n ORDER BY label"
    assert seeded["neo4j"].read(counting) == seeded["embedded"].read(counting)
    rels = "MATCH ()-[r]->() RETURN type(r) AS type, count(*) AS n ORDER BY type"
    assert seeded["neo4j"].read(rels) == seeded["embedded"].read(rels)
