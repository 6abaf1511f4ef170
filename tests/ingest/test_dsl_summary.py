"""The checked DSL summary: every construct a version's docs name has an entry with a compiled example;
what the docs get wrong is marked contradicted with its evidence; an upgrade changes exactly the
constructs that changed, on both stores; the toy chip's docs are summarised by the same code; the
dsl-summary query answers on both stores, from the command line too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from chiplore import queries
from chiplore.agents.upgrade import upgrade
from chiplore.cli import main
from chiplore.core.pack import HostRunner, language_guide
from chiplore.core.target import Target
from chiplore.ingest.chunks import chunk_page
from chiplore.ingest.docs import ingest_docs
from chiplore.ingest.dsl_examples import FENCE, compare
from chiplore.ingest.dsl_summary import LanguageSummary, summarise
from chiplore.ingest.librarian import BuiltinLibrarian
from chiplore.ingest.rules import learn_rules, reconcile_rules
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator._truth import ENV_VAR
from chiplore.simulator.pack.language import FerriteGuide
from chiplore.simulator.pack.language.examples import WRITERS
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.toolchain.check import check
from tests.conftest import Neo4jServer
from tests.toy import ToyChip

VERSIONS = ("0.5.0", "0.6.0", "0.7.0")
CHIPS = Path(__file__).resolve().parents[2] / "simulator" / "chips"
# What the docs get wrong about the language, per version (and the evidence's words).
CONTRADICTED = {
    "0.5.0": {
        "at_addr": "E0107",
        "switch": "E0420",
    },  # 0.5.0's ferc cannot lower dm::at_addr; the switch stays in a cluster
    "0.6.0": {"switch": "E0420"},  # "Clusters exchange data through the switch."
    "0.7.0": {},  # 0.7.0's docs say the switch stays inside one cluster
}
CHANGED_IN_070 = {
    "cast": "renamed", "widen": "added", "narrow": "added",  # .cast split into .widen / .narrow
    "result_all": "renamed", "allreduce_slices": "added",  # reduce_slices(result = all) -> allreduce_slices
    "reduce_clusters": "added", "buffers": "added",
    "pipeline": "deprecated",  # W0702: buffers: N replaces it
    "contract": "changed",  # f4e2m1 streams into the contraction
}  # fmt: skip
CHANGED_IN_060 = {
    "lut": "renamed", "decode": "added", "at_addr": "removed", "dma_at": "removed", "dma.order": "added",
    "commit": "changed",  # committing without a cast: W0410 -> E0410
    "fetch": "changed",  # coverage holes: W0205 -> E0205
    "contract": "changed",  # f8e4m3 streams against a bf16 operand
}  # fmt: skip


def learn_language(store: GraphStore, target: Target, version: str) -> LanguageSummary:
    """The free half of learning: docs, rules, the summary (no device time)."""
    ingest_docs(store, target, version, BuiltinLibrarian(target.pack().doc_patterns))
    learn_rules(store, target, version)
    return summarise(store, target, version)


def named_by_docs(target: Target, version: str) -> set[str]:
    """What a version's docs name or show, by the guide (the constructs that must have an entry)."""
    guide = language_guide(target.pack())
    assert guide is not None
    pages = target.docs(version)
    context = "\n\n".join(page.text for page in pages)
    named: set[str] = set()
    for page in pages:
        for chunk in chunk_page(page.text):
            fence = FENCE.match(chunk.text) if chunk.code else None
            if not chunk.code:
                named |= guide.named_in(chunk.text)
            elif fence and (block := guide.complete(fence.group(1).strip(), fence.group(2), version, context)):
                named |= guide.used_in(block.source)
    return named


# ---- the guide alone (no graph) ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_every_vendor_code_block_is_a_program_that_does_what_its_docs_say(version: str) -> None:
    guide, pages = FerriteGuide(), SimRNGD().docs(version)
    context = "\n\n".join(page.text for page in pages)
    blocks = [FENCE.match(c.text) for page in pages for c in chunk_page(page.text) if c.code]
    programs = [guide.complete(b.group(1).strip(), b.group(2), version, context) for b in blocks if b]
    assert len(programs) == len(blocks) > 70 and all(programs), "every block is Ferrite, fragments completed"
    for program in programs:
        assert program is not None
        codes = {d.code for d in check(program.source, version).diagnostics}
        assert (program.expects in codes) if program.expects else not {c for c in codes if c.startswith("E")}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_packs_programs_compile_where_the_version_has_their_construct(version: str) -> None:
    guide = FerriteGuide()
    refused = {}
    for construct in WRITERS:
        program = guide.example(construct, version)
        assert program is not None and construct in guide.used_in(program), construct
        errors = [d.code for d in check(program, version).diagnostics if d.is_error]
        if errors:
            refused[construct] = errors
    vocabulary = {
        "0.5.0": {"allreduce_slices", "reduce_clusters"},
        "0.6.0": {"allreduce_slices", "reduce_clusters", "lut", "at_addr", "dma_at"},
        "0.7.0": {"result_all", "lut", "at_addr", "dma_at"},
    }[version]
    assert {c for c, codes in refused.items() if codes == ["E0103"]} == vocabulary
    # beyond the vocabulary only 0.5.0's dm::at_addr, which its docs offer and its ferc cannot lower
    assert {c: codes for c, codes in refused.items() if codes != ["E0103"]} == (
        {"at_addr": ["E0107"]} if version == "0.5.0" else {}
    )


def test_a_program_that_computes_something_else_fails_its_host_check() -> None:
    guide = FerriteGuide()
    program = guide.example("op.tanh", "0.6.0")
    assert program is not None and isinstance(guide, HostRunner)
    case = guide.host_case(program, "0.6.0")
    assert case is not None and case.inputs is not None
    assert compare(case, dict(guide.run(program, case.inputs, "0.6.0").outputs or {}))[0]
    wrong = guide.run(program.replace("tanh()", "exp()"), case.inputs, "0.6.0")
    passed, detail = compare(case, dict(wrong.outputs or {}))
    assert not passed and "expected" in detail
    truncated = {name: np.asarray(values)[:-1] for name, values in (wrong.outputs or {}).items()}
    assert compare(case, truncated) == (False, "y has 2047 values, 2048 expected")


# ---- each version's summary in the graph -----------------------------------------------------------------


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedStore, dict[str, LanguageSummary]]]:
    """0.5.0, 0.6.0 and 0.7.0 learnt in turn (free steps only) into one embedded graph."""
    target = SimRNGD()
    with EmbeddedStore(tmp_path_factory.mktemp("dsl") / "data") as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), target.default_toolchain())
        summaries: dict[str, LanguageSummary] = {}
        for before, version in zip((None, *VERSIONS), VERSIONS, strict=False):
            summaries[version] = learn_language(store, target, version)
            if before:
                reconcile_rules(store, target.name, before, version)
        yield store, summaries


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_every_construct_the_docs_name_has_an_entry_with_a_compiled_example(
    chain: tuple[EmbeddedStore, dict[str, LanguageSummary]], version: str
) -> None:
    store, summaries = chain
    rows = {row["construct"]: row for row in queries.run(store, "dsl-summary", {"toolchain": version})}
    assert named_by_docs(SimRNGD(), version) <= set(rows)
    assert all(row["examples"] >= 1 for row in rows.values()), [n for n, r in rows.items() if not r["examples"]]
    assert summaries[version].entries == len(rows) and summaries[version].compiled == len(rows)
    # every construct available under the version has a program that compiles as it should, unless the docs'
    # program of it is contradicted (0.5.0's dm::at_addr: its ferc has it, and cannot lower it)
    shown = {n for n, r in rows.items() if r["example"]}
    sound = {n for n, r in rows.items() if r["availability"] == "available" and r["verdict"] != "contradicted"}
    assert sound - shown <= {"collect", "transpose"}
    contradicted = {n: r["why"] for n, r in rows.items() if r["verdict"] == "contradicted"}
    assert set(contradicted) == set(CONTRADICTED[version]), contradicted
    for name, code in CONTRADICTED[version].items():
        assert code in contradicted[name] and summaries[version].contradicted[name] == contradicted[name]
    # entries are facts with provenance: the toolchain, the doc chunks, the checks and their programs
    linked = store.read(
        "MATCH (e:LanguageEntry {version: $v}) WHERE (e)-[:UNDER]->(:Toolchain {version: $v}) "
        "AND (e)-[:CHECKED_BY]->(:Check)-[:USED]->(:LanguageExample) AND (e)-[:CREATED_BY]->(:Activity) "
        "RETURN count(e) AS n",
        {"v": version},
    )
    assert linked == [{"n": len(rows)}]
    cited = store.read("MATCH (e:LanguageEntry {version: $v})-[:CITES]->(:DocChunk) RETURN count(DISTINCT e) AS n",
                       {"v": version})  # fmt: skip
    assert cited[0]["n"] >= len(named_by_docs(SimRNGD(), version))


@pytest.mark.slow
def test_the_rules_that_constrain_a_construct_come_with_it(
    chain: tuple[EmbeddedStore, dict[str, LanguageSummary]],
) -> None:
    store, _ = chain
    rows = {row["construct"]: row for row in queries.run(store, "dsl-summary", {"toolchain": "0.6.0"})}
    assert any(c.startswith("E0420 switch.crosses_clusters") for c in rows["switch"]["constraints"])
    assert any("contract.stream_dtype" in c for c in rows["contract"]["constraints"])
    assert rows["lut"]["availability"] == "unavailable" and "decode" in rows["lut"]["instead"]
    assert rows["decode"]["availability"] == "available" and rows["decode"]["example"]
    assert rows["switch"]["contradicted_claims"] == ["Clusters exchange data through the switch."]
    one = queries.run(store, "dsl-summary", {"toolchain": "0.6.0", "construct": "decode"})
    assert [row["construct"] for row in one] == ["decode"] and one[0] == rows["decode"]


@pytest.mark.slow
def test_a_summary_written_again_adds_nothing(chain: tuple[EmbeddedStore, dict[str, LanguageSummary]]) -> None:
    store, summaries = chain
    before = count_by_label(store)
    again = summarise(store, SimRNGD(), "0.7.0")
    assert count_by_label(store) == before and again == summaries["0.7.0"]


@pytest.mark.slow
def test_learning_each_version_in_turn_records_what_changed(
    chain: tuple[EmbeddedStore, dict[str, LanguageSummary]],
) -> None:
    _, summaries = chain
    assert summaries["0.5.0"].compared_with is None and not summaries["0.5.0"].changed
    assert {name: change.split(":")[0] for name, change in summaries["0.6.0"].changed.items()} == CHANGED_IN_060
    assert {name: change.split(":")[0] for name, change in summaries["0.7.0"].changed.items()} == CHANGED_IN_070


def test_on_a_chip_of_another_shape_the_docs_are_contradicted_where_they_are_on_the_first(
    embedded_graph: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4x256's docs state its shape: completed for the shape the structure probe finds, their examples
    # and the pack's own programs compile as on the first chip, and only the switch claim is refuted.
    monkeypatch.setenv(ENV_VAR, str(CHIPS / "4x256.toml"))
    summary = learn_language(embedded_graph, SimRNGD(), "0.6.0")
    assert set(summary.contradicted) == set(CONTRADICTED["0.6.0"]), summary.contradicted
    assert summary.compiled == summary.entries


# ---- the upgrade, on both stores -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_upgrade_to_070_changes_exactly_the_constructs_that_changed(embedded_graph: GraphStore) -> None:
    graph = embedded_graph  # the subject is the language; the summary's command runs on both stores
    target = SimRNGD()
    learn_language(graph, target, "0.6.0")
    before = {row["construct"]: row for row in queries.run(graph, "dsl-summary", {"toolchain": "0.6.0"})}
    upgraded = upgrade(graph, target, "0.7.0", budget_s=0.0)
    assert upgraded.language is not None
    assert {name: text.split(":")[0] for name, text in upgraded.language.changed.items()} == CHANGED_IN_070
    diff = queries.run(graph, "toolchain-diff", {"from": "0.6.0", "to": "0.7.0"})
    constructs = {row["key"]: row for row in diff if row["kind"] == "construct"}
    assert {name: row["change"] for name, row in constructs.items()} == CHANGED_IN_070
    assert "widen" in constructs["cast"]["detail"] and "narrow" in constructs["cast"]["detail"]
    assert "allreduce_slices" in constructs["result_all"]["detail"]
    assert constructs["contract"]["detail"] == 'no longer E0403 contract.stream_dtype not_in ["f4e2m1"]'
    # a changed construct's old entry is superseded by the new one; every other entry stays as it was
    superseded = graph.read(
        "MATCH (n:LanguageEntry {version: '0.7.0'})-[:SUPERSEDES]->(o:LanguageEntry {version: '0.6.0'}) "
        "RETURN o.name AS name, o.status AS status ORDER BY name"
    )
    assert {row["name"] for row in superseded} == set(CHANGED_IN_070) & set(before)
    assert {row["status"] for row in superseded} == {"superseded"}
    after = {row["construct"]: row for row in queries.run(graph, "dsl-summary", {"toolchain": "0.7.0"})}
    assert set(before) <= set(after)  # every old entry is re-checked under the new version
    assert after["cast"]["availability"] == "unavailable" and after["pipeline"]["availability"] == "deprecated"
    assert after["switch"]["verdict"] == "confirmed" and before["switch"]["verdict"] == "contradicted"
    unchanged = {name for name, row in after.items() if row["change"] == "unchanged"}
    assert unchanged == set(after) - set(CHANGED_IN_070)


@pytest.mark.slow
def test_dsl_summary_from_the_command_line_on_both_stores(store: GraphStore, tmp_path: Path,
                                                          neo4j_server: Neo4jServer) -> None:  # fmt: skip
    target = SimRNGD()
    ensure_schema(store)
    register_target(store, target.name, target.toolchains(), target.default_toolchain())
    learn_language(store, target, "0.6.0")
    env = (neo4j_server.env() if not isinstance(store, EmbeddedStore)
           else {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")})  # fmt: skip
    result = CliRunner().invoke(main, ["query", "dsl-summary", "-p", "toolchain=0.6.0", "--json"], env=env)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert {row["construct"] for row in rows} == {row["construct"] for row in queries.run(
        store, "dsl-summary", {"toolchain": "0.6.0"})}  # fmt: skip
    assert next(row for row in rows if row["construct"] == "decode")["verdict"] == "confirmed"


# ---- the toy chip: the same code, another language --------------------------------------------------------


@pytest.mark.slow
def test_the_toy_chips_docs_are_summarised_by_the_same_code(embedded_store: GraphStore) -> None:
    chip = ToyChip()
    ensure_schema(embedded_store)
    register_target(embedded_store, chip.name, chip.toolchains(), chip.default_toolchain())
    first = learn_language(embedded_store, chip, "1.0")
    assert first.entries == len(named_by_docs(chip, "1.0")) and first.compiled == first.entries
    assert not first.contradicted and not first.unavailable
    upgraded = upgrade(embedded_store, chip, "2.0", budget_s=0.0)
    assert upgraded.language is not None
    assert {name: text.split(":")[0] for name, text in upgraded.language.changed.items()} == {
        "mul": "renamed", "mac": "added"}  # fmt: skip
    rows = {row["construct"]: row for row in queries.run(embedded_store, "dsl-summary", {"toolchain": "2.0"})}
    assert rows["mul"]["instead"] == "mac" and rows["mac"]["verdict"] == "confirmed"
    host = embedded_store.read(
        "MATCH (:LanguageEntry {name: 'mac', version: '2.0'})-[:CHECKED_BY]->(c:Check {method: 'host'}) "
        "RETURN c.verdict AS verdict"
    )
    assert host and {row["verdict"] for row in host} == {"confirms"}  # gemv with mac computes W x on the host
