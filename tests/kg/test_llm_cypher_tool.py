"""The LLM's Cypher tool (agents/llm/tools.py) over the guarded read path: whatever the model writes,
and whatever state the store is in, the tool answers with text; it never raises into the run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chiplore.agents.llm.tools import ROW_CAP, graph_tools
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD


def _cypher(store: GraphStore, refusals: list[str]) -> Callable[[str], str]:
    tools = {tool.name: tool for tool in graph_tools(store, SimRNGD(), "0.6.0", "k", on_refusal=refusals.append)}
    return lambda query: str(tools["cypher"].invoke({"query": query}))


def test_rows_past_the_cap_are_cut_and_the_model_is_told(store: GraphStore) -> None:
    answer = _cypher(store, [])("UNWIND range(1, 1000) AS i RETURN i")
    assert answer.count('"i"') == ROW_CAP and "row cap" in answer


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("CREATE (:Concept {key: 'x'})", "read-only"),
        ("LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row", "LOAD CSV"),
        ("RETURN " + "[" * 1000 + "1" + "]" * 1000, "nests"),
    ],
)
def test_refusals_are_answers_and_are_recorded(store: GraphStore, query: str, said: str) -> None:
    refusals: list[str] = []
    answer = _cypher(store, refusals)(query)
    assert answer.startswith("refused") and said in answer
    assert len(refusals) == 1 and query in refusals[0]


def test_a_store_that_stopped_answering_is_an_answer_not_a_crash(embedded_store: EmbeddedStore) -> None:
    cypher = _cypher(embedded_store, [])
    embedded_store.server.kill()
    answer = cypher("MATCH (n) RETURN count(n) AS n")
    assert answer.startswith("query failed") and "stopped" in answer


def test_a_syntax_error_is_an_answer(store: GraphStore) -> None:
    assert _cypher(store, [])("MATCH (n RETURN n").startswith("query failed")


def test_a_with_led_query_reads_as_any_other(store: GraphStore) -> None:
    answer = _cypher(store, [])("WITH 2 AS x UNWIND range(1, x) AS i RETURN x, i")
    assert not answer.startswith(("refused", "query failed")), answer
    assert answer.count('"i"') == 2 and "CALL {" not in answer
