"""Targets and their toolchains: registration, the PRECEDES chain, the ACTIVE version."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from chiplore.kg.models import Target, Toolchain
from chiplore.kg.repo.nodes import Link, Ref, link, unlink_all, upsert
from chiplore.kg.store import GraphStore


def register_target(store: GraphStore, name: str, versions: Sequence[str], active: str, description: str = "") -> None:
    """Register a target with its known toolchain versions (oldest first) and the active one.

    Idempotent; an already active version that differs from `active` is not moved here
    (that is a toolchain upgrade, which marks facts stale).
    """
    if active not in versions:
        raise ValueError(f"active toolchain {active!r} is not among {list(versions)}")
    target = Target(name=name, description=description)
    toolchains = [
        Toolchain(id=Toolchain.id_of(name, v), target=name, version=v, ordinal=i) for i, v in enumerate(versions)
    ]
    upsert(store, [target])
    # Statuses of toolchains already in the graph are kept; only new ones get "known".
    store.write_rows(
        "UNWIND $rows AS row MERGE (t:Toolchain {id: row.id}) "
        "ON CREATE SET t.target = row.target, t.version = row.version, t.status = 'known' "
        "SET t.ordinal = row.ordinal",
        [{"id": t.id, "target": name, "version": t.version, "ordinal": t.ordinal} for t in toolchains],
    )
    links = [Link(Ref.to(target), "HAS_TOOLCHAIN", Ref.to(t)) for t in toolchains]
    links += [Link(Ref.to(a), "PRECEDES", Ref.to(b)) for a, b in itertools.pairwise(toolchains)]
    link(store, links)
    if active_toolchain(store, name) is None:
        set_active_toolchain(store, name, active)


def set_active_toolchain(store: GraphStore, target: str, version: str) -> None:
    """Move ACTIVE to `version`; the previous active toolchain becomes `known`."""
    ref = Ref("Target", target)
    store.write(
        "MATCH (:Target {name: $target})-[:ACTIVE]->(t:Toolchain) SET t.status = 'known'",
        {"target": target},
    )
    unlink_all(store, ref, "ACTIVE")
    toolchain_id = Toolchain.id_of(target, version)
    rows = store.write(
        "MATCH (t:Toolchain {id: $id}) SET t.status = 'active' RETURN t.id AS id",
        {"id": toolchain_id},
    )
    if not rows:
        raise ValueError(f"toolchain {version!r} of {target!r} is not registered")
    link(store, [Link(ref, "ACTIVE", Ref("Toolchain", toolchain_id))])


def active_toolchain(store: GraphStore, target: str) -> str | None:
    rows = store.read(
        "MATCH (:Target {name: $target})-[:ACTIVE]->(t:Toolchain) RETURN t.version AS version",
        {"target": target},
    )
    return rows[0]["version"] if rows else None


def toolchains(store: GraphStore, target: str) -> list[dict[str, str]]:
    return store.read(
        "MATCH (:Target {name: $target})-[:HAS_TOOLCHAIN]->(t:Toolchain) "
        "RETURN t.version AS version, t.status AS status ORDER BY t.ordinal",
        {"target": target},
    )


def learnt_chip(store: GraphStore, target: str) -> tuple[str, str] | None:
    """The chip the graph learnt (the id its devices reported, and where it came from), or None when no
    learn recorded one (a fresh graph, or one a chiplore that recorded none learnt)."""
    rows = store.read("MATCH (t:Target {name: $name}) WHERE t.chip IS NOT NULL RETURN t.chip AS id, "
                      "coalesce(t.chip_note, '') AS note", {"name": target})  # fmt: skip
    return (rows[0]["id"], rows[0]["note"]) if rows else None


def record_chip(store: GraphStore, target: str, chip: str, note: str) -> None:
    """The chip the graph learns (its first learn records it; a note where the id comes from may change)."""
    store.write("MATCH (t:Target {name: $name}) SET t.chip = $chip, t.chip_note = $note",
                {"name": target, "chip": chip, "note": note})  # fmt: skip
