"""Each kernel's designs counted by status, kept on its Kernel node.

`chiplore status` shows how many designs of each kernel are in each status. Counting them on every
call walks all of a kernel's designs (seconds at a million), so the counts are stored on the Kernel
(`designs_<status>`) and moved by the very statement that creates a design or changes its status
(the Cypher fragments below): a kill between the two cannot leave them apart. `designs_counted`
marks a kernel whose counts are exact; a graph written before the counters existed is recounted
once, when its kernel is next registered, and read by counting until then.
"""

from __future__ import annotations

from typing import get_args

from chiplore.kg.models import DesignStatus
from chiplore.kg.store import GraphStore

STATUSES: tuple[str, ...] = get_args(DesignStatus)


def counter(status: str) -> str:
    """The Kernel property that counts its designs in `status`."""
    return f"designs_{status}"


def moved(kernel: str, old: str, new: str, n: str = "1") -> str:
    """The SET items moving `n` designs' counts of `kernel` from status `old` to `new` (Cypher
    expressions; either may be null: a design created, or one whose status does not change)."""
    return ", ".join(
        f"{kernel}.{counter(s)} = coalesce({kernel}.{counter(s)}, 0) "
        f"+ CASE WHEN {new} = '{s}' THEN {n} ELSE 0 END - CASE WHEN {old} = '{s}' THEN {n} ELSE 0 END"
        for s in STATUSES
    )


def moved_if_found(kernel: str, old: str, new: str, n: str = "1") -> str:
    """`moved` for an OPTIONAL MATCHed kernel, which may be null (a design of no registered kernel)."""
    found = f"CASE WHEN {kernel} IS NULL THEN [] ELSE [{kernel}] END"
    return f"FOREACH (counted IN {found} | SET {moved('counted', old, new, n)})"


def recount(store: GraphStore, kernel: str | None = None) -> None:
    """Set the counts of one kernel (all kernels: None) from its designs, and mark them exact."""
    names = [kernel] if kernel else [row["name"] for row in store.read("MATCH (k:Kernel) RETURN k.name AS name")]
    for name in names:
        found = {row["status"]: row["n"] for row in _counted(store, name)}
        store.write(
            "MATCH (k:Kernel {name: $k}) SET k += $counts, k.designs_counted = true",
            {"k": name, "counts": {counter(s): found.get(s, 0) for s in STATUSES}},
        )


def recount_if_unmarked(store: GraphStore, kernel: str) -> None:
    """Recount a kernel whose counts are not marked exact (a graph from before the counters)."""
    if store.read("MATCH (k:Kernel {name: $k}) WHERE k.designs_counted IS NULL RETURN k.name AS name", {"k": kernel}):
        recount(store, kernel)


def status_counts(store: GraphStore, kernel: str, stored: dict[str, object] | None) -> dict[str, int]:
    """A kernel's designs by status (statuses with none left out): its stored counts when `stored`
    (the Kernel's properties) marks them exact, else counted."""
    if stored is not None and stored.get("designs_counted"):
        counts = {s: int(stored.get(counter(s)) or 0) for s in STATUSES}  # type: ignore[call-overload]
        return {s: n for s, n in sorted(counts.items()) if n}
    return {row["status"]: row["n"] for row in _counted(store, kernel)}


def _counted(store: GraphStore, kernel: str) -> list[dict[str, object]]:
    return store.read(
        "MATCH (d:DesignNode {kernel: $k}) RETURN d.status AS status, count(*) AS n ORDER BY status", {"k": kernel}
    )


def miscounted(store: GraphStore) -> list[str]:
    """Kernels whose stored counts differ from their designs (an integrity check)."""
    problems = []
    for row in store.read("MATCH (k:Kernel) WHERE k.designs_counted RETURN k.name AS name, properties(k) AS props"):
        stored = {s: int(row["props"].get(counter(s)) or 0) for s in STATUSES}
        actual = {s: 0 for s in STATUSES} | {r["status"]: int(r["n"]) for r in _counted(store, row["name"])}  # type: ignore[call-overload]
        if stored != actual:
            wrong = ", ".join(f"{s} {stored[s]} (is {actual[s]})" for s in STATUSES if stored[s] != actual[s])
            problems.append(f"kernel {row['name']}: stored design counts {wrong}")
    return problems
