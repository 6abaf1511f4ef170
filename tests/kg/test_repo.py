"""Repository functions: typed writes with provenance, the same on both backends."""

from __future__ import annotations

import threading
import time

import pytest
from rich.console import Console

from chiplore.cli.render import far_from_bound, kernels_table
from chiplore.core.ids import content_sha
from chiplore.kg.models import (
    Activity,
    Claim,
    Concept,
    DesignNode,
    DeviceRun,
    Diagnostic,
    HardwareParam,
    Kernel,
    KernelVersion,
    LanguageEntry,
    LegalityRule,
    Measurement,
    ProbeProgram,
    Screening,
    Toolchain,
    Upgrade,
)
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.repo.design_counts import miscounted, status_counts
from chiplore.kg.repo.designs import (
    BestMoved,
    add_design,
    best_of,
    children_of,
    close_unfinished,
    get_design,
    register_kernel,
    release_held,
    set_best,
    set_design_status,
    update_design,
)
from chiplore.kg.repo.knowledge import measurements_of, record_activity, record_claim, record_measurement, record_rule
from chiplore.kg.repo.language import refresh_verdicts
from chiplore.kg.repo.nodes import Link, Ref, count_by_label, link, upsert
from chiplore.kg.repo.overview import overview
from chiplore.kg.repo.progress import bound_by, kernel_progress
from chiplore.kg.repo.runs import record_device_run, record_device_runs, record_screening
from chiplore.kg.repo.targets import active_toolchain, register_target, set_active_toolchain, toolchains
from chiplore.kg.repo.upgrades import settle_unsaid_claims
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore

VERSIONS = ("0.5.0", "0.6.0", "0.7.0")


@pytest.fixture
def graph(store: GraphStore) -> GraphStore:
    ensure_schema(store)
    register_target(store, "simrngd", VERSIONS, "0.6.0")
    return store


def test_registering_a_target_is_idempotent_and_keeps_the_active_version(graph: GraphStore) -> None:
    set_active_toolchain(graph, "simrngd", "0.7.0")
    register_target(graph, "simrngd", VERSIONS, "0.6.0")
    assert active_toolchain(graph, "simrngd") == "0.7.0"
    assert toolchains(graph, "simrngd") == [
        {"version": "0.5.0", "status": "known"},
        {"version": "0.6.0", "status": "known"},
        {"version": "0.7.0", "status": "active"},
    ]
    chain = graph.read(
        "MATCH (a:Toolchain)-[:PRECEDES]->(b:Toolchain) RETURN a.version AS a, b.version AS b ORDER BY a"
    )
    assert chain == [{"a": "0.5.0", "b": "0.6.0"}, {"a": "0.6.0", "b": "0.7.0"}]
    assert graph.read("MATCH (:Target)-[r:ACTIVE]->() RETURN count(r) AS n") == [{"n": 1}]


def test_unknown_toolchain_cannot_become_active(graph: GraphStore) -> None:
    with pytest.raises(ValueError, match="not registered"):
        set_active_toolchain(graph, "simrngd", "9.9.9")
    with pytest.raises(ValueError):
        register_target(graph, "other", ("1.0",), "2.0")


def _design(index: int, depth: int) -> DesignNode:
    return DesignNode(id=f"d{index}", kernel="gemv", role="refiner", policy="builtin", depth=depth, change=f"c{index}")


def _version(text: str) -> KernelVersion:
    return KernelVersion(sha=content_sha(text), kernel="gemv", source=text, toolchain="0.6.0")


def test_design_tree_with_shared_sources_and_a_single_best(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="a1", role="refiner", policy="builtin"))
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1 << 20, bound_cycles=1000.0))
    add_design(graph, _design(0, 0), version=_version("root"), parent=None, activity=actor)
    add_design(graph, _design(1, 1), version=_version("same"), parent="d0", activity=actor)
    add_design(graph, _design(2, 1), version=_version("same"), parent="d0", activity=actor)
    set_best(graph, "gemv", "d1")
    set_best(graph, "gemv", "d2")
    set_design_status(graph, "d2", "accepted")

    best = best_of(graph, "gemv")
    assert best is not None and best.id == "d2" and best.status == "accepted"
    assert [d.id for d in children_of(graph, "d0")] == ["d1", "d2"]
    assert graph.read("MATCH (:Kernel)-[r:BEST]->() RETURN count(r) AS n") == [{"n": 1}]
    assert count_by_label(graph)["KernelVersion"] == 2, "the same source is one KernelVersion"
    with pytest.raises(KeyError):
        set_design_status(graph, "nope", "failed")
    set_best(graph, "gemv", "d1", status="accepted", measured_cycles=900.0)  # BEST and the status move together
    best = best_of(graph, "gemv")
    assert best is not None and best.id == "d1" and best.measured_cycles == 900.0
    assert graph.read("MATCH (:Kernel)-[r:BEST]->() RETURN count(r) AS n") == [{"n": 1}]
    # replacing a BEST another process has replaced since is refused, and changes nothing
    with pytest.raises(BestMoved, match="BEST is d1, no longer d2"):
        set_best(graph, "gemv", "d0", replaces="d2", status="accepted")
    assert best_of(graph, "gemv").id == "d1" and get_design(graph, "d0").status != "accepted"  # type: ignore[union-attr]
    set_best(graph, "gemv", "d0", replaces="d1", measured_cycles=800.0)
    assert best_of(graph, "gemv").id == "d0"  # type: ignore[union-attr]
    assert graph.read("MATCH (k:Kernel) RETURN k.best_lock AS lock") == [{"lock": None}]  # the lock leaves nothing
    set_best(graph, "gemv", "d1", measured_cycles=900.0)
    # a run's claims on designs it never reached go with it; others' stay
    update_design(graph, "d2", status="queued", owner="me:1:a", lease_until="2999-01-01T00:00:00Z")
    update_design(graph, "d0", status="queued", owner="other:2:b", lease_until="2999-01-01T00:00:00Z")
    assert release_held(graph, "gemv", "me:1:a") == 1
    assert (get_design(graph, "d2").owner, get_design(graph, "d0").owner) == ("", "other:2:b")  # type: ignore[union-attr]
    # a design whose parent is missing is refused whole: no node, no source left behind
    with pytest.raises(KeyError):
        add_design(graph, _design(3, 2), version=_version("orphan"), parent="missing", activity=actor)
    assert graph.read("MATCH (d:DesignNode {id: 'd3'}) RETURN count(d) AS n") == [{"n": 0}]
    assert count_by_label(graph)["KernelVersion"] == 2


def test_measurement_links_to_runs_param_toolchain_and_activity(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="probe", role="librarian", policy="builtin"))
    run = DeviceRun(
        id="r1", kernel="mb01", job_id="j1", cycles=[10.0, 11.0], median_cycles=10.5, status="ok", device_s=0.5,
        toolchain="0.6.0",
    )  # fmt: skip
    graph.write("CREATE (:KernelVersion {sha: 'probe-src'})")
    record_device_run(graph, run, kernel_version="probe-src", activity=actor)
    measurement = Measurement(
        id="m1", param="hbm_bytes_per_cycle", value=256.0, ci_low=250.0, ci_high=262.0, n=8, fit="ols",
        unit="B/cycle", toolchain="0.6.0",
    )  # fmt: skip
    record_measurement(
        graph,
        measurement,
        param=HardwareParam(key="hbm_bytes_per_cycle", unit="B/cycle"),
        run_ids=["r1"],
        activity=actor,
        target="simrngd",
    )
    assert measurements_of(graph, "hbm_bytes_per_cycle") == [measurement]
    rows = graph.read(
        "MATCH (m:Measurement {id: 'm1'})-[:OF]->(p:HardwareParam), (m)-[:FROM]->(r:DeviceRun), "
        "(m)-[:UNDER]->(t:Toolchain), (m)-[:CREATED_BY]->(a:Activity) "
        "RETURN p.key AS p, r.id AS r, t.version AS t, a.role AS a, m.fact_id AS fact"
    )
    assert rows == [{"p": "hbm_bytes_per_cycle", "r": "r1", "t": "0.6.0", "a": "librarian", "fact": "Measurement:m1"}]


def test_consulted_facts_are_linked_whatever_their_kind(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="a", role="architect", policy="builtin"))
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1, bound_cycles=1.0))
    graph.write("CREATE (:Measurement:Fact {id: 'm', fact_id: 'Measurement:m'})")
    graph.write("CREATE (:LegalityRule:Fact {id: 'r', fact_id: 'LegalityRule:r'})")
    add_design(
        graph,
        _design(0, 0),
        version=_version("x"),
        parent=None,
        activity=actor,
        consulted=["Measurement:m", "LegalityRule:r", "LegalityRule:missing"],
    )
    rows = graph.read("MATCH (:DesignNode {id: 'd0'})-[:CONSULTED]->(f:Fact) RETURN f.fact_id AS f ORDER BY f")
    assert rows == [{"f": "LegalityRule:r"}, {"f": "Measurement:m"}]


def test_links_refuse_unknown_types_and_labels(graph: GraphStore) -> None:
    with pytest.raises(ValueError, match="relationship"):
        link(graph, [Link(Ref("Kernel", "a"), "DROP_EVERYTHING", Ref("Kernel", "b"))])
    with pytest.raises(ValueError, match="label"):
        link(graph, [Link(Ref("Kernel`) DETACH DELETE (x", "a"), "BEST", Ref("Kernel", "b"))])


def test_device_ledger_charges_each_run_once_and_matches_the_runs(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="runner", role="runner", policy="builtin"))
    graph.write("CREATE (:KernelVersion {sha: 'src'})")

    def run(index: int, kernel: str, status: str = "ok") -> tuple[DeviceRun, str]:
        return (
            DeviceRun(
                id=f"r{index}", kernel=kernel, job_id=f"j{index}", cycles=[1.0], median_cycles=1.0, status=status,
                device_s=0.125 * (index + 1), toolchain="0.6.0",
            ),
            "src",
        )  # fmt: skip

    first = [run(0, "gemv"), run(1, "gemv", "fault"), run(2, "ffn")]
    assert record_device_runs(graph, first, activity=actor, batch_size=2) == 3
    assert record_device_runs(graph, [*first, run(3, "gemv")], activity=actor) == 1
    ledger = graph.read(
        "MATCH (l:DeviceLedger) RETURN l.consumer AS c, l.runs AS runs, l.failed_runs AS failed, l.device_s AS s "
        "ORDER BY c"
    )
    assert ledger == [
        {"c": "ffn", "runs": 1, "failed": 0, "s": 0.375},
        {"c": "gemv", "runs": 3, "failed": 1, "s": 0.125 + 0.25 + 0.5},
    ]
    assert graph.read("MATCH (r:DeviceRun)-[:RAN]->(:KernelVersion) RETURN count(r) AS n") == [{"n": 4}]


def test_status_names_failed_runs_and_what_bounds_a_best_far_from_its_bound(graph: GraphStore) -> None:
    """A user whose kernel stops far from its bound sees why (the estimate recorded with BEST) and the
    device runs that failed, which belong to no design's runs."""
    actor = record_activity(graph, Activity(id="a1", role="architect", policy="builtin"))
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1 << 20, bound_cycles=1000.0))
    add_design(graph, _design(0, 0), version=_version("root"), parent=None, activity=actor)
    why = "bound by the sub queue, 93% busy (the busiest cluster's ingress 61%, the busiest DMA engine 40%)"
    designed = _design(1, 1).model_copy(update={"rationale": f"rows of 4 over 2 clusters; {why}"})
    add_design(graph, designed, version=_version("best"), parent="d0", activity=actor)
    set_best(graph, "gemv", "d1", status="accepted", measured_cycles=1500.0)
    runs = [(DeviceRun(id=f"r{i}", kernel="gemv", job_id=f"j{i}", cycles=[1500.0] if status == "ok" else [],
                       median_cycles=1500.0 if status == "ok" else None, status=status, device_s=1.0,
                       toolchain="0.6.0"), content_sha("best" if status == "ok" else "root"))
            for i, status in enumerate(["ok", "timeout", "fault", "timeout", "ok"])]  # fmt: skip
    record_device_runs(graph, runs, activity=actor)
    [progress] = kernel_progress(graph, "hbm.bytes_per_cycle")
    assert progress.failed_runs == 3
    assert progress.bound_by == why and progress.ratio_to_bound == 1.5
    assert far_from_bound([progress]) == [f"gemv is 1.50x its bound: {why}"]
    table = Console(width=200, record=True)
    table.print(kernels_table([progress]))
    header, row = (line for line in table.export_text().splitlines() if "failed runs" in line or "gemv" in line)
    cells = dict(zip((c.strip() for c in header.split("┃")), (c.strip() for c in row.split("│")), strict=True))
    assert cells["failed runs"] == "3" and cells["device-s"] == "5"
    # what the estimate adds after the line is kept (it was cut at its "; ")
    idle = f"{why}; 2 of 3 clusters' ports carry the weights, so it stays at least 1.5x its bound"
    assert bound_by(f"rows of 4 over 2 clusters; {idle}") == idle and bound_by("rows of 4 over 2 clusters") == ""
    # near its bound, or with no recorded estimate, status says nothing more
    assert far_from_bound([progress.model_copy(update={"ratio_to_bound": 1.05})]) == []
    assert far_from_bound([progress.model_copy(update={"bound_by": ""})]) == []


def test_claims_rules_and_screenings_carry_their_provenance(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="lib", role="librarian", policy="builtin"))
    graph.write("CREATE (:DocChunk:Fact {sha: 'c1', fact_id: 'DocChunk:c1'})")
    record_claim(
        graph,
        Claim(id="cl1", text="DM holds 512 KB per slice", param="dm_capacity_bytes", value=524288.0, unit="B",
              toolchain="0.6.0"),
        concept=Concept(key="dm.capacity"),
        chunk_shas=["c1"],
        activity=actor,
        target="simrngd",
    )  # fmt: skip
    probe = ProbeProgram(sha="p1", source="kernel probe {}", purpose="DM capacity by bisection")
    for version, limit, supersedes in (("0.6.0", 491520, None), ("0.7.0", 475136, "r-0.6.0")):
        record_rule(
            graph,
            LegalityRule(id=f"r-{version}", key="dm.capacity", code="E0301", predicate=f'{{"max": {limit}}}',
                         toolchain=version),
            diagnostic=Diagnostic(id=f"d-{version}", code="E0301", severity="error", message="DM use peaks",
                                  toolchain=version),
            probe=probe,
            activity=actor,
            target="simrngd",
            supersedes=supersedes,
        )  # fmt: skip
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1, bound_cycles=1.0))
    add_design(graph, _design(0, 0), version=_version("src"), parent=None, activity=actor)
    record_screening(graph, Screening(id="s1", design="d0", check="legality", passed=False), activity=actor)

    claim = graph.read(
        "MATCH (c:Claim {id: 'cl1'})-[:ABOUT]->(k:Concept), (c)-[:CITES]->(d:DocChunk), (c)-[:UNDER]->(t:Toolchain), "
        "(c)-[:CREATED_BY]->(a:Activity) RETURN k.key AS concept, d.sha AS chunk, t.version AS t, c.fact_id AS fact"
    )
    assert claim == [{"concept": "dm.capacity", "chunk": "c1", "t": "0.6.0", "fact": "Claim:cl1"}]
    rules = graph.read(
        "MATCH (r:LegalityRule)-[:DERIVED_FROM]->(:Diagnostic)-[:EMITTED_FOR]->(p:ProbeProgram), "
        "(r)-[:HOLDS_UNDER]->(t:Toolchain) OPTIONAL MATCH (r)-[:SUPERSEDES]->(old:LegalityRule) "
        "RETURN r.id AS rule, t.version AS t, p.sha AS probe, old.id AS supersedes ORDER BY rule"
    )
    assert rules == [
        {"rule": "r-0.6.0", "t": "0.6.0", "probe": "p1", "supersedes": None},
        {"rule": "r-0.7.0", "t": "0.7.0", "probe": "p1", "supersedes": "r-0.6.0"},
    ]
    assert graph.read("MATCH (s:Screening)-[:OF]->(d:DesignNode) RETURN s.passed AS ok, d.id AS d") == [
        {"ok": False, "d": "d0"}
    ]


def test_design_counts_move_with_every_status_change(graph: GraphStore) -> None:
    actor = record_activity(graph, Activity(id="a1", role="refiner", policy="builtin"))
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1 << 20, bound_cycles=1000.0))
    for index in range(5):
        add_design(graph, _design(index, min(index, 1)), version=_version(f"p{index}"),
                   parent=None if index == 0 else "d0", activity=actor)  # fmt: skip
    add_design(graph, _design(1, 1), version=_version("p1"), parent="d0", activity=actor)  # again: counted once
    set_design_status(graph, "d1", "queued")
    set_design_status(graph, "d1", "queued")  # unchanged: nothing moves
    set_best(graph, "gemv", "d0", status="accepted")
    set_design_status(graph, "d2", "rejected")
    update_design(graph, "d3", status="measured", measured_cycles=10.0)
    assert close_unfinished(graph, "0.6.0", "upgraded") == 3  # d1 queued, d3 measured, d4 proposed
    expected = {"accepted": 1, "failed": 3, "rejected": 1}
    stored = graph.read("MATCH (k:Kernel {name: 'gemv'}) RETURN properties(k) AS p")[0]["p"]
    assert stored["designs_counted"] is True
    assert status_counts(graph, "gemv", stored) == expected == status_counts(graph, "gemv", None)
    assert miscounted(graph) == []
    graph.write("MATCH (d:DesignNode {id: 'd4'}) SET d.status = 'accepted'")  # a write past the repository
    assert miscounted(graph) == ["kernel gemv: stored design counts accepted 1 (is 2), failed 3 (is 2)"]
    graph.write("MATCH (k:Kernel) REMOVE k.designs_counted")  # a graph from before the counters
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1 << 20, bound_cycles=1000.0))
    assert miscounted(graph) == []
    assert status_counts(graph, "gemv", None) == {"accepted": 2, "failed": 2, "rejected": 1}


def test_a_contradicted_entry_keeps_the_whole_reason_whatever_its_length(graph: GraphStore) -> None:
    """The reason is joined in Python: FalkorDB's `+` cuts a concatenation whose left string is exactly
    512 bytes long to 511 (the code, ': ' and a message of 505 characters are 512)."""
    message = "m" * 505
    upsert(graph, [Claim(id="cl2", text="the docs' sentence", toolchain="0.6.0"),
                   Diagnostic(id="d2", code="E0301", severity="error", message=message, toolchain="0.6.0"),
                   LanguageEntry(id="e2", name="dma", version="0.6.0", toolchain="0.6.0", kind="stage",
                                 syntax=".dma()")])  # fmt: skip
    link(graph, [Link(Ref("Diagnostic", "d2"), "CONTRADICTS", Ref("Claim", "cl2")),
                 Link(Ref("LanguageEntry", "e2"), "STATES", Ref("Claim", "cl2"))])  # fmt: skip
    assert len(f"E0301: {message}") == 512
    assert refresh_verdicts(graph, "0.6.0") == 1
    [row] = graph.read("MATCH (e:LanguageEntry {id: 'e2'}) RETURN e.verdict AS verdict, e.why AS why")
    assert row == {"verdict": "contradicted", "why": f"E0301: {message} (the docs: the docs' sentence)"}
    assert refresh_verdicts(graph, "0.6.0") == 0  # decided once


def test_an_upgrade_stopped_part_way_is_in_the_overview_until_it_finishes(graph: GraphStore) -> None:
    """A Ctrl-C'd upgrade leaves the new version active while BESTs are the old one's: `status` says so."""
    assert overview(graph, "simrngd").unfinished_upgrade is None
    set_active_toolchain(graph, "simrngd", "0.7.0")
    upgrade = Upgrade(id=Upgrade.id_of("simrngd", "0.6.0", "0.7.0"), target="simrngd", from_version="0.6.0",
                      to_version="0.7.0", budget_s=10.0)  # fmt: skip
    upsert(graph, [upgrade])
    assert overview(graph, "simrngd").unfinished_upgrade == ("0.6.0", "0.7.0")
    upsert(graph, [upgrade.model_copy(update={"status": "done"})])
    assert overview(graph, "simrngd").unfinished_upgrade is None


def test_claims_the_new_docs_do_not_make_again_are_retired_or_superseded(graph: GraphStore) -> None:
    """They stayed stale for good after an upgrade (stale-facts: "not yet rechecked"); now settled once
    the new version's docs are read, as often as asked."""
    old, new = Toolchain.id_of("simrngd", "0.6.0"), Toolchain.id_of("simrngd", "0.7.0")
    claims = [Claim(id="dropped", text="about 500 cycles", param="dma.start_cycles", toolchain="0.6.0", status="stale"),
              Claim(id="moved", text="256 B a cycle", param="dma.engine_bytes_per_cycle", toolchain="0.6.0",
                    status="stale"),
              Claim(id="moved-new", text="256 B a cycle", param="dma.engine_bytes_per_cycle", toolchain="0.7.0"),
              Claim(id="kept", text="two clusters", param="chip.clusters", toolchain="0.6.0")]  # fmt: skip
    upsert(graph, claims)
    link(graph, [Link(Ref("Claim", c.id), "UNDER", Ref("Toolchain", old if c.toolchain == "0.6.0" else new))
                 for c in claims] + [Link(Ref("Claim", "kept"), "UNDER", Ref("Toolchain", new))])  # fmt: skip
    assert settle_unsaid_claims(graph, "simrngd", "0.6.0", "0.7.0") == {"retired": 1, "superseded": 1}
    status = {row["id"]: row["s"] for row in graph.read("MATCH (c:Claim) RETURN c.id AS id, c.status AS s")}
    assert status == {"dropped": "retired", "moved": "superseded", "moved-new": "current", "kept": "current"}
    # the replacement is linked, as for a rule or a measurement (a user found superseded claims with none)
    superseding = "MATCH (n:Claim)-[:SUPERSEDES]->(o:Claim) RETURN n.id AS new, o.id AS old"
    assert graph.read(superseding) == [{"new": "moved-new", "old": "moved"}]
    assert settle_unsaid_claims(graph, "simrngd", "0.6.0", "0.7.0") == {}
    assert graph.read(superseding) == [{"new": "moved-new", "old": "moved"}]  # once


class _Captured(Exception):
    """What `set_best` would write (its statement and parameters), caught before it reaches a store."""


class _Capture:
    def write(self, query: str, params: dict[str, object] | None = None) -> list[dict[str, object]]:
        raise _Captured(query, params)


def test_a_best_replaced_in_another_open_transaction_waits_for_it_then_moves_on(
    neo4j_store: Neo4jStore,
) -> None:
    """Two runs replacing one BEST on Neo4j: while one's transaction (BEST d0 -> d1) is still open, the
    other's `set_best(d2, replaces=d0)` waits on the kernel's write lock, then sees d1 and raises
    BestMoved, instead of overwriting d1 (a design accepted against a BEST no longer BEST)."""
    graph = neo4j_store
    ensure_schema(graph)
    actor = record_activity(graph, Activity(id="a1", role="refiner", policy="builtin"))
    register_kernel(graph, Kernel(name="gemv", target="simrngd", weight_bytes=1 << 20, bound_cycles=1000.0))
    for i in range(3):
        add_design(graph, _design(i, min(i, 1)), version=_version(f"v{i}"), parent="d0" if i else None, activity=actor)
    set_best(graph, "gemv", "d0")
    with pytest.raises(_Captured) as captured:
        set_best(_Capture(), "gemv", "d1", replaces="d0", status="accepted")  # type: ignore[arg-type]
    query, params = captured.value.args
    waited: dict[str, object] = {}

    def second() -> None:
        started = time.monotonic()
        try:
            set_best(graph, "gemv", "d2", replaces="d0", status="accepted")
            waited["outcome"] = "replaced"
        except BestMoved as moved:
            waited["outcome"] = str(moved)
        waited["s"] = time.monotonic() - started

    with graph._driver.session(database=graph.database) as session, session.begin_transaction() as first:
        first.run(query, params).consume()
        other = threading.Thread(target=second)
        other.start()
        time.sleep(1.0)  # the second is waiting on the lock the first holds
        assert "outcome" not in waited
        first.commit()
    other.join(timeout=30)
    assert waited["outcome"] == "gemv's BEST is d1, no longer d0"
    assert best_of(graph, "gemv").id == "d1"  # type: ignore[union-attr]
