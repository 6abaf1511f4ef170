"""The GraphStore contract, run against the real Neo4j and the embedded FalkorDB alike."""

from __future__ import annotations

import pytest

from chiplore.core.errors import QueryError, StoreUnavailable, WriteRefused
from chiplore.kg.guard import QueryRefused
from chiplore.kg.store import GraphStore, batches


def test_both_backends_implement_the_interface(store: GraphStore) -> None:
    assert isinstance(store, GraphStore)
    assert store.server_info().backend == store.backend


def test_written_values_read_back_with_their_types(store: GraphStore) -> None:
    store.write(
        "CREATE (:Kernel {name: $name, weight_bytes: $w, bound_cycles: $b, cycles: $c, ok: $ok})",
        {"name": "k", "w": 1 << 40, "b": 55_200.5, "c": [1.0, 2.5, 3.0], "ok": True},
    )
    rows = store.read(
        "MATCH (k:Kernel) RETURN k.name AS name, k.weight_bytes AS w, k.bound_cycles AS b, k.cycles AS c, k.ok AS ok"
    )
    assert rows == [{"name": "k", "w": 1 << 40, "b": 55_200.5, "c": [1.0, 2.5, 3.0], "ok": True}]


def test_values_travel_as_parameters_so_quotes_cannot_inject(store: GraphStore) -> None:
    hostile = "x'}) DETACH DELETE n //\"`$"
    store.write("CREATE (:Concept {key: $key})", {"key": hostile})
    store.write("CREATE (:Concept {key: 'other'})")
    assert store.read("MATCH (c:Concept {key: $key}) RETURN c.key AS key", {"key": hostile}) == [{"key": hostile}]
    assert store.read("MATCH (c:Concept) RETURN count(c) AS n") == [{"n": 2}]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_parameter_that_is_no_finite_number_is_refused_by_name(store: GraphStore, value: float) -> None:
    """A fit that failed gives NaN: FalkorDB reported a parse error at its parameter header, Neo4j stored it."""
    rows = [{"key": "a", "props": {"value": 1.0}}, {"key": "b", "props": {"value": 2.0, "ci_low": value}}]
    with pytest.raises(QueryError, match=r"parameter rows\[1\]\.props\.ci_low = -?(nan|inf)"):
        store.write("UNWIND $rows AS row MERGE (n:Measurement {id: row.key}) SET n += row.props", {"rows": rows})
    with pytest.raises(QueryError, match="parameter v = "):
        store.read("RETURN $v AS v", {"v": value})
    assert store.read("MATCH (n:Measurement) RETURN count(n) AS n") == [{"n": 0}]  # nothing of it written


def test_nodes_come_back_as_plain_dicts_with_labels(store: GraphStore) -> None:
    store.write("CREATE (:Concept {key: 'dma.packet', kind: 'dma'})")
    [row] = store.read("MATCH (c:Concept) RETURN c")
    assert row["c"] == {"_labels": ["Concept"], "key": "dma.packet", "kind": "dma"}


def test_a_failing_statement_leaves_nothing_behind(store: GraphStore) -> None:
    store.ensure_unique("Concept", "key")
    store.write("CREATE (:Concept {key: 'taken'})")
    with pytest.raises(QueryError):
        store.write("CREATE (:Concept {key: 'fresh'}) WITH 1 AS x CREATE (:Concept {key: 'taken'})")
    keys = [r["key"] for r in store.read("MATCH (c:Concept) RETURN c.key AS key ORDER BY key")]
    assert keys == ["taken"]


def test_read_path_refuses_writes_and_changes_nothing(store: GraphStore) -> None:
    with pytest.raises(WriteRefused):
        store.read("CREATE (:Concept {key: 'sneaky'})")
    with pytest.raises(WriteRefused):
        store.read("MERGE (c:Concept {key: 'a'}) SET c.kind = 'b' RETURN c")
    assert store.read("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_syntax_error_is_a_query_error_with_the_servers_reason(store: GraphStore) -> None:
    with pytest.raises(QueryError) as caught:
        store.read("MATCH (n RETURN n")
    assert not isinstance(caught.value, WriteRefused)
    assert "Cypher error" in str(caught.value)


def test_neo4j_5_subqueries_run_on_neo4j_and_the_embedded_store_says_what_to_write(store: GraphStore) -> None:
    store.write("CREATE (:Kernel {name: 'a'})-[:BEST]->(:Design), (:Kernel {name: 'b'})")
    query = "MATCH (k:Kernel) WHERE EXISTS { MATCH (k)-[:BEST]->() } RETURN k.name AS name"
    if store.backend == "neo4j":
        assert store.read(query) == [{"name": "a"}]
    else:
        with pytest.raises(QueryError, match=r"no EXISTS \{ \} subqueries: write a pattern predicate"):
            store.read(query)
        with pytest.raises(QueryError, match="has no datetime\\(\\); chiplore stores times as ISO-8601 text"):
            store.read("RETURN datetime() AS now")
        with pytest.raises(QueryError, match="lacks this function; the Neo4j store may have it"):
            store.read("RETURN apoc.text.join(['a'], '') AS s")
        # what a user writes after the hint, in WHERE: FalkorDB filters on a comprehension only once named
        with pytest.raises(QueryError, match="count it in a WITH and filter on the name"):
            store.read("MATCH (k:Kernel) WHERE size([(k)-[:BEST]->() | 1]) > 0 RETURN k.name AS name")
        with pytest.raises(QueryError, match="count it in a WITH and filter on the name"):  # after a WITH: other words
            store.read("MATCH (k:Kernel) WITH DISTINCT k WHERE size([(k)-[:BEST]->(d) | d]) = 0 RETURN k.name AS name")
        with pytest.raises(QueryError, match=r"has no `CALL \(k\) \{ \}`: import the variables with a WITH"):
            store.read("MATCH (k:Kernel) CALL (k) { MATCH (k)-[:BEST]->(d) RETURN count(d) AS n } RETURN k.name, n")
    # a person's query (`chiplore cypher`): EXPLAIN is refused by its first word on both stores (FalkorDB
    # took no prefix, Neo4j ran it and returned no rows)
    with pytest.raises(QueryError, match="EXPLAIN is not run on the read-only path: send the query itself"):
        store.read_untrusted("EXPLAIN MATCH (k:Kernel) RETURN k.name")
    with pytest.raises(QueryError, match=r"(\$|\(s\): )kernel"):  # which parameter lacks a value (Neo4j names it)
        store.read_untrusted("MATCH (k:Kernel {name: $kernel}) RETURN k.name AS name")
    instead = "MATCH (k:Kernel) WHERE (k)-[:BEST]->() RETURN k.name AS name, size([(k)--() | 1]) AS n"
    assert store.read(instead) == [{"name": "a", "n": 1}]
    counted = "MATCH (k:Kernel) WITH k, size([(k)-[:BEST]->() | 1]) AS n WHERE n > 0 RETURN k.name AS name"
    assert store.read(counted) == [{"name": "a"}]
    called = "MATCH (k:Kernel) CALL { WITH k MATCH (k)-[:BEST]->(d) RETURN count(d) AS n } RETURN k.name AS k, n"
    assert sorted((r["k"], r["n"]) for r in store.read(called)) == [("a", 1), ("b", 0)]
    assert store.read("RETURN '2026-12-02T10:00:00Z' >= '2026-12-01' AS later") == [{"later": True}]


def test_a_variable_length_relationship_variable_reads_as_on_neo4j_or_is_refused(store: GraphStore) -> None:
    """FalkorDB binds `r` of `-[r:T*1..2]->` to the path: `RETURN r` gave nodes among the relationships and
    `size(r)` a type error, where Neo4j gives a list of relationships. The embedded store refuses such a
    query in one line that says what to write (but `length(r)`, FalkorDB's own); a path's relationships
    read alike on both."""
    store.write("CREATE (:Design {n: 0})-[:CHILD_OF {w: 1}]->(:Design {n: 1})-[:CHILD_OF {w: 2}]->(:Design {n: 2})")
    listed = "MATCH (a:Design {n: 0})-[r:CHILD_OF*1..2]->(x) RETURN x.n AS n, size(r) AS hops ORDER BY n"
    if store.backend == "neo4j":
        assert store.read_untrusted(listed).rows == [{"n": 1, "hops": 1}, {"n": 2, "hops": 2}]
    else:
        with pytest.raises(QueryError, match=r"binds `r` of a variable-length pattern to a path.*relationships\(p\)"):
            store.read_untrusted(listed)
        quoted = "MATCH (a:Design {n: 0})-[`r`:CHILD_OF*1..2]->(x) RETURN `r` AS r"  # a quoted name is a name
        with pytest.raises(QueryError, match="binds `r` of a variable-length pattern"):
            store.read_untrusted(quoted)
    # no relationship pattern, no refusal: an index or a list's arithmetic reads `[i*2]` (the review)
    assert store.read_untrusted("WITH [1, 2, 3, 4] AS xs, 1 AS i RETURN xs[i*2] AS y, [i * 2] AS l").rows == [
        {"y": 3, "l": [2]}
    ]
    rewritten = ("MATCH p = (a:Design {n: 0})-[:CHILD_OF*1..2]->(x) "
                 "RETURN x.n AS n, size(relationships(p)) AS hops, length(p) AS steps, "
                 "[e IN relationships(p) | e.w] AS ws ORDER BY n")  # fmt: skip
    assert store.read_untrusted(rewritten).rows == [{"n": 1, "hops": 1, "steps": 1, "ws": [1]},
                                                    {"n": 2, "hops": 2, "steps": 2, "ws": [1, 2]}]  # fmt: skip
    if store.backend != "neo4j":  # its path's length (on Neo4j 5 a type error: size(r) there)
        by_length = "MATCH (a:Design {n: 0})-[r:CHILD_OF*1..2]->(x) RETURN x.n AS n, length(r) AS hops ORDER BY n"
        assert store.read_untrusted(by_length).rows == [{"n": 1, "hops": 1}, {"n": 2, "hops": 2}]
        # what FalkorDB lacks says what to write instead
        with pytest.raises(QueryError, match="no regular expressions: match with STARTS WITH"):
            store.read_untrusted("MATCH (d:Design) WHERE toString(d.n) =~ '1.*' RETURN d.n")
        with pytest.raises(QueryError, match="no label alternatives in a pattern"):
            store.read_untrusted("MATCH (f:Design|Kernel) RETURN count(f) AS n")
        with pytest.raises(QueryError, match="find the path in a WITH or RETURN"):
            store.read_untrusted("MATCH (a:Design {n: 0}), (b:Design {n: 2}) "
                                 "MATCH p = shortestPath((a)-[:CHILD_OF*]->(b)) RETURN length(p) AS n")  # fmt: skip


def test_slow_query_times_out(store: GraphStore) -> None:
    with pytest.raises(QueryError, match=r"ran past its timeout of 0\.2 s"):
        store.read(
            # 10^10 rows from small lists: minutes of work, little memory, stopped by the timeout.
            "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*) AS n",
            timeout_s=0.2,
        )


def test_write_rows_runs_every_batch(store: GraphStore) -> None:
    rows = [{"key": f"c{i}", "n": i} for i in range(2_345)]
    written = store.write_rows("UNWIND $rows AS row CREATE (:Concept {key: row.key, n: row.n})", rows, batch_size=500)
    assert written == 2_345
    assert store.read("MATCH (c:Concept) RETURN count(c) AS n, sum(c.n) AS total") == [
        {"n": 2_345, "total": sum(range(2_345))}
    ]


def test_write_rows_passes_shared_parameters(store: GraphStore) -> None:
    store.write_rows(
        "UNWIND $rows AS row CREATE (:Claim {id: row.id, toolchain: $toolchain})",
        [{"id": "a"}, {"id": "b"}],
        params={"toolchain": "0.6.0"},
    )
    assert store.read("MATCH (c:Claim) RETURN collect(DISTINCT c.toolchain) AS t") == [{"t": ["0.6.0"]}]


def test_unique_constraint_is_enforced_and_idempotent(store: GraphStore) -> None:
    assert store.ensure_unique("DesignNode", "id") is True
    assert store.ensure_unique("DesignNode", "id") is False
    store.write("CREATE (:DesignNode {id: 'd1'})")
    with pytest.raises(QueryError):
        store.write("CREATE (:DesignNode {id: 'd1'})")
    assert {"kind": "unique", "label": "DesignNode", "property": "id"} in store.schema_objects()


def test_index_creation_is_idempotent(store: GraphStore) -> None:
    assert store.ensure_index("DesignNode", "status") is True
    assert store.ensure_index("DesignNode", "status") is False
    assert {"kind": "index", "label": "DesignNode", "property": "status"} in store.schema_objects()


def test_delete_all_empties_the_graph(store: GraphStore) -> None:
    store.write_rows(
        "UNWIND $rows AS row CREATE (:Concept {key: row.k})-[:ABOUT]->(:Claim {id: row.k})",
        [{"k": str(i)} for i in range(100)],
    )
    store.delete_all()
    assert store.read("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_closed_store_says_so(store: GraphStore) -> None:
    store.close()
    with pytest.raises(StoreUnavailable):
        store.read("RETURN 1 AS x")


def test_dialect_expressions_run_on_their_backend(store: GraphStore) -> None:
    store.write("CREATE (:Kernel {name: 'k'})<-[:ROOT]-(:Target {name: 't'})")
    store.write("MATCH (k:Kernel) CREATE (k)-[:ROOT]->(:DesignNode {id: 'a'}), (k)-[:ROOT]->(:DesignNode {id: 'b'})")
    dialect = store.dialect
    rows = store.read(
        f"MATCH (k:Kernel) RETURN {dialect.node_id('k')} AS id, "
        f"{dialect.count_pattern('(k)-[:ROOT]->(:DesignNode)')} AS roots, "
        f"{dialect.exists_pattern('(:Target)-[:ROOT]->(k)')} AS owned"
    )
    assert isinstance(rows[0]["id"], str)
    assert rows[0]["roots"] == 2
    assert rows[0]["owned"] is True


def test_batches_split_in_order() -> None:
    assert [len(b) for b in batches([{"i": i} for i in range(5)], 2)] == [2, 2, 1]
    with pytest.raises(ValueError):
        list(batches([], 0))


def test_a_nul_in_a_text_is_stored_as_u_fffd_on_both_stores(store: GraphStore) -> None:
    """A model's rationale holding a NUL failed the statement recording it on FalkorDB (which reads its
    parameters from the query text) and ended the run; both stores now keep U+FFFD in its place."""
    store.write("CREATE (:Kernel {name: $name, notes: $notes})", {"name": "k\0", "notes": ["a\0b", "c"]})
    rows = store.read("MATCH (k:Kernel) RETURN k.name AS name, k.notes AS notes")
    assert rows == [{"name": "k\ufffd", "notes": ["a\ufffdb", "c"]}]


def test_a_parameter_name_no_cypher_can_name_is_refused_before_the_server(store: GraphStore) -> None:
    """A backtick in an MCP client's parameter name came back as FalkorDB's raw parse error."""
    with pytest.raises(QueryRefused, match="parameter name 'a`b' is no Cypher parameter name"):
        store.read_untrusted("RETURN 1 AS x", {"a`b": 1})
    assert store.read_untrusted("RETURN $a_b AS x", {"a_b": 1}).rows == [{"x": 1}]
