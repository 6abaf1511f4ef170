"""The graph as a Cypher script for Neo4j 5 (`cypher-shell -f graph.cypher`, or pasted into Neo4j
Browser): the schema's unique constraints, then batched MERGE statements of literal rows, one
statement per line ending in `;`. The same nodes and relationships, in the same order, as the
JSON-lines export (chiplore.kg.graph_io); values are written as Cypher literals, never as code."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from chiplore.core.clock import utc_now
from chiplore.kg.graph_io import (
    Exported,
    NodeLine,
    RelationshipLine,
    check_complete,
    iter_nodes,
    iter_relationships,
)
from chiplore.kg.schema import FACT_KEY, FACT_LABEL, NODE_KEYS

ROWS_PER_STATEMENT = 500


def literal(value: Any) -> str:
    """A Cypher literal of a property value (null, bool, number, string, list, map)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "(0.0/0.0)"
        if math.isinf(value):
            return "(1.0/0.0)" if value > 0 else "(-1.0/0.0)"
        return repr(value)
    if isinstance(value, str):
        # json's escapes (\\, \", \n, \uXXXX) are Cypher's too, in a double-quoted string
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name(key)}: {literal(item)}" for key, item in value.items()) + "}"
    raise TypeError(f"no Cypher literal for {type(value).__name__}")


def name(text: str) -> str:
    """A property name, backquoted (a backquote inside doubled)."""
    return "`" + str(text).replace("`", "``") + "`"


def export_cypher(store: Any, out: TextIO) -> Exported:
    """Write the graph as a Cypher script for Neo4j 5; checks that nothing was left behind."""
    done = Exported()
    out.write(f"// chiplore graph, exported {utc_now()} from the {store.backend} store: run it on an empty Neo4j 5\n")
    out.write("// database (cypher-shell -f FILE); `chiplore graph import` reads the JSON-lines export instead.\n")
    for label, key in [*NODE_KEYS.items(), (FACT_LABEL, FACT_KEY)]:
        constraint = f"chiplore_unique_{label}_{key}".lower()
        out.write(f"CREATE CONSTRAINT `{constraint}` IF NOT EXISTS FOR (n:`{label}`) REQUIRE n.`{key}` IS UNIQUE;\n")
    for group in _grouped(iter_nodes(store), lambda n: (n.label, *sorted(set(n.labels) - {n.label}))):
        first: NodeLine = group[0]
        extra = "".join(f" SET n:{label}" for label in sorted(set(first.labels) - {first.label}))
        rows = ", ".join("{key: " + literal(n.key) + ", props: " + literal(n.properties) + "}" for n in group)
        out.write(
            f"UNWIND [{rows}] AS row MERGE (n:{first.label} {{{NODE_KEYS[first.label]}: row.key}}) "
            f"SET n += row.props{extra};\n"
        )
        done.nodes += len(group)
    for group in _grouped(iter_relationships(store), lambda r: (r.source[0], r.type, r.target[0])):
        head: RelationshipLine = group[0]
        source, target = head.source[0], head.target[0]
        rows = ", ".join(
            "{a: " + literal(r.source[1]) + ", b: " + literal(r.target[1]) + ", props: " + literal(r.properties) + "}"
            for r in group
        )
        out.write(
            f"UNWIND [{rows}] AS row MATCH (a:{source} {{{NODE_KEYS[source]}: row.a}}) "
            f"MATCH (b:{target} {{{NODE_KEYS[target]}: row.b}}) MERGE (a)-[r:{head.type}]->(b) "
            "SET r += row.props;\n"
        )
        done.relationships += len(group)
    check_complete(store, done)
    return done


def _grouped(lines: Iterable[Any], group_of: Any) -> Iterator[list[Any]]:
    """Lines of one group, at most ROWS_PER_STATEMENT at a time (a group's lines need not be adjacent)."""
    waiting: dict[Any, list[Any]] = {}
    for line in lines:
        group = waiting.setdefault(group_of(line), [])
        group.append(line)
        if len(group) >= ROWS_PER_STATEMENT:
            yield waiting.pop(group_of(line))
    yield from waiting.values()


def statements(script: str) -> list[str]:
    """The statements of a script this module wrote (one per line, comments skipped)."""
    return [
        line.rstrip().removesuffix(";") for line in script.splitlines() if line.strip() and not line.startswith("//")
    ]
