"""What a user takes out of the graph: a design's program, BEST's lineage, the baseline a kernel is
compared with under a toolchain, the parameter keys the graph holds, and the few numbers a progress
line shows (`chiplore best`, `show`, `params`, the report and the progress lines)."""

from __future__ import annotations

from pydantic import BaseModel

from chiplore.kg.models import DesignNode
from chiplore.kg.store import GraphStore, Record


class Program(BaseModel):
    """A design and the program it is: its source, the source's sha and the toolchain it is written for."""

    design: DesignNode
    sha: str
    toolchain: str
    source: str
    parent: str | None


def designs_starting_with(store: GraphStore, prefix: str, limit: int = 6) -> list[str]:
    """The ids of designs that start with `prefix` (an id as `tree` prints it, cut to 10 characters),
    at most `limit`, in order: a unique prefix names one design."""
    rows = store.read(
        "MATCH (d:DesignNode) WHERE d.id STARTS WITH $prefix RETURN d.id AS id ORDER BY id LIMIT $limit",
        {"prefix": prefix, "limit": limit},
    )
    return [row["id"] for row in rows]


def program_of(store: GraphStore, design_id: str) -> Program | None:
    """The design with this exact id and its program, or None."""
    rows = store.read(
        "MATCH (d:DesignNode {id: $id})-[:HAS_VERSION]->(v:KernelVersion) OPTIONAL MATCH (d)-[:CHILD_OF]->(p) "
        "RETURN d AS node, v.sha AS sha, v.toolchain AS toolchain, v.source AS source, p.id AS parent",
        {"id": design_id},
    )
    if not rows:
        return None
    row = rows[0]
    return Program(
        design=DesignNode.from_properties(row["node"]),
        sha=row["sha"],
        toolchain=row["toolchain"],
        source=row["source"],
        parent=row["parent"],
    )


def lineage(store: GraphStore, kernel: str) -> list[DesignNode]:
    """BEST and every design above it, root first: the accepted path the loop took."""
    rows = store.read(
        "MATCH (:Kernel {name: $k})-[:BEST]->(b:DesignNode) MATCH (b)-[:CHILD_OF*0..]->(d:DesignNode) "
        "RETURN DISTINCT d AS node ORDER BY d.depth",
        {"k": kernel},
    )
    return [DesignNode.from_properties(row["node"]) for row in rows]


def baseline_under(store: GraphStore, kernel: str, version: str | None) -> str | None:
    """The id of the kernel's baseline as it runs under `version`: the design an upgrade re-validated
    (or the repair it made of it) when one moved the baseline there, else the Design Tree's root."""
    if version is not None:
        rows = store.read(
            "MATCH (v:Revalidation {kernel: $k, role: 'baseline', to_version: $version}) "
            "RETURN v.outcome AS outcome, v.design AS design, v.repaired_design AS repaired "
            "ORDER BY v.id LIMIT 1",
            {"k": kernel, "version": version},
        )
        if rows:
            row = rows[0]
            return row["repaired"] if row["outcome"] == "repaired" and row["repaired"] else row["design"]
    rows = store.read("MATCH (:Kernel {name: $k})-[:ROOT]->(d:DesignNode) RETURN d.id AS id", {"k": kernel})
    return rows[0]["id"] if rows else None


def kernel_names(store: GraphStore) -> list[str]:
    """The kernels the graph holds, by name."""
    return [row["name"] for row in store.read("MATCH (k:Kernel) RETURN k.name AS name ORDER BY name")]


def parameter_keys(store: GraphStore) -> list[Record]:
    """Every parameter key the graph holds (measured, or stated by a claim of the docs), with its unit,
    meaning, how many measurements and claims name it and the latest current value: the values
    `chiplore query measurements-of -p param=KEY` takes."""
    described = {
        row["key"]: row
        for row in store.read(
            "MATCH (p:HardwareParam) RETURN p.key AS key, p.unit AS unit, p.description AS description"
        )
    }
    measured = {
        row["key"]: row
        for row in store.read(
            "MATCH (m:Measurement) WITH m.param AS key, m ORDER BY m.measured_at "
            "RETURN key, count(m) AS measurements, last(collect(m.value)) AS latest, "
            "last(collect(m.unit)) AS unit, last(collect(m.status)) AS status"
        )
    }
    claimed = {
        row["key"]: row["claims"]
        for row in store.read("MATCH (c:Claim) WHERE c.param IS NOT NULL RETURN c.param AS key, count(c) AS claims")
    }
    keys = sorted(set(described) | set(measured) | set(claimed))
    return [
        {
            "key": key,
            "unit": (described.get(key) or measured.get(key) or {}).get("unit") or "",
            "measurements": (measured.get(key) or {}).get("measurements", 0),
            "latest": (measured.get(key) or {}).get("latest"),
            "status": (measured.get(key) or {}).get("status") or "",
            "claims": claimed.get(key, 0),
            "description": (described.get(key) or {}).get("description") or "",
        }
        for key in keys
    ]


class Snapshot(BaseModel):
    """The numbers a progress line shows: device time charged so far, and one kernel's BEST."""

    device_s: float
    best_design: str | None = None
    best_cycles: float | None = None


def snapshot(store: GraphStore, kernel: str | None = None) -> Snapshot:
    """Device seconds the ledger holds, and `kernel`'s BEST with its graded cycles (two small reads)."""
    spent = store.read("MATCH (l:DeviceLedger) RETURN sum(l.device_s) AS s")
    best = (
        store.read(
            "MATCH (:Kernel {name: $k})-[:BEST]->(d:DesignNode) RETURN d.id AS id, d.measured_cycles AS cycles",
            {"k": kernel},
        )
        if kernel
        else []
    )
    return Snapshot(
        device_s=float(spent[0]["s"] or 0.0) if spent else 0.0,
        best_design=best[0]["id"] if best else None,
        best_cycles=best[0]["cycles"] if best else None,
    )
