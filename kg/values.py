"""Turns driver-specific result values (nodes, relationships, paths) into plain Python data."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import neo4j.graph
from falkordb.edge import Edge as FalkorEdge
from falkordb.node import Node as FalkorNode
from falkordb.path import Path as FalkorPath


def plain(value: Any) -> Any:
    """A JSON-friendly copy of a result value: nodes become {"_labels", **props}, and so on."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, neo4j.graph.Node):
        return {"_labels": sorted(value.labels), **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Relationship):
        return {"_type": value.type, **{k: plain(v) for k, v in value.items()}}
    if isinstance(value, neo4j.graph.Path):  # nodes and the relationships between them, in turn
        return _alternating([plain(n) for n in value.nodes], [plain(r) for r in value.relationships])
    if isinstance(value, FalkorNode):
        return {
            "_labels": sorted(value.labels or []),
            **{k: plain(v) for k, v in value.properties.items()},
        }
    if isinstance(value, FalkorEdge):
        return {"_type": value.relation, **{k: plain(v) for k, v in value.properties.items()}}
    if isinstance(value, FalkorPath):
        return _alternating([plain(n) for n in value.nodes()], [plain(r) for r in value.edges()])
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    # Temporal and spatial driver types: their ISO text is the one representation we use.
    iso = getattr(value, "iso_format", None)
    return iso() if callable(iso) else str(value)


def _alternating(nodes: list[Any], relationships: list[Any]) -> list[Any]:
    """A path as [node, relationship, node, ...]: the same on both stores (their ids are not)."""
    out: list[Any] = nodes[:1]
    for relationship, node in zip(relationships, nodes[1:], strict=True):
        out += [relationship, node]
    return out


def non_finite(value: Any, path: str = "") -> str | None:
    """Where a parameter holds NaN or an infinity (`rows[0].props.ci_low`), or None: FalkorDB's
    parameter header has no spelling for them, and a graph fact that is not a number says nothing."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{path} = {value}"
    if isinstance(value, Mapping):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((found for key, item in items if (found := non_finite(item, key)) is not None), None)
