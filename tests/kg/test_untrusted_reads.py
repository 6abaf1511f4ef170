"""Queries a person or a model writes (issue 21, items 2 and 3): the read-only path is a guarantee
from the backend's planner, every query is bounded in time, rows and bytes, and a store error reaches
the model as a message. Neo4j is the real server (chiplore.kg.neo4j_local, with the bundled configuration)."""

from __future__ import annotations

import re
import time

import pytest

from chiplore.core.errors import QueryError, StoreUnavailable, WriteRefused
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.guard import (
    QueryRefused,
    UntrustedLimits,
    blank_comments,
    check_text,
    parameter_names,
    return_columns,
)
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.store import GraphStore

NESTED_1000 = "RETURN " + "[" * 1000 + "1" + "]" * 1000 + " AS x"
LOAD_HOST_FILE = "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row"


def test_a_plain_read_comes_back_with_its_columns_in_order(store: GraphStore) -> None:
    store.write("UNWIND range(1, 3) AS i CREATE (:Concept {key: toString(i), n: i})")
    result = store.read_untrusted("MATCH (c:Concept) RETURN c.n AS n, c.key AS key ORDER BY n DESC")
    assert result.columns == ["n", "key"]
    assert result.rows == [{"n": 3, "key": "3"}, {"n": 2, "key": "2"}, {"n": 1, "key": "1"}]
    assert not result.truncated and result.cut_reason is None


def test_a_path_comes_back_with_its_relationships_the_same_on_both_stores(store: GraphStore) -> None:
    """A path was its nodes only: the relationships between them come in turn, as {"_type", **props}."""
    store.write("CREATE (:Concept {key: 'a'})-[:RELATES_TO {why: 'w'}]->(:Concept {key: 'b'})")
    result = store.read_untrusted("MATCH p = (:Concept {key: 'a'})-[r]->(:Concept) RETURN p, r, type(r) AS t")
    a, b = {"_labels": ["Concept"], "key": "a"}, {"_labels": ["Concept"], "key": "b"}
    relationship = {"_type": "RELATES_TO", "why": "w"}
    assert result.rows == [{"p": [a, relationship, b], "r": relationship, "t": "RELATES_TO"}]


def test_parameters_travel_to_untrusted_reads(store: GraphStore) -> None:
    store.write("CREATE (:Concept {key: 'a'}), (:Concept {key: 'b'})")
    result = store.read_untrusted("MATCH (c:Concept {key: $key}) RETURN c.key AS key", {"key": "b"})
    assert result.rows == [{"key": "b"}]


def test_writes_are_refused_and_change_nothing(store: GraphStore) -> None:
    for query in ("CREATE (:Concept {key: 'sneaky'})", "MERGE (c:Concept {key: 'x'}) RETURN c"):
        with pytest.raises(WriteRefused):
            store.read_untrusted(query)
    with pytest.raises((WriteRefused, QueryRefused)):
        store.read_untrusted("CREATE INDEX FOR (n:Concept) ON (n.kind)")
    assert store.read("MATCH (n) RETURN count(n) AS n") == [{"n": 0}]


def test_load_csv_of_a_host_file_is_refused(store: GraphStore) -> None:
    with pytest.raises(QueryRefused, match="LOAD CSV"):
        store.read_untrusted(LOAD_HOST_FILE)


@pytest.mark.parametrize(
    "query",
    [
        "TERMINATE TRANSACTIONS 'neo4j-transaction-1'",
        "SHOW TRANSACTIONS",
        "CALL dbms.killConnections(['bolt-1'])",
        "CALL dbms.listConnections() YIELD connectionId RETURN connectionId",
        "SHOW SETTINGS YIELD name RETURN name",
        "CALL dbms.components() YIELD name RETURN name",
    ],
)
def test_neo4j_admin_commands_and_dbms_procedures_are_refused(neo4j_store: Neo4jStore, query: str) -> None:
    with pytest.raises((QueryRefused, WriteRefused)):
        neo4j_store.read_untrusted(query)


def test_other_sessions_transactions_survive_a_terminate_attempt(neo4j_store: Neo4jStore) -> None:
    # Another session's open transaction, which TERMINATE TRANSACTIONS would end.
    with neo4j_store._driver.session(database=neo4j_store.database) as other, other.begin_transaction() as tx:
        tx.run("CREATE (:Concept {key: 'in-flight'})").consume()
        ids = [r["transactionId"] for r in neo4j_store.read("SHOW TRANSACTIONS YIELD transactionId RETURN *")]
        for transaction_id in ids:
            with pytest.raises((QueryRefused, WriteRefused)):
                neo4j_store.read_untrusted(f"TERMINATE TRANSACTIONS '{transaction_id}'")
        tx.commit()
    assert neo4j_store.read("MATCH (c:Concept {key: 'in-flight'}) RETURN count(c) AS n") == [{"n": 1}]


def test_schema_procedures_stay_readable(store: GraphStore) -> None:
    store.write("CREATE (:Concept {key: 'a'})")
    result = store.read_untrusted("CALL db.labels() YIELD label RETURN label")
    assert {"label": "Concept"} in result.rows


def test_the_bundled_neo4j_refuses_file_urls_even_on_the_write_path(neo4j_store: Neo4jStore) -> None:
    # chiplore.kg.neo4j_local disables file URLs for LOAD CSV (dbms.security.allow_csv_import_from_file_urls).
    with pytest.raises(QueryError) as refused:
        neo4j_store.write(LOAD_HOST_FILE)
    assert "root:" not in str(refused.value)


def test_a_deeply_nested_query_is_refused_at_once_and_the_store_keeps_answering(store: GraphStore) -> None:
    started = time.monotonic()
    with pytest.raises(QueryRefused, match="nests"):
        store.read_untrusted(NESTED_1000)
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    assert store.read("RETURN 1 AS x") == [{"x": 1}]
    assert time.monotonic() - started < 2.0, "the server's workers are free"


def test_rows_are_cut_at_the_row_cap_and_the_caller_is_told(store: GraphStore) -> None:
    result = store.read_untrusted("UNWIND range(1, 100000) AS i RETURN i", limits=UntrustedLimits(max_rows=50))
    assert [row["i"] for row in result.rows] == list(range(1, 51))
    assert result.truncated and "50 rows" in (result.cut_reason or "")


def test_a_cartesian_product_costs_only_the_rows_it_returns(store: GraphStore) -> None:
    store.write("UNWIND range(1, 3000) AS i CREATE (:Concept {key: toString(i)})")
    started = time.monotonic()
    result = store.read_untrusted("MATCH (a), (b) RETURN a, b", limits=UntrustedLimits(max_rows=50))
    assert len(result.rows) == 50 and result.truncated
    assert time.monotonic() - started < 5.0, "9 million rows were not built to return 50"


def test_bytes_are_cut_at_the_size_cap(store: GraphStore) -> None:
    result = store.read_untrusted(
        "UNWIND range(1, 100) AS i RETURN i, [x IN range(1, 1000) | 'xxxxxxxxxx'] AS blob",
        limits=UntrustedLimits(max_bytes=50_000),
    )
    assert 0 < len(result.rows) < 100 and result.truncated
    assert "bytes" in (result.cut_reason or "")


def test_a_slow_untrusted_query_is_stopped_by_the_server(store: GraphStore) -> None:
    started = time.monotonic()
    with pytest.raises(QueryError, match=r"(?i)timed out|terminated|timeout"):
        store.read_untrusted(
            "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*) AS n",
            limits=UntrustedLimits(timeout_s=0.5),
        )
    assert time.monotonic() - started < 10.0
    assert store.read("RETURN 1 AS x") == [{"x": 1}]


def test_nesting_and_length_checks_ignore_strings_and_comments() -> None:
    check_text("RETURN '((((((((((((((((((((' AS s // [[[[[[[[[[[[[[[[[[[[")
    with pytest.raises(QueryRefused):
        check_text("RETURN " + "CASE WHEN true THEN " * 13 + "1" + " END" * 13)
    with pytest.raises(QueryRefused, match="characters"):
        check_text("RETURN 1 // " + "x" * 30_000)
    assert return_columns("MATCH (n) RETURN n.a AS a, count(*), {x: [1, 2]} AS `m m` ORDER BY a") == [
        "a",
        "count(*)",
        "m m",
    ]
    assert return_columns("MATCH (n) RETURN *") is None
    for comments in ("// what runs?", "/* a */ // b\n  "):  # FalkorDB said "more than one statement"
        with pytest.raises(QueryRefused, match="only comments"):
            check_text(comments)
    check_text("/* x */ RETURN '// kept' AS s")


def test_the_embedded_store_answers_after_its_server_died(embedded_store: EmbeddedStore) -> None:
    embedded_store.server.kill()
    with pytest.raises(StoreUnavailable):
        embedded_store.read_untrusted("RETURN 1 AS x")


@pytest.mark.unit
def test_the_text_checks_read_strings_quoted_names_and_comments_as_cypher_does() -> None:
    """One walk of the query serves every text check: `$p` inside a quoted name that holds a quote
    was read as inside a string (a used parameter was refused), a comment that never ends ran on the
    embedded store where Neo4j refused it, and a CALL in a string was looked at once per CALL."""
    assert parameter_names("MATCH (n) WHERE n.`it's` = $p AND n.`a\"b` = $q RETURN $`x y`, $ z, '$s' // $c") == {
        "p", "q", "x y", "z"}  # fmt: skip
    assert blank_comments("RETURN 'a\\'//b' AS s, `a``b` // c\n/* d */") == (
        "RETURN 'a\\'//b' AS s, `a``b`     \n       ")  # fmt: skip
    for unclosed, what in (("RETURN 1 AS x /* open", "a /* comment"), ("RETURN 'abc", "a string"),
                           ("RETURN 'a\\'", "a string"), ("RETURN `abc", "a quoted name")):  # fmt: skip
        with pytest.raises(QueryRefused, match=f"has {re.escape(what)} that never ends"):
            check_text(unclosed)
    for closed in ("RETURN 'a\\\\' AS s", "RETURN 1 /* ok */", "RETURN 1 AS x // tail", "RETURN `a``b` AS x"):
        check_text(closed)
    check_text("RETURN '" + "CALL " * 3_990 + "' AS s")  # every CALL in one string: none is a call


@pytest.mark.unit
@pytest.mark.parametrize("query", [
    "USE neo4j MATCH (n) RETURN count(n) AS n",  # Neo4j's plan names the database: checked there
    "SHOW PROCEDURES YIELD name RETURN name", "SHOW FUNCTIONS", "SHOW NODE PROPERTY TYPE CONSTRAINTS",
    "SHOW PROPERTY UNIQUENESS CONSTRAINTS", "CALL { MATCH (n) RETURN n } RETURN n",
    "MATCH (n) CALL (n) { RETURN 1 AS one } RETURN one", "CALL db.labels() YIELD label RETURN label",
    "RETURN 'CALL apoc.x()' AS s", "// SHOW DATABASES\nMATCH (n) RETURN n",
])  # fmt: skip
def test_a_read_that_looks_like_a_command_is_not_refused_by_its_words(query: str) -> None:
    check_text(query)


@pytest.mark.unit
def test_a_refused_command_is_named_by_its_words() -> None:
    for query, named in (("CREATE OR REPLACE DATABASE x", "(CREATE OR REPLACE)"), ("SHOW DATABASES YIELD name",
                         "(SHOW DATABASES)"), ("drop index foo", "(drop index foo)")):  # fmt: skip
        with pytest.raises(QueryRefused) as error:
            check_text(query)
        assert str(error.value).endswith(named), error.value
