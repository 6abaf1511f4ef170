"""Docs into the graph: chunks by content hash, the builtin librarian's claims, idempotent ingestion
with provenance, shared paragraphs across versions, and a run cut short, on both stores."""

from __future__ import annotations

import pytest

from chiplore import queries
from chiplore.core.target import Target
from chiplore.ingest.chunks import chunk_page
from chiplore.ingest.docs import ingest_docs
from chiplore.ingest.librarian import BuiltinLibrarian, constructs
from chiplore.ingest.units import in_unit
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import register_target
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD

PAGE = """# Title

Intro paragraph with `.dma` in it.

## Rates

* One DMA engine moves up to 256 bytes per cycle.
* A fetch reads 32 bytes per cycle on `main` and 8 on `sub`.

```rust
kernel k() {}

let x = 1;
```

A pass must not read one DM bank 64 times in a row while a DMA may write its cluster.
"""


def test_pages_split_into_paragraphs_items_and_whole_code_blocks() -> None:
    chunks = chunk_page(PAGE)
    assert [c.heading for c in chunks] == ["Title", "Rates", "Rates", "Rates", "Rates"]
    assert chunks[3].code and chunks[3].text.count("\n") == 4  # the blank line stays inside the block
    assert chunks[1].text.startswith("* One DMA engine")
    assert [c.ord for c in chunks] == list(range(5))
    assert chunk_page(PAGE)[1].sha == chunks[1].sha  # ids are content hashes


def test_the_builtin_librarian_keeps_quantities_limits_and_rules() -> None:
    librarian = BuiltinLibrarian(SimRNGD().pack().doc_patterns)
    claims = [c for chunk in chunk_page(PAGE) for c in librarian.extract(chunk, "Title")]
    by_param = {c.param: c for c in claims if c.param}
    assert (
        by_param["dma.engine_bytes_per_cycle"].value == 256 and by_param["dma.engine_bytes_per_cycle"].kind == "limit"
    )
    assert (by_param["fetch.read_bytes_main"].value, by_param["fetch.read_bytes_sub"].value) == (32, 8)
    assert by_param["dm.bank_run_limit"].value == 64
    assert all("kernel k" not in c.text for c in claims)  # code is not prose
    assert constructs(PAGE) == ["construct:dma", "construct:main", "construct:sub"]


@pytest.mark.parametrize(("stated", "unit", "per_cycle"), [("1.14 TB/s", "TB/s", 1140.0), ("900 GB/s", "GB/s", 900.0)])
def test_a_rate_per_second_keeps_its_unit_and_is_judged_through_the_documented_clock(
    stated: str, unit: str, per_cycle: float
) -> None:
    # A chip's docs in TB/s were read as that many bytes a cycle: 1.14 TB/s against 1,140 B/cycle measured
    # was "contradicted". The claim keeps its unit; the judge converts it with the documented clock.
    librarian = BuiltinLibrarian(SimRNGD().pack().doc_patterns)
    page = f"# Memory\n\nHBM delivers {stated}, which is the limit for all DMA traffic.\n"
    claims = [c for chunk in chunk_page(page) for c in librarian.extract(chunk, "Memory")]
    (claim,) = [c for c in claims if c.param == "noc.chip_bytes_per_cycle"]
    assert (claim.value, claim.unit) == (float(stated.split()[0]), unit)
    assert in_unit(claim.value, claim.unit, "B/cycle", 1e9) == pytest.approx(per_cycle)
    assert in_unit(claim.value, claim.unit, "B/cycle", None) is None  # no clock documented: no verdict


def relationships(store: GraphStore) -> int:
    return int(store.read("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"])


def test_ingesting_the_docs_twice_creates_nothing_the_second_time(graph: GraphStore) -> None:
    target: Target = SimRNGD()
    first = ingest_docs(graph, target, "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    assert first.pages == 16 and first.claims > 30 and first.chunks > 100
    nodes, links = count_by_label(graph), relationships(graph)
    assert first.claims == nodes["Claim"]  # a sentence two pages share is one claim (learn --json said 69 for 68)
    again = ingest_docs(graph, target, "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    assert (again.pages, again.unchanged) == (0, 16)
    assert count_by_label(graph) == nodes and relationships(graph) == links
    orphans = graph.read("MATCH (c:Claim) WHERE NOT (c)-[:CITES]->(:DocChunk) RETURN count(c) AS n")
    assert orphans == [{"n": 0}]
    provenance = graph.read(
        "MATCH (c:Claim)-[:CREATED_BY]->(a:Activity), (c)-[:UNDER]->(t:Toolchain) "
        "RETURN DISTINCT a.role AS role, a.policy AS policy, t.version AS version"
    )
    assert provenance == [{"role": "librarian", "policy": "builtin", "version": "0.6.0"}]
    wrong = graph.read(
        "MATCH (c:Claim {param: 'noc.dmn_bytes_per_cycle'}) RETURN DISTINCT c.value AS value, c.unit AS unit"
    )
    assert wrong == [{"value": 128.0, "unit": "B/cycle"}]  # what the 0.6.0 docs say, right or wrong


def test_a_paragraph_two_versions_share_is_one_chunk_and_its_claims_hold_under_both(graph: GraphStore) -> None:
    target = SimRNGD()
    ingest_docs(graph, target, "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    chunks_060 = count_by_label(graph)["DocChunk"]
    second = ingest_docs(graph, target, "0.7.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    assert count_by_label(graph)["DocChunk"] < chunks_060 + second.chunks  # shared text is reused
    both = graph.read(
        "MATCH (c:Claim {param: 'fetch.read_bytes_main'})-[:UNDER]->(t:Toolchain) "
        "RETURN c.id AS id, collect(t.version) AS versions"
    )
    assert len(both) == 1 and sorted(both[0]["versions"]) == ["0.6.0", "0.7.0"]
    changed = graph.read(
        "MATCH (c:Claim {param: 'vector.transcendental_cycles_per_flit'}) RETURN c.value AS value, c.toolchain AS v "
        "ORDER BY v"
    )
    assert changed == [{"value": 1.0, "v": "0.6.0"}, {"value": 4.0, "v": "0.7.0"}]  # 0.7.0 corrected it
    # toolchain-diff lists a claim as new or dropped by its text: a sentence kept in a paragraph that changed around
    # it is neither, and a sentence two paragraphs share is one row
    register_target(graph, target.name, target.toolchains(), target.default_toolchain())
    claims = [row for row in queries.run(graph, "toolchain-diff", {"from": "0.6.0", "to": "0.7.0"})
              if row["kind"] == "claim"]  # fmt: skip
    new_texts = [row["after"] for row in claims if row["change"] == "new"]
    dropped_texts = [row["before"] for row in claims if row["change"] == "dropped"]
    assert len(set(new_texts)) == len(new_texts) and len(set(dropped_texts)) == len(dropped_texts), claims
    assert not set(new_texts) & set(dropped_texts), claims
    transcendental = {row["change"] for row in claims if row["key"] == "vector.transcendental_cycles_per_flit"}
    assert transcendental == {"new", "dropped"}  # a sentence the new docs changed is both


def test_a_run_cut_short_is_finished_by_the_next(graph: GraphStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from chiplore.ingest import docs as docs_module

    real = docs_module.record_claim
    calls = {"n": 0}

    def failing(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt  # Ctrl-C in the middle of a page
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(docs_module, "record_claim", failing)
    with pytest.raises(KeyboardInterrupt):
        ingest_docs(graph, SimRNGD(), "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    monkeypatch.setattr(docs_module, "record_claim", real)
    finished = ingest_docs(graph, SimRNGD(), "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns))
    assert 0 < finished.pages < 16  # only the pages that were not done
    nodes = count_by_label(graph)
    assert ingest_docs(graph, SimRNGD(), "0.6.0", BuiltinLibrarian(SimRNGD().pack().doc_patterns)).pages == 0
    assert count_by_label(graph) == nodes
    done = graph.read("MATCH (p:DocPage {version: '0.6.0'}) WHERE p.sha <> '' RETURN count(p) AS n")
    assert done == [{"n": 16}]
