"""The graph as a file (chiplore.kg.graph_io, chiplore.kg.cypher_script): a graph exported from one backend and imported
into an empty store of the other has the same counts per label and relationship type and the same
named-query answers, both ways; the Cypher script loads into Neo4j the same; a bad file is refused
whole, with the line that is wrong, before anything is written."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chiplore import queries as named_queries
from chiplore.kg.cypher_script import export_cypher, literal, statements
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.graph_io import (
    GraphFileError,
    copy_graph,
    export_jsonl,
    graph_counts,
    import_jsonl,
    unfinished_import,
)
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.repo.devices import device_usage, record_device_job
from chiplore.kg.repo.work_marks import FACTS_MARK
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.kg.testing.sample import SampleSummary, build_sample_graph, sample_query_params

pytestmark = pytest.mark.neo4j


def _normal(value: Any) -> Any:
    """A value with every list sorted (collect() has no order), for comparing answers."""
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in sorted(value.items())}
    if isinstance(value, list):
        return sorted((_normal(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    return value


def answers(store: GraphStore, summary: SampleSummary) -> dict[str, Any]:
    """Every named query's rows (as a sorted multiset) on the sample graph's parameters."""
    params = sample_query_params(summary)
    found = {}
    for name, query in named_queries.load_all().items():
        given = params.get(name, {})
        if any(p.required and p.name not in given for p in query.params):
            continue
        found[name] = _normal(named_queries.run(store, name, given))
    return found


def sample(store: GraphStore) -> SampleSummary:
    ensure_schema(store)
    return build_sample_graph(store, designs_per_kernel=6)


@pytest.mark.parametrize("direction", ["embedded->neo4j", "neo4j->embedded"])
def test_a_round_trip_keeps_every_count_and_every_named_query_answer(
    direction: str, embedded_store: EmbeddedStore, neo4j_store: Neo4jStore, tmp_path: Path
) -> None:
    source, destination = (embedded_store, neo4j_store) if direction == "embedded->neo4j" else (
        neo4j_store, embedded_store)  # fmt: skip
    summary = sample(source)
    file = tmp_path / "graph.jsonl"
    with file.open("w") as out:
        exported = export_jsonl(source, out)
    before = graph_counts(source)
    assert (exported.nodes, exported.relationships) == (before.total_nodes - before.nodes["Fact"],
                                                        before.total_relationships)  # fmt: skip
    imported = import_jsonl(destination, file)
    assert (imported.nodes, imported.relationships) == (exported.nodes, exported.relationships)
    assert graph_counts(destination) == before
    expected = answers(source, summary)
    assert len(expected) >= 10  # every named query the sample graph has parameters for
    assert answers(destination, summary) == expected
    again = tmp_path / "again.jsonl"
    with again.open("w") as out:
        export_jsonl(destination, out)
    assert _body(again) == _body(file)


def _digits(value: Any) -> Any:
    """FalkorDB replies with a float's 15 significant digits: a value through it compares at those."""
    if isinstance(value, float):
        return float(f"{value:.15g}")
    if isinstance(value, dict):
        return {key: _digits(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_digits(item) for item in value]
    return value


def _body(file: Path) -> list[Any]:
    """A graph file's lines but its header (which holds the export's time), in order."""
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    return [_digits(line) for line in lines if line["kind"] != "header"]


def test_the_cypher_script_loads_into_neo4j_as_the_same_graph(embedded_store: EmbeddedStore,
                                                              neo4j_store: Neo4jStore) -> None:  # fmt: skip
    summary = sample(embedded_store)
    script = io.StringIO()
    export_cypher(embedded_store, script)
    for statement in statements(script.getvalue()):
        neo4j_store.write(statement)
    assert graph_counts(neo4j_store) == graph_counts(embedded_store)
    assert answers(neo4j_store, summary) == answers(embedded_store, summary)


def test_literals_are_values_never_code() -> None:
    assert literal("x'}) DETACH DELETE n //") == '"x\'}) DETACH DELETE n //"'
    assert literal('a"b\\c\n') == '"a\\"b\\\\c\\n"'
    assert literal({"weird `key`": [1, 2.5, None, True]}) == "{`weird ``key```: [1, 2.5, null, true]}"


def test_copy_fills_an_empty_store_and_refuses_a_full_one(embedded_store: EmbeddedStore,
                                                          neo4j_store: Neo4jStore) -> None:  # fmt: skip
    sample(embedded_store)
    copy_graph(embedded_store, neo4j_store)
    with pytest.raises(GraphFileError, match=r"already holds .* --replace"):
        copy_graph(embedded_store, neo4j_store)
    copy_graph(embedded_store, neo4j_store, replace=True)
    assert graph_counts(neo4j_store) == graph_counts(embedded_store)


def test_a_run_s_device_use_travels_and_an_unnamed_label_stops_a_copy_before_it_writes(
    embedded_store: EmbeddedStore, neo4j_store: Neo4jStore, tmp_path: Path
) -> None:
    """After `optimize --workers 2` a user's export failed and a copy dropped the run's DeviceUse nodes."""
    sample(embedded_store)
    activity = embedded_store.read("MATCH (a:Activity) RETURN a.id AS id LIMIT 1")[0]["id"]
    record_device_job(embedded_store, activity=activity, device="rngd-sim-1", kind="sim", device_s=2.5, held_s=3.0,
                      clock_s=40.0, failed=False)  # fmt: skip
    with (tmp_path / "g.jsonl").open("w") as out:
        export_jsonl(embedded_store, out)
    assert '"label":"DeviceUse"' in (tmp_path / "g.jsonl").read_text().replace(" ", "")
    copy_graph(embedded_store, neo4j_store)
    assert [u.device for u in device_usage(neo4j_store, activity)] == ["rngd-sim-1"]
    before = graph_counts(neo4j_store)
    embedded_store.write("CREATE (:Stray {x: 1})")
    with pytest.raises(GraphFileError, match=r"1 node\(s\) carry no schema label \(labels: Stray\)"):
        copy_graph(embedded_store, neo4j_store, replace=True)
    assert graph_counts(neo4j_store) == before  # refused before --replace deleted anything


def _write(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


HEADER = {"kind": "header", "format": "chiplore-graph", "version": 1, "schema_version": 3}
KERNEL = {"kind": "node", "label": "Kernel", "key": "k", "labels": ["Kernel"],
          "properties": {"name": "k", "target": "t", "weight_bytes": 1, "bound_cycles": 1.0}}  # fmt: skip
END1 = {"kind": "end", "nodes": 1, "relationships": 0}


@pytest.mark.parametrize(("lines", "message"), [
    ([], "is empty"),
    ([KERNEL], "line 1: a chiplore graph file starts with its header"),
    ([HEADER, KERNEL], "no end line: the file was cut short"),
    ([HEADER, {**KERNEL, "label": "Person"}, {"kind": "end", "nodes": 1, "relationships": 0}], "unknown node label"),
    ([HEADER, {**KERNEL, "labels": ["Kernel", "Admin"]}, {"kind": "end", "nodes": 1, "relationships": 0}],
     "not the schema's"),
    ([HEADER, KERNEL, {"kind": "relationship", "type": "OWNS", "from": ["Kernel", "k"], "to": ["Kernel", "k"],
                       "properties": {}}, {"kind": "end", "nodes": 1, "relationships": 1}], "unknown relationship"),
    ([HEADER, KERNEL, {"kind": "end", "nodes": 2, "relationships": 0}], "the file holds 1"),
    ([HEADER, "{not json", {"kind": "end", "nodes": 0, "relationships": 0}], "line 2: not a chiplore graph line"),
    (["// chiplore graph", "CREATE (:Kernel {name: 'k'});"], "line 1: .* reads as a Cypher script"),
    ([{**HEADER, "schema_version": 99}, {"kind": "end", "nodes": 0, "relationships": 0}], "newer chiplore"),
    # what a store would refuse mid-import, after --replace had deleted the graph: found before anything is written
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "note": {"a": 1}}}, END1], "property 'note' holds"),
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "a`b": 1}}, END1], "property name 'a`b' cannot"),
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "n": 2**70}}, END1], "64-bit integer"),
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "xs": [[1]]}}, END1], "property 'xs' holds"),
    # Neo4j holds a list of one kind only: a user's [1, 'a'] had deleted the graph it replaced
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "xs": [1, "a"]}}, END1], "a list of one of them"),
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "xs": [1, 2.5]}}, END1], "property 'xs' holds"),
    ([HEADER, {**KERNEL, "properties": {**KERNEL["properties"], "xs": ["a", None]}}, END1], "property 'xs' holds"),
    ([HEADER, KERNEL, KERNEL, {"kind": "end", "nodes": 2, "relationships": 0}], "line 3: a second Kernel 'k'"),
    ([HEADER, {"kind": "relationship", "type": "ROOT", "from": ["Kernel", "k"], "to": ["Kernel", "k"],
               "properties": {}}, KERNEL, {"kind": "end", "nodes": 1, "relationships": 1}],
     "line 3: a node after the relationships"),
])  # fmt: skip
def test_a_bad_file_is_refused_whole_before_anything_is_written(
    lines: list[Any], message: str, embedded_store: EmbeddedStore, tmp_path: Path
) -> None:
    with pytest.raises(GraphFileError, match=message):
        import_jsonl(embedded_store, _write(tmp_path / "bad.jsonl", lines))
    assert embedded_store.read("MATCH (n) WHERE NOT n:SchemaVersion RETURN count(n) AS c")[0]["c"] == 0


def test_a_relationship_to_a_node_the_file_lacks_is_refused(embedded_store: EmbeddedStore, tmp_path: Path) -> None:
    rel = {"kind": "relationship", "type": "ROOT", "from": ["Kernel", "k"], "to": ["DesignNode", "missing"],
           "properties": {}}  # fmt: skip
    file = _write(tmp_path / "dangling.jsonl", [HEADER, KERNEL, rel, {"kind": "end", "nodes": 1, "relationships": 1}])
    with pytest.raises(GraphFileError, match="line 3: the ROOT relationship names DesignNode 'missing'"):
        import_jsonl(embedded_store, file)
    assert embedded_store.read("MATCH (n) WHERE NOT n:SchemaVersion RETURN count(n) AS c")[0]["c"] == 0


def test_replace_is_refused_while_a_run_holds_designs(embedded_store: EmbeddedStore, tmp_path: Path) -> None:
    """A user replaced the graph while an optimize ran on it: the optimize crashed on a design gone from
    under it, and the graph was a mix of both. A live lease (this process's) now refuses the import."""
    file = _write(tmp_path / "one.jsonl", [HEADER, KERNEL, END1])
    me = f"{socket.gethostname()}:{os.getpid()}:t"
    embedded_store.write("CREATE (:DesignNode {id: 'd', kernel: 'k', status: 'queued', owner: $owner, "
                         "lease_until: '9999-01-01T00:00:00Z'})", {"owner": me})  # fmt: skip
    with pytest.raises(GraphFileError, match="a run is working on this graph"):
        import_jsonl(embedded_store, file, replace=True)
    assert embedded_store.read("MATCH (d:DesignNode) RETURN d.id AS id") == [{"id": "d"}]
    # a dead process's lease holds nothing: the import goes ahead
    embedded_store.write("MATCH (d:DesignNode) SET d.owner = $owner", {"owner": f"{socket.gethostname()}:999999:t"})
    assert import_jsonl(embedded_store, file, replace=True).nodes == 1


def test_replace_is_refused_while_an_optimize_runs_between_leases_or_a_learn_runs(embedded_store: EmbeddedStore,
                                                                                  tmp_path: Path) -> None:  # fmt: skip
    """An optimize pricing its next designs holds no lease: `--replace` wiped the graph under it, and it
    died on its next design. A live optimize run, or a learn or an upgrade under way, refuses it too."""
    file = _write(tmp_path / "one.jsonl", [HEADER, KERNEL, END1])
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        owner = f"{socket.gethostname()}:{live.pid}"
        embedded_store.write("CREATE (:Activity {id: 'optimize-x', role: 'runner', policy: 'builtin', "
                             "outcome: 'running', owner: $owner, started_at: '2026-12-07T10:00:00Z'})",
                             {"owner": owner})  # fmt: skip
        with pytest.raises(GraphFileError, match=f"a run is working on this graph \\(an optimize, process {owner} "):
            import_jsonl(embedded_store, file, replace=True)
        embedded_store.write("MATCH (a:Activity) SET a.outcome = 'ok'")
        embedded_store.write(f"CREATE (:SchemaVersion {{name: '{FACTS_MARK}', owner: $owner, work: 'learn 0.6.0', "
                             "started_at: '2026-12-07T10:00:00Z', lease_until: '2999-01-01T00:00:00Z'})",
                             {"owner": owner})  # fmt: skip
        with pytest.raises(GraphFileError, match=f"a run is working on this graph \\(learn 0.6.0, process {owner}\\)"):
            import_jsonl(embedded_store, file, replace=True)
        assert unfinished_import(embedded_store) is None  # a refused import leaves no mark of its own
    finally:
        live.kill()
        live.wait()
    assert import_jsonl(embedded_store, file, replace=True).nodes == 1  # their process is gone: nothing refuses


def test_another_machines_import_is_under_way_while_its_lease_holds_and_a_killed_ones_is_taken_over(
    embedded_store: EmbeddedStore, tmp_path: Path
) -> None:
    """A killed import of another machine read as "under way" for good (nothing here can tell its process
    is gone): its mark now lapses with its lease, and the graph it left reads as one that did not finish."""
    file = _write(tmp_path / "one.jsonl", [HEADER, KERNEL, END1])
    ensure_schema(embedded_store)
    embedded_store.write("CREATE (:SchemaVersion {name: 'import-under-way', owner: 'another-host:77:abc', "
                         "work: 'import from /elsewhere/graph.jsonl', started_at: '2026-12-07T10:00:00Z', "
                         "lease_until: '2999-01-01T00:00:00Z'})")  # fmt: skip
    left = unfinished_import(embedded_store)
    assert left is not None and "is under way (process another-host:77:abc) (started 2026-12-07T10:00:00Z, " \
        "from /elsewhere/graph.jsonl)" in str(left)  # fmt: skip
    with pytest.raises(GraphFileError, match="an import into this graph is under way \\(process another-host:77:abc"):
        import_jsonl(embedded_store, file, replace=True)
    embedded_store.write(
        "MATCH (m:SchemaVersion {name: 'import-under-way'}) SET m.lease_until = '2000-01-01T00:00:00Z'"
    )
    left = unfinished_import(embedded_store)
    assert left is not None and "did not finish (started 2026-12-07T10:00:00Z, from /elsewhere/graph.jsonl)" in str(
        left
    )
    assert import_jsonl(embedded_store, file, replace=True).nodes == 1
    assert unfinished_import(embedded_store) is None
