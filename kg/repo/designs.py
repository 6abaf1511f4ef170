"""Kernels and their Design Trees: designs, kernel versions, CONSULTED facts, BEST."""

from __future__ import annotations

from collections.abc import Sequence

from kg.models import Activity, DesignNode, DesignStatus, Kernel, KernelVersion
from kg.repo.nodes import Link, Ref, link, unlink_all, upsert
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

    The same source (by sha) is one KernelVersion however many designs point at it.
    """
    upsert(store, [version, design])
    ref = Ref.to(design)
    links = [Link(ref, "HAS_VERSION", Ref.to(version)), Link(ref, "CREATED_BY", Ref.to(activity))]
    if parent is None:
        links.append(Link(Ref("Kernel", design.kernel), "ROOT", ref))
    else:
        links.append(Link(ref, "CHILD_OF", Ref("DesignNode", parent)))
    link(store, links)
    if consulted:
        store.write(
            "MATCH (d:DesignNode {id: $design}) UNWIND $facts AS fact_id "
            "MATCH (f:Fact {fact_id: fact_id}) MERGE (d)-[:CONSULTED]->(f)",
            {"design": design.id, "facts": list(consulted)},
        )
    return design


def set_design_status(store: GraphStore, design_id: str, status: DesignStatus) -> None:
    rows = store.write(
        "MATCH (d:DesignNode {id: $id}) SET d.status = $status RETURN d.id AS id",
        {"id": design_id, "status": status},
    )
    if not rows:
        raise KeyError(f"no design {design_id!r}")


def set_best(store: GraphStore, kernel: str, design_id: str) -> None:
    """Point the kernel's BEST at a design (there is exactly one BEST per kernel)."""
    unlink_all(store, Ref("Kernel", kernel), "BEST")
    link(store, [Link(Ref("Kernel", kernel), "BEST", Ref("DesignNode", design_id))])


def best_of(store: GraphStore, kernel: str) -> DesignNode | None:
    rows = store.read(
        "MATCH (:Kernel {name: $kernel})-[:BEST]->(d:DesignNode) RETURN d AS node",
        {"kernel": kernel},
    )
    return DesignNode.from_properties(rows[0]["node"]) if rows else None


def children_of(store: GraphStore, design_id: str) -> list[DesignNode]:
    rows = store.read(
        "MATCH (c:DesignNode)-[:CHILD_OF]->(:DesignNode {id: $id}) RETURN c AS node ORDER BY c.created_at, c.id",
        {"id": design_id},
    )
    return [DesignNode.from_properties(row["node"]) for row in rows]
