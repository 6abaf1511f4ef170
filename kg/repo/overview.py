"""The graph at a glance, for `chiplore status`."""

from __future__ import annotations

from pydantic import BaseModel

from kg.repo.nodes import count_by_label
from kg.repo.targets import active_toolchain, toolchains
from kg.schema import schema_version
from kg.store import GraphStore


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


def overview(store: GraphStore, target: str) -> Overview:
    rows = store.read(
        "MATCH (k:Kernel {target: $target}) OPTIONAL MATCH (k)-[:BEST]->(b:DesignNode) "
        "RETURN k.name AS name, b.id AS best ORDER BY name",
        {"target": target},
    )
    spent = {
        row["consumer"]: row["device_s"]
        for row in store.read("MATCH (l:DeviceLedger) RETURN l.consumer AS consumer, l.device_s AS device_s")
    }
    kernels = [
        KernelSummary.model_validate(
            {**row, **_kernel_totals(store, row["name"]), "device_s": spent.get(row["name"], 0.0)}
        )
        for row in rows
    ]
    registered = bool(store.read("MATCH (t:Target {name: $target}) RETURN t.name AS name", {"target": target}))
    return Overview(
        schema_version=schema_version(store),
        target=target,
        registered=registered,
        active_toolchain=active_toolchain(store, target),
        toolchains=toolchains(store, target),
        counts=count_by_label(store),
        kernels=kernels,
        device_s=sum(spent.values()),
    )


def _kernel_totals(store: GraphStore, kernel: str) -> dict[str, int]:
    designs = store.read(
        "MATCH (d:DesignNode {kernel: $kernel}) "
        "RETURN count(d) AS designs, sum(CASE WHEN d.status = 'accepted' THEN 1 ELSE 0 END) AS accepted",
        {"kernel": kernel},
    )[0]
    return {"designs": designs["designs"], "accepted": designs["accepted"] or 0}
