"""The named-query loader: headers, parameter typing, and what a bad call is told."""

from __future__ import annotations

import pytest

from chiplore import queries
from chiplore.core.errors import QueryError, QueryParameterError, UnknownQuery

REQUIRED = {
    "rules-in-force",
    "stale-facts",
    "contradicted-claims",
    "measurements-of",
    "best-lineage",
    "accepted-changes",
    "device-time-by-kernel",
    "designs-consulting",
    "toolchain-diff",
    "llm-usage",
    "llm-cost-per-accepted-change",
}


def test_every_required_query_ships_with_a_description() -> None:
    catalogue = queries.load_all()
    assert set(catalogue) >= REQUIRED
    for query in catalogue.values():
        assert query.description and query.text
        assert "//" not in query.text.splitlines()[0], "the header must not leak into the query"


def test_header_declares_types_and_defaults() -> None:
    query = queries.parse(
        "// name: q\n// params: kernel:str, limit:int=5, ratio:float=1.5, strict:bool=false\n"
        "// description: d\nMATCH (n) RETURN n LIMIT $limit",
        "q.cypher",
    )
    assert query.bind({"kernel": "k"}) == {"kernel": "k", "limit": 5, "ratio": 1.5, "strict": False}
    assert query.bind({"kernel": "k", "limit": "7", "ratio": "2", "strict": "yes"}) == {
        "kernel": "k",
        "limit": 7,
        "ratio": 2.0,
        "strict": True,
    }


def test_missing_unknown_and_ill_typed_parameters_are_explained() -> None:
    query = queries.get("designs-consulting")
    with pytest.raises(QueryParameterError, match="needs parameter 'fact'"):
        query.bind({})
    with pytest.raises(QueryParameterError, match="no parameter 'kernel'"):
        query.bind({"fact": "x", "kernel": "y"})
    with pytest.raises(QueryParameterError, match="'limit' must be int"):
        query.bind({"fact": "x", "limit": "many"})
    # FalkorDB's LIMIT of 2**32 returned no rows; an MCP client's 5 for a text matched nothing, silently
    with pytest.raises(QueryParameterError, match="'limit' must be an int of at most 32 bits"):
        query.bind({"fact": "x", "limit": str(2**32)})
    with pytest.raises(QueryParameterError, match="'fact' must be str, got 5"):
        query.bind({"fact": 5})


def test_unknown_query_lists_the_known_ones() -> None:
    with pytest.raises(UnknownQuery, match="best-lineage"):
        queries.get("best-linage")


@pytest.mark.parametrize(
    "source",
    [
        "// params:\n// description: no name\nRETURN 1",
        "// name: q\n// description: no params line\nRETURN 1",
        "// name: q\n// params: 1bad:str\n// description: d\nRETURN 1",
        "// name: q\n// params: x:list\n// description: d\nRETURN 1",
    ],
)
def test_malformed_headers_are_rejected(source: str) -> None:
    with pytest.raises(QueryError):
        queries.parse(source, "bad.cypher")
