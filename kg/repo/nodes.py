"""Generic, batched node upserts and relationship links over the schema's labels.

Labels and relationship types come from fixed allowlists (they cannot be Cypher parameters);
every value travels as a parameter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chiplore.kg.models import GraphNode
from chiplore.kg.schema import FACT_LABEL, FACT_LABELS, NODE_KEYS
from chiplore.kg.store import GraphStore

RELATIONSHIPS = frozenset(
    {
        "HAS_TOOLCHAIN", "ACTIVE", "PRECEDES", "HAS_CHUNK", "UNDER", "MENTIONED_IN", "ABOUT",
        "CITES", "CHECKED_BY", "USED", "OF", "FROM", "CONFIRMS", "CONTRADICTS", "DERIVED_FROM",
        "EMITTED_FOR", "HOLDS_UNDER", "SUPERSEDES", "ROOT", "BEST", "CHILD_OF", "HAS_VERSION",
        "CONSULTED", "RAN", "CANDIDATE", "INCUMBENT", "CREATED_BY", "REVALIDATES", "REPAIRED_AS",
        "CONSTRAINED_BY", "STATES", "ON",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Ref:
    """A pointer to an existing node: its label and key value."""

    label: str
    key: str

    @classmethod
    def to(cls, node: GraphNode) -> Ref:
        return cls(node.label, node.node_key)


@dataclass(frozen=True)
class Link:
    source: Ref
    type: str
    target: Ref
    properties: Mapping[str, Any] = field(default_factory=dict)


def _checked_label(label: str) -> str:
    if label not in NODE_KEYS:
        raise ValueError(f"unknown node label {label!r}")
    return label


def upsert(store: GraphStore, nodes: Sequence[GraphNode]) -> int:
    """Create or update nodes by key (MERGE), in one batched statement per label."""
    by_label: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in nodes:
        by_label[node.label].append({"key": node.node_key, "props": node.properties()})
    for label, rows in by_label.items():
        key = NODE_KEYS[_checked_label(label)]
        extra = f" SET n:{FACT_LABEL}" if label in FACT_LABELS else ""
        store.write_rows(
            f"UNWIND $rows AS row MERGE (n:{label} {{{key}: row.key}}) SET n += row.props{extra}",
            rows,
        )
    return len(nodes)


def link(store: GraphStore, links: Sequence[Link]) -> int:
    """MERGE relationships between existing nodes, batched per (source label, type, target label)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in links:
        if item.type not in RELATIONSHIPS:
            raise ValueError(f"unknown relationship type {item.type!r}")
        group = (_checked_label(item.source.label), item.type, _checked_label(item.target.label))
        groups[group].append({"a": item.source.key, "b": item.target.key, "props": dict(item.properties)})
    for (source_label, rel, target_label), rows in groups.items():
        store.write_rows(
            f"UNWIND $rows AS row "
            f"MATCH (a:{source_label} {{{NODE_KEYS[source_label]}: row.a}}) "
            f"MATCH (b:{target_label} {{{NODE_KEYS[target_label]}: row.b}}) "
            f"MERGE (a)-[r:{rel}]->(b) SET r += row.props",
            rows,
        )
    return len(links)


def unlink_all(store: GraphStore, source: Ref, rel: str) -> None:
    """Remove every outgoing `rel` of a node (for single-valued links such as BEST and ACTIVE)."""
    if rel not in RELATIONSHIPS:
        raise ValueError(f"unknown relationship type {rel!r}")
    label = _checked_label(source.label)
    store.write(
        f"MATCH (a:{label} {{{NODE_KEYS[label]}: $key}})-[r:{rel}]->() DELETE r",
        {"key": source.key},
    )


def count_by_label(store: GraphStore) -> dict[str, int]:
    """How many nodes of each schema label the graph holds (zero included)."""
    counts = {}
    for label in NODE_KEYS:
        if label == "SchemaVersion":
            continue
        counts[label] = int(store.read(f"MATCH (n:{label}) RETURN count(n) AS c")[0]["c"])
    return counts
