"""Kernels and their Design Trees: designs, kernel versions, CONSULTED facts, BEST."""

from __future__ import annotations

from collections.abc import Sequence

from kg.models import Activity, DesignNode, DesignStatus, Kernel, KernelVersion
from kg.repo.nodes import upsert
from kg.store import GraphStore


def register_kernel(store: GraphStore, kernel: Kernel) -> Kernel:
    upsert(store, [kernel])
    return kernel


def add_design(
    store: GraphStore,
    design: DesignNode,
    *,
    version: KernelVersion,
    parent: str | None,
    activity: Activity,
    consulted: Sequence[str] = (),
) -> DesignNode:
    """Add a design under `parent` (or as the kernel's root) with its source and consulted facts.

    One statement, so a process killed half-way leaves either nothing or the whole design: never a
    design without its source or its place in the tree. The same source (by sha) is one
    KernelVersion however many designs point at it.
    """
    # The prerequisites are matched first: when one is missing the statement creates nothing.
    parent_match, place = (
        ("MATCH (k:Kernel {name: $kernel})", "MERGE (k)-[:ROOT]->(d)")
        if parent is None
        else ("MATCH (p:DesignNode {id: $parent})", "MERGE (d)-[:CHILD_OF]->(p)")
    )
    store.write(
        f"MATCH (a:Activity {{id: $activity}}) {parent_match} "
        "MERGE (v:KernelVersion {sha: $sha}) SET v += $version "
        "MERGE (d:DesignNode {id: $id}) SET d += $design "
        f"MERGE (d)-[:HAS_VERSION]->(v) MERGE (d)-[:CREATED_BY]->(a) {place} "
        "WITH d UNWIND $facts AS fact_id MATCH (f:Fact {fact_id: fact_id}) MERGE (d)-[:CONSULTED]->(f)",
        {"sha": version.sha, "version": version.properties(), "id": design.id, "design": design.properties(),
         "activity": activity.id, "kernel": design.kernel, "parent": parent, "facts": list(consulted)},
    )  # fmt: skip
    placed = store.read(
        "MATCH (d:DesignNode {id: $id})-[:HAS_VERSION]->(:KernelVersion) "
        "WHERE (d)-[:CHILD_OF]->() OR ()-[:ROOT]->(d) RETURN d.id AS id",
        {"id": design.id},
    )
    if not placed:
        raise KeyError(f"design {design.id}: its parent, kernel or activity is not in the graph")
    return design


def update_design(store: GraphStore, design_id: str, **props: object) -> None:
    """Set some of a design's properties (status, measured cycles, reason) in one statement."""
    rows = store.write(
        "MATCH (d:DesignNode {id: $id}) SET d += $props RETURN d.id AS id", {"id": design_id, "props": props}
    )
    if not rows:
        raise KeyError(f"no design {design_id!r}")


def set_design_status(store: GraphStore, design_id: str, status: DesignStatus) -> None:
    update_design(store, design_id, status=status)


def set_best(store: GraphStore, kernel: str, design_id: str, **props: object) -> None:
    """Point the kernel's BEST at a design (there is exactly one BEST per kernel), and set the
    design's properties (its status, say) in the same statement: a kill between the two cannot
    leave an accepted design that is not BEST, or a BEST that is not accepted."""
    rows = store.write(
        "MATCH (k:Kernel {name: $kernel}) MATCH (d:DesignNode {id: $id}) SET d += $props "
        "WITH k, d OPTIONAL MATCH (k)-[old:BEST]->() DELETE old "
        "WITH DISTINCT k, d MERGE (k)-[:BEST]->(d) RETURN d.id AS id",
        {"kernel": kernel, "id": design_id, "props": props},
    )
    if not rows:
        raise KeyError(f"no kernel {kernel!r} or design {design_id!r}")


def best_of(store: GraphStore, kernel: str) -> DesignNode | None:
    rows = store.read(
        "MATCH (:Kernel {name: $kernel})-[:BEST]->(d:DesignNode) RETURN d AS node",
        {"kernel": kernel},
    )
    return DesignNode.from_properties(rows[0]["node"]) if rows else None


def root_of(store: GraphStore, kernel: str) -> DesignNode | None:
    rows = store.read("MATCH (:Kernel {name: $kernel})-[:ROOT]->(d:DesignNode) RETURN d AS node", {"kernel": kernel})
    return DesignNode.from_properties(rows[0]["node"]) if rows else None


def source_of(store: GraphStore, design_id: str) -> str:
    """The program a design is (its KernelVersion's source)."""
    rows = store.read(
        "MATCH (:DesignNode {id: $id})-[:HAS_VERSION]->(v:KernelVersion) RETURN v.source AS source", {"id": design_id}
    )
    if not rows:
        raise KeyError(f"no design {design_id!r}")
    return str(rows[0]["source"])


def children_of(store: GraphStore, design_id: str) -> list[DesignNode]:
    rows = store.read(
        "MATCH (c:DesignNode)-[:CHILD_OF]->(:DesignNode {id: $id}) RETURN c AS node ORDER BY c.created_at, c.id",
        {"id": design_id},
    )
    return [DesignNode.from_properties(row["node"]) for row in rows]
