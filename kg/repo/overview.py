"""The graph at a glance, for `chiplore status`."""

from __future__ import annotations

from pydantic import BaseModel

from chiplore.kg.models import Upgrade
from chiplore.kg.repo.design_counts import status_counts
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import active_toolchain, toolchains
from chiplore.kg.repo.upgrades import get_upgrade
from chiplore.kg.schema import schema_version
from chiplore.kg.store import GraphStore


class KernelSummary(BaseModel):
    name: str
    designs: int
    accepted: int
    best: str | None
    device_s: float


class Overview(BaseModel):
    schema_version: int
    target: str
    registered: bool
    active_toolchain: str | None
    toolchains: list[dict[str, str]]
    counts: dict[str, int]
    kernels: list[KernelSummary]
    device_s: float  # all device time charged, microbenchmarks included
    unfinished_upgrade: tuple[str, str] | None = None  # (from, to) of an upgrade stopped part-way, to run again


def overview(store: GraphStore, target: str) -> Overview:
    rows = store.read(
        "MATCH (k:Kernel {target: $target}) OPTIONAL MATCH (k)-[:BEST]->(b:DesignNode) "
        "RETURN k.name AS name, b.id AS best, properties(k) AS stored ORDER BY name",
        {"target": target},
    )
    spent = {
        row["consumer"]: row["device_s"]
        for row in store.read("MATCH (l:DeviceLedger) RETURN l.consumer AS consumer, l.device_s AS device_s")
    }
    kernels = [
        KernelSummary.model_validate(
            {
                "name": row["name"],
                "best": row["best"],
                **_kernel_totals(store, row["name"], row["stored"]),
                "device_s": spent.get(row["name"], 0.0),
            }
        )
        for row in rows
    ]
    registered = bool(store.read("MATCH (t:Target {name: $target}) RETURN t.name AS name", {"target": target}))
    active, versions = active_toolchain(store, target), toolchains(store, target)
    return Overview(
        schema_version=schema_version(store),
        target=target,
        registered=registered,
        active_toolchain=active,
        toolchains=versions,
        counts=count_by_label(store),
        kernels=kernels,
        device_s=sum(spent.values()),
        unfinished_upgrade=_unfinished_upgrade(store, target, active, [t["version"] for t in versions]),
    )


def _unfinished_upgrade(
    store: GraphStore, target: str, active: str | None, versions: list[str]
) -> tuple[str, str] | None:
    """An upgrade to the active version that a Ctrl-C or a kill stopped part-way: the version is active
    already while BESTs and facts may still be the old one's."""
    if active is None:
        return None
    for version in reversed(versions[: versions.index(active)] if active in versions else []):  # newest first
        upgrade = get_upgrade(store, Upgrade.id_of(target, version, active))
        if upgrade is not None and upgrade.status == "running":
            return version, active
    return None


def _kernel_totals(store: GraphStore, kernel: str, stored: dict[str, object]) -> dict[str, int]:
    counts = status_counts(store, kernel, stored)
    return {"designs": sum(counts.values()), "accepted": counts.get("accepted", 0)}
