"""Kernels and their Design Trees: designs, kernel versions, CONSULTED facts, BEST."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from chiplore.core.clock import to_iso
from chiplore.core.errors import StoreError
from chiplore.kg.models import UNFINISHED, Activity, DesignNode, DesignStatus, Kernel, KernelVersion
from chiplore.kg.processes import owner_runs
from chiplore.kg.repo.design_counts import moved, moved_if_found, recount_if_unmarked
from chiplore.kg.repo.nodes import upsert
from chiplore.kg.store import GraphStore


def register_kernel(store: GraphStore, kernel: Kernel) -> Kernel:
    upsert(store, [kernel])
    recount_if_unmarked(store, kernel.name)
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
        ("", "MERGE (k)-[:ROOT]->(d)")
        if parent is None
        else ("MATCH (p:DesignNode {id: $parent})", "MERGE (d)-[:CHILD_OF]->(p)")
    )
    store.write(
        f"MATCH (a:Activity {{id: $activity}}) MATCH (k:Kernel {{name: $kernel}}) {parent_match} "
        "MERGE (v:KernelVersion {sha: $sha}) SET v += $version "
        f"MERGE (d:DesignNode {{id: $id}}) ON CREATE SET d += $design, {moved('k', 'null', '$status')} "
        f"MERGE (d)-[:HAS_VERSION]->(v) MERGE (d)-[:CREATED_BY]->(a) {place} "
        "WITH d UNWIND $facts AS fact_id MATCH (f:Fact {fact_id: fact_id}) MERGE (d)-[:CONSULTED]->(f)",
        {"sha": version.sha, "version": version.properties(), "id": design.id, "design": design.properties(),
         "activity": activity.id, "kernel": design.kernel, "parent": parent, "facts": list(consulted),
         "status": design.status},
    )  # fmt: skip
    placed = store.read(
        "MATCH (d:DesignNode {id: $id})-[:HAS_VERSION]->(:KernelVersion) "
        "WHERE (d)-[:CHILD_OF]->() OR ()-[:ROOT]->(d) RETURN d.id AS id",
        {"id": design.id},
    )
    if not placed:
        raise DesignGone(f"design {design.id}: its parent, kernel or activity is not in the graph (was the graph "
                         "replaced or emptied under this run?)")  # fmt: skip
    return design


class ClaimLost(RuntimeError):
    """Another process has taken the design over (its owner's lease expired)."""


class BestMoved(RuntimeError):
    """The kernel's BEST is no longer the design a verdict was made against (another process accepted
    a design meanwhile): the verdict decides nothing; the candidate is judged again."""


class DesignGone(StoreError, KeyError):
    """No design of that id: unknown, or gone from under a run (a graph replaced by an import)."""

    def __str__(self) -> str:  # KeyError's would quote the sentence
        return str(self.args[0]) if self.args else ""


def update_design(store: GraphStore, design_id: str, *, held_by: str | None = None, **props: object) -> None:
    """Set some of a design's properties (status, measured cycles, reason, owner) in one statement;
    with `held_by`, only while that process still holds the design (ClaimLost otherwise)."""
    rows = store.write(
        "MATCH (d:DesignNode {id: $id}) WHERE $held IS NULL OR d.owner = $held WITH d, d.status AS old "
        "SET d += $props WITH d, old OPTIONAL MATCH (k:Kernel {name: d.kernel}) "
        f"{moved_if_found('k', 'old', 'd.status')} RETURN d.id AS id",
        {"id": design_id, "props": props, "held": held_by},
    )
    if not rows:
        if held_by is not None and get_design(store, design_id) is not None:
            raise ClaimLost(f"design {design_id} is no longer held by {held_by}")
        raise DesignGone(f"no design {design_id!r} in the graph: was the graph replaced or emptied under this run?")


def make_root(store: GraphStore, kernel: str, design_id: str, *, superseded: str) -> None:
    """`design_id`, added as a child of the kernel's root `superseded`, becomes the root in its place
    and SUPERSEDES it; the old root becomes its child, so the tree still holds the work done under it
    (BEST among it). One statement: a kill leaves the tree as it was or as it is meant to be."""
    rows = store.write(
        "MATCH (k:Kernel {name: $kernel})-[r:ROOT]->(old:DesignNode {id: $old}) "
        "MATCH (new:DesignNode {id: $new})-[c:CHILD_OF]->(old) "
        "DELETE r, c MERGE (k)-[:ROOT]->(new) MERGE (new)-[:SUPERSEDES]->(old) MERGE (old)-[:CHILD_OF]->(new) "
        "RETURN new.id AS id",
        {"kernel": kernel, "old": superseded, "new": design_id},
    )
    if not rows:
        raise KeyError(f"{design_id} is not a child of {kernel}'s root {superseded}")


def retire_root(store: GraphStore, kernel: str, design_id: str, *, held_by: str) -> None:
    """The kernel's root gives way to another (the caller adds it next, SUPERSEDES this one): its ROOT
    edge goes and the design stays, released, with its status and reason, for the record. Only while
    `held_by` holds it (ClaimLost otherwise)."""
    rows = store.write(
        "MATCH (:Kernel {name: $kernel})-[r:ROOT]->(d:DesignNode {id: $id}) WHERE d.owner = $held "
        "SET d.owner = '', d.lease_until = '' DELETE r RETURN d.id AS id",
        {"kernel": kernel, "id": design_id, "held": held_by},
    )
    if not rows:
        raise ClaimLost(f"root {design_id} of {kernel} is no longer held by {held_by}")


def claim_design(store: GraphStore, design_id: str, owner: str, until: str, *, held_by: str, held_until: str) -> bool:
    """Take a design over from `held_by` (whose lease reads `held_until`), atomically: False when
    someone else changed the claim first."""
    rows = store.write(
        "MATCH (d:DesignNode {id: $id}) "
        "WHERE coalesce(d.owner, '') = $held_by AND coalesce(d.lease_until, '') = $held_until "
        "SET d.owner = $owner, d.lease_until = $until RETURN d.id AS id",
        {"id": design_id, "owner": owner, "until": until, "held_by": held_by, "held_until": held_until},
    )
    return bool(rows)


def set_design_status(store: GraphStore, design_id: str, status: DesignStatus) -> None:
    update_design(store, design_id, status=status)


def set_best(store: GraphStore, kernel: str, design_id: str, *, held_by: str | None = None,
             replaces: str | None = None, **props: object) -> None:  # fmt: skip
    """Point the kernel's BEST at a design (there is exactly one BEST per kernel), and set the
    design's properties (its status, say) in the same statement: a kill between the two cannot
    leave an accepted design that is not BEST, or a BEST that is not accepted. With `held_by`, only
    while that process holds the design (ClaimLost otherwise); with `replaces`, only while that
    design is still BEST (BestMoved otherwise: another process on the graph accepted one meanwhile)."""
    rows = store.write(
        # the kernel's write lock first (set and cleared: nothing stays), so that two processes
        # replacing one BEST are ordered and the second sees the first's BEST
        "MATCH (k:Kernel {name: $kernel}) SET k.best_lock = true SET k.best_lock = null "
        "WITH k MATCH (d:DesignNode {id: $id}) WHERE $held IS NULL OR d.owner = $held "
        "OPTIONAL MATCH (k)-[:BEST]->(current:DesignNode) "
        "WITH k, d, current WHERE $replaces IS NULL OR current.id = $replaces "
        # (FalkorDB shows what `d += $props` set only past a WITH)
        f"WITH k, d, d.status AS was SET d += $props WITH k, d, was SET {moved('k', 'was', 'd.status')} "
        "WITH k, d OPTIONAL MATCH (k)-[old:BEST]->() DELETE old "
        "WITH DISTINCT k, d MERGE (k)-[:BEST]->(d) RETURN d.id AS id",
        {"kernel": kernel, "id": design_id, "props": props, "held": held_by, "replaces": replaces},
    )
    if not rows:
        design = get_design(store, design_id)
        if held_by is not None and design is not None and design.owner != held_by:
            raise ClaimLost(f"design {design_id} is no longer held by {held_by}")
        now = best_of(store, kernel) if replaces is not None and design is not None else None
        if now is not None and now.id != replaces:  # BEST did move: each retry of a verdict follows real progress
            raise BestMoved(f"{kernel}'s BEST is {now.id}, no longer {replaces}")
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


def get_design(store: GraphStore, design_id: str) -> DesignNode | None:
    rows = store.read("MATCH (d:DesignNode {id: $id}) RETURN d AS node", {"id": design_id})
    return DesignNode.from_properties(rows[0]["node"]) if rows else None


def count_unfinished(store: GraphStore) -> int:
    """Designs an interrupted run left between proposal and decision, over every kernel."""
    rows = store.read("MATCH (d:DesignNode) WHERE d.status IN $open RETURN count(d) AS n", {"open": list(UNFINISHED)})
    return int(rows[0]["n"]) if rows else 0


def unfinished_designs(store: GraphStore, kernel: str) -> list[tuple[DesignNode, str]]:
    """A kernel's designs between proposal and decision, oldest first, with their sources."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k})-[:HAS_VERSION]->(v:KernelVersion) "
        "WHERE d.status IN $open RETURN d AS node, v.source AS source ORDER BY d.created_at, d.id",
        {"k": kernel, "open": list(UNFINISHED)},
    )
    return [(DesignNode.from_properties(row["node"]), str(row["source"])) for row in rows]


def close_unfinished(store: GraphStore, toolchain: str, why: str) -> int:
    """Designs whose programs are `toolchain`'s and that were left between proposal and decision
    end as failed, with why (an upgrade closes them: no resumed run will judge them)."""
    rows = store.write(
        "MATCH (d:DesignNode)-[:HAS_VERSION]->(:KernelVersion {toolchain: $old}) WHERE d.status IN $open "
        "WITH DISTINCT d WITH d, d.status AS was SET d.status = 'failed', d.reason = $why "
        "WITH d.kernel AS kernel, was, d.status AS now, count(*) AS n OPTIONAL MATCH (k:Kernel {name: kernel}) "
        f"{moved_if_found('k', 'was', 'now', n='n')} RETURN sum(n) AS n",
        {"old": toolchain, "open": list(UNFINISHED), "why": why},
    )
    return int(rows[0]["n"]) if rows else 0


def tried(store: GraphStore, kernel: str, shas: Sequence[str]) -> set[str]:
    """Those of these program shas already tried for a kernel (a source is never a new design twice):
    a key lookup per sha, however many designs the kernel has."""
    if not shas:
        return set()
    rows = store.read(
        "UNWIND $shas AS sha MATCH (v:KernelVersion {sha: sha}) WHERE v.kernel = $k RETURN v.sha AS sha",
        {"k": kernel, "shas": sorted(set(shas))},
    )
    return {row["sha"] for row in rows}


def prediction_pairs(store: GraphStore, kernel: str) -> list[tuple[float, float]]:
    """(predicted, measured) cycles of each of a kernel's designs that has both, predicted by the pack's
    model before calibration (a graph written before designs kept that: the calibrated prediction)."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k}) WITH d, coalesce(d.model_cycles, d.predicted_cycles) AS p "
        "WHERE p IS NOT NULL AND d.measured_cycles IS NOT NULL RETURN p, d.measured_cycles AS m",
        {"k": kernel},
    )
    return [(float(row["p"]), float(row["m"])) for row in rows]


def proposals_since_accept(store: GraphStore, kernel: str) -> int:
    """Designs of a kernel created since its last accepted one, and not accepted (the patience count)."""
    last = store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) RETURN max(d.created_at) AS last", {"k": kernel}
    )
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k}) WHERE d.status <> 'accepted' AND d.created_at > $last RETURN count(d) AS n",
        {"k": kernel, "last": (last[0]["last"] or "") if last else ""},
    )
    return int(rows[0]["n"]) if rows else 0


def architected_under(store: GraphStore, kernel: str, version: str) -> int:
    """How many designs the architect proposed for a kernel under a toolchain version."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k, role: 'architect'})-[:HAS_VERSION]->(:KernelVersion {toolchain: $v}) "
        "RETURN count(d) AS n",
        {"k": kernel, "v": version},
    )
    return int(rows[0]["n"]) if rows else 0


def kernels_with_root(store: GraphStore) -> list[str]:
    """The kernels that have a design tree."""
    return [row["k"] for row in store.read("MATCH (k:Kernel)-[:ROOT]->(:DesignNode) RETURN k.name AS k ORDER BY k")]


def any_best(store: GraphStore) -> bool:
    """Whether any kernel has a BEST yet."""
    return bool(store.read("MATCH (:Kernel)-[:BEST]->(d:DesignNode) RETURN d.id AS id LIMIT 1"))


def lineage_ids(store: GraphStore, kernel: str) -> set[str]:
    """The ids of BEST and every design above it (its lineage)."""
    rows = store.read(
        "MATCH (:Kernel {name: $k})-[:BEST]->(b:DesignNode) MATCH (b)-[:CHILD_OF*0..]->(d:DesignNode) "
        "RETURN d.id AS id",
        {"k": kernel},
    )
    return {row["id"] for row in rows}


def flag_designs_consulting_changed(store: GraphStore, target_toolchain_id: str, version: str) -> int:
    """Designs that consulted a fact of the toolchain `target_toolchain_id` which has since been
    superseded or retired are flagged with which facts (under `version`)."""
    rows = store.read(
        "MATCH (d:DesignNode)-[:CONSULTED]->(f:Fact)-[:UNDER|HOLDS_UNDER]->(:Toolchain {id: $old}) "
        "WHERE f.status IN ['superseded', 'retired'] "
        "RETURN d.id AS id, collect(DISTINCT f.fact_id) AS facts ORDER BY id",
        {"old": target_toolchain_id},
    )
    for row in rows:
        facts = sorted(row["facts"])
        update_design(
            store, row["id"], flagged=f"{version}: {len(facts)} consulted fact(s) changed: {', '.join(facts)}"
        )
    return len(rows)


def recent_failures(store: GraphStore, kernel: str, limit: int) -> list[dict[str, object]]:
    """A kernel's latest failed or screened-out designs: change and reason, newest first."""
    return store.read(
        "MATCH (d:DesignNode {kernel: $k}) WHERE d.status IN ['failed', 'screened_out'] "
        "RETURN d.change AS change, d.reason AS reason ORDER BY d.created_at DESC LIMIT $n",
        {"k": kernel, "n": limit},
    )


def renew_leases(store: GraphStore, kernels: Sequence[str], owner: str, until: str) -> int:
    """Extend to `until` the lease of every unfinished design of these kernels that `owner` holds (a
    heartbeat: a design waiting its turn for a device is not abandoned); how many it holds."""
    rows = store.write(
        "UNWIND $kernels AS kernel MATCH (d:DesignNode {kernel: kernel}) WHERE d.owner = $owner AND d.status IN $open "
        "SET d.lease_until = $until RETURN count(d) AS n",
        {"kernels": list(kernels), "owner": owner, "until": until, "open": list(UNFINISHED)},
    )
    return int(rows[0]["n"]) if rows else 0


def release_held(store: GraphStore, kernel: str, owner: str) -> int:
    """Drop `owner`'s claims on the kernel's unfinished designs (a run ending with designs it claimed and
    never reached: the next run of any process takes them at once, and no reader sees a finished run
    still holding work). How many were released."""
    rows = store.write(
        "MATCH (d:DesignNode {kernel: $kernel}) WHERE d.owner = $owner AND d.status IN $open "
        "SET d.owner = '', d.lease_until = '' RETURN count(d) AS n",
        {"kernel": kernel, "owner": owner, "open": list(UNFINISHED)},
    )
    return int(rows[0]["n"]) if rows else 0


def working_owners(store: GraphStore) -> list[str]:
    """The processes working on the graph now: each holds an unfinished design under a lease that has
    not expired and, when it is a process of this machine, still runs (owner `host:pid:tag`)."""
    rows = store.read(
        "MATCH (d:DesignNode) WHERE d.status IN $open AND d.owner <> '' AND d.lease_until > $now "
        "RETURN DISTINCT d.owner AS owner ORDER BY owner",
        {"open": list(UNFINISHED), "now": to_iso(datetime.now(UTC))},
    )
    return [str(row["owner"]) for row in rows if owner_runs(str(row["owner"]))]
