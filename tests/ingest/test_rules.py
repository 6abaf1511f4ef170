"""Legality rules from the compiler: chiplore's probes, one limit or construct at a time, become
rules with predicates, linked to their diagnostic, probe program, toolchain and activity; the limits
found by bisection are the compiler's own; relearning writes nothing new. On both stores. On a chip
of another shape the probes are written for the shape they find first, and find the same rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chiplore import queries
from chiplore.ingest.rules import RulesSummary, learn_rules
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator._truth import ENV_VAR, load_truth
from chiplore.simulator.target import SimRNGD


def test_the_probes_yield_twenty_rules_with_predicates_and_provenance(graph: GraphStore) -> None:
    summary = learn_rules(graph, SimRNGD(), "0.6.0")
    assert summary.rules >= 20
    rows = queries.run(graph, "rules-in-force", {"toolchain": "0.6.0"})
    assert len(rows) == summary.rules
    for row in rows:
        predicate = json.loads(row["predicate"])
        assert predicate["quantity"] == row["key"] and "op" in predicate
    linked = graph.read(
        "MATCH (r:LegalityRule)-[:DERIVED_FROM]->(d:Diagnostic)-[:EMITTED_FOR]->(p:ProbeProgram), "
        "(r)-[:HOLDS_UNDER]->(:Toolchain {version: '0.6.0'}), (r)-[:CREATED_BY]->(a:Activity) "
        "RETURN count(DISTINCT r) AS rules, collect(DISTINCT a.role) AS roles"
    )
    assert linked == [{"rules": summary.rules, "roles": ["librarian"]}]
    nodes = count_by_label(graph)
    again = learn_rules(graph, SimRNGD(), "0.6.0")
    assert again.rules == summary.rules and count_by_label(graph) == nodes


def test_the_limits_found_are_the_compilers(graph: GraphStore) -> None:
    truth = load_truth("0.6.0", path="")
    limits = learn_rules(graph, SimRNGD(), "0.6.0").limits
    assert limits["dm.bytes_per_slice"] == truth.dm_usable_per_slice
    assert limits["vector.chain_ops"] == truth.ve_max_chain
    assert limits["dm.bank_run"] == truth.bank_run_limit - 1  # the longest run allowed beside a DMA
    # the TRF probe loads one lane, so it meets the per-lane limit (8 KB of a slice's 64 KB)
    assert (limits["vrf.bytes_per_slice"], limits["trf.bytes_per_lane"], limits["dma.packet_bytes"]) == (
        8192, 8192, 4096)  # fmt: skip
    newer = learn_rules(graph, SimRNGD(), "0.7.0")
    assert newer.limits["dm.bytes_per_slice"] == load_truth("0.7.0", path="").dm_usable_per_slice


def test_each_version_refuses_its_own_vocabulary(graph: GraphStore) -> None:
    learn_rules(graph, SimRNGD(), "0.6.0")
    learn_rules(graph, SimRNGD(), "0.7.0")
    refused = {
        (row["v"], row["key"])
        for row in graph.read("MATCH (r:LegalityRule {code: 'E0103'}) RETURN r.toolchain AS v, r.key AS key")
    }
    assert {("0.6.0", "construct.widen"), ("0.6.0", "construct.lut"), ("0.6.0", "construct.buffers")} <= refused
    assert ("0.7.0", "construct.cast") in refused and ("0.7.0", "construct.widen") not in refused
    cast = graph.read("MATCH (r:LegalityRule {key: 'construct.cast'}) RETURN r.predicate AS p")
    assert "widen" in json.loads(cast[0]["p"])["instead"]
    # a rule both versions hold is told in each version's words (0.7.0's read "not available in toolchain 0.6.0")
    for version in ("0.6.0", "0.7.0"):
        [lut] = [r for r in queries.run(graph, "rules-in-force", {"toolchain": version}) if r["key"] == "construct.lut"]
        assert f"toolchain {version}" in lut["description"], lut


CHIPS = Path(__file__).resolve().parents[2] / "simulator" / "chips"


Found = tuple[set[tuple[str, str, str]], RulesSummary]


def rules_found(graph: GraphStore, version: str) -> Found:
    """Each rule's key, code and predicate (a limit's value aside: the limits are compared on their
    own), and the summary of the learn that found them."""
    summary = learn_rules(graph, SimRNGD(), version)
    rows = graph.read("MATCH (r:LegalityRule) RETURN r.key AS key, r.code AS code, r.predicate AS predicate")
    predicates = [json.loads(r["predicate"]) for r in rows]
    for predicate in predicates:
        if predicate["quantity"] in summary.limits:
            predicate.pop("value"), predicate.pop("stated", None)
    return {(r["key"], r["code"], json.dumps(p, sort_keys=True)) for r, p in zip(rows, predicates, strict=True)}, (
        summary)  # fmt: skip


@pytest.fixture(scope="module")
def documented(tmp_path_factory: pytest.TempPathFactory) -> Found:
    """The documented chip's rules (no truth file), learnt once per worker on a store of their own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(ENV_VAR, raising=False)
        with EmbeddedStore(tmp_path_factory.mktemp("documented") / "data") as store:
            ensure_schema(store)
            return rules_found(store, "0.6.0")


@pytest.mark.parametrize(
    "chip",
    ["1x128", "4x256", "2x512-16k", "clusters = 3\nslices = 64\nengines_per_cluster = 1"],
    ids=["1x128", "4x256", "2x512-16k", "3x64-one-engine"],
)
def test_on_a_chip_of_another_shape_the_probes_find_the_same_rules(
    chip: str, documented: Found, embedded_graph: GraphStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = CHIPS / f"{chip}.toml"
    if not path.is_file():
        path = tmp_path / "chip.toml"
        path.write_text(f"[shape]\n{chip}\n")
    monkeypatch.setenv(ENV_VAR, str(path))
    shape = load_truth("0.6.0").shape
    found, summary = rules_found(embedded_graph, "0.6.0")
    assert summary.structure["clusters"] == shape.clusters and summary.structure["slices"] == shape.slices
    assert summary.structure["engines_per_cluster"] == shape.engines_per_cluster and not summary.structure_error
    # a chip of one cluster has no cluster for the switch to cross: that probe finds nothing there
    rules, first = documented
    assert found == {r for r in rules if shape.clusters > 1 or r[0] != "switch.crosses_clusters"}
    assert summary.limits == first.limits | {"trf.bytes_per_lane": shape.trf_lane_bytes,
                                             "vrf.bytes_per_slice": shape.vrf_bytes}  # fmt: skip


def test_a_limit_is_the_one_its_probe_names_not_the_first_refusal_it_meets(
    embedded_graph: GraphStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's 2 x 512 chip with 64 KB TRF lanes and 32 KB of DM: the TRF probe's staging buffer overflowed
    DM at 32,448 B and that E0301 was recorded as the TRF's limit, a rule contradicting the measured lane.
    The bank-run probe, whose note the DM overflow hides at the top of its range, still finds its rule."""
    path = tmp_path / "chip.toml"
    path.write_text("dm_usable_per_slice = 32768\n\n[shape]\nclusters = 2\nslices = 512\nlanes = 2\n"
                    "trf_lane_bytes = 65536\nvrf_bytes = 4096\n")  # fmt: skip
    monkeypatch.setenv(ENV_VAR, str(path))
    summary = learn_rules(embedded_graph, SimRNGD(), "0.6.0")
    assert summary.limits["trf.bytes_per_lane"] == 65536 and summary.limits["dm.bytes_per_slice"] == 32768
    assert summary.limits["vrf.bytes_per_slice"] == 4096 and summary.limits["dm.bank_run"] == 63
    codes = embedded_graph.read("MATCH (r:LegalityRule {toolchain: '0.6.0'}) WHERE r.key IN ['trf.bytes_per_lane', "
                                "'dm.bank_run'] RETURN r.key AS key, r.code AS code ORDER BY key")  # fmt: skip
    assert codes == [{"key": "dm.bank_run", "code": "N0520"}, {"key": "trf.bytes_per_lane", "code": "E0302"}]


def test_on_a_small_dm_the_bank_run_rule_is_found_under_each_version(
    embedded_graph: GraphStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A DM of 64 KB (63,344 B usable under 0.7.0): the DMA the probe runs beside its reads is small
    enough that the bank-run diagnostic answers every run, not E0301 (a new user's chip read the rule
    as retired by 0.7.0)."""
    path = tmp_path / "chip.toml"
    path.write_text("dm_usable_per_slice = 65536\n\n[shape]\nclusters = 4\nslices = 128\nengines_per_cluster = 3\n")
    monkeypatch.setenv(ENV_VAR, str(path))
    for version, code in (("0.6.0", "N0520"), ("0.7.0", "E0520")):
        summary = learn_rules(embedded_graph, SimRNGD(), version)
        assert summary.limits["dm.bank_run"] == load_truth(version).bank_run_limit - 1, version
        rules = embedded_graph.read(
            "MATCH (r:LegalityRule {key: 'dm.bank_run', toolchain: $v}) RETURN r.code AS code", {"v": version}
        )
        assert rules == [{"code": code}], version
