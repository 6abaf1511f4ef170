"""The GraphStore interface every backend implements; callers never branch on the backend."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from chiplore.core.errors import QueryError
from chiplore.kg.dialect import Dialect
from chiplore.kg.guard import DEFAULT_LIMITS, GuardedResult, UntrustedLimits
from chiplore.kg.plans import PlanNode
from chiplore.kg.values import non_finite

Record = dict[str, Any]
Params = Mapping[str, Any]

DEFAULT_BATCH_SIZE = 2_000


class ServerInfo(BaseModel):
    """What `chiplore db check` reports about the server behind a store."""

    backend: str
    address: str
    server_version: str
    database: str


@runtime_checkable
class GraphStore(Protocol):
    """A property graph that speaks Cypher.

    Values always travel as parameters, never formatted into the query text.
    Every `write` is one statement in one transaction: it applies entirely or not at all.
    """

    backend: str
    dialect: Dialect

    def read(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        """Run a query in a read-only transaction; a write inside it raises WriteRefused."""
        ...

    def write(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        """Run one statement in one write transaction and return its records."""
        ...

    def read_untrusted(
        self, query: str, params: Params | None = None, *, limits: UntrustedLimits = DEFAULT_LIMITS
    ) -> GuardedResult:
        """Run a query a person or a model wrote: checked by the backend's planner first (a write,
        LOAD CSV, an administration command or a procedure outside chiplore.kg.guard's list raises
        WriteRefused or QueryRefused), then read-only under `limits`: the server stops it at
        `timeout_s`, and rows past `max_rows` or `max_bytes` are cut while they arrive (the result
        says so). Called by `chiplore cypher` and the LLM's Cypher tool."""
        ...

    def explain(self, query: str, params: Params | None = None) -> PlanNode:
        """The backend's plan for a query, without running it (EXPLAIN / GRAPH.EXPLAIN)."""
        ...

    def write_rows(
        self,
        query: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        params: Params | None = None,
    ) -> int:
        """Run an `UNWIND $rows AS row ...` statement over rows in batches, one transaction each."""
        ...

    def ensure_unique(self, label: str, prop: str) -> bool:
        """Make `prop` unique (and indexed) on nodes of `label`; True when it was created now."""
        ...

    def ensure_index(self, label: str, prop: str) -> bool:
        """Index `prop` on nodes of `label`; True when it was created now."""
        ...

    def schema_objects(self) -> list[Record]:
        """The constraints and indexes in force, as {kind, label, property} records."""
        ...

    def compact(self) -> None:
        """Fold the store's write log into a snapshot (the embedded store's append-only file; a
        no-op on Neo4j). Called after schema changes, so that they are not replayed and re-logged."""
        ...

    def server_info(self) -> ServerInfo:
        """Contact the server and describe it; raises StoreUnavailable when it does not answer."""
        ...

    def delete_all(self) -> None:
        """Remove every node and relationship (schema stays). For tests and benchmarks."""
        ...

    def close(self) -> None:
        """Release connections and, for the embedded store, the server process it started."""
        ...

    def __enter__(self) -> GraphStore: ...

    def __exit__(self, *exc: object) -> None: ...


def write_in_batches(
    store: GraphStore,
    query: str,
    rows: Sequence[Mapping[str, Any]],
    batch_size: int,
    params: Params | None,
) -> int:
    """The one implementation of GraphStore.write_rows: `$rows` is each batch, one write each."""
    for batch in batches(rows, batch_size):
        store.write(query, {**(params or {}), "rows": batch})
    return len(rows)


def batches(rows: Sequence[Mapping[str, Any]], size: int) -> Iterator[list[Mapping[str, Any]]]:
    """Split rows into lists of at most `size`, in order."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    for start in range(0, len(rows), size):
        yield list(rows[start : start + size])


def finite_params(params: Params | None, query: str) -> dict[str, Any]:
    """The parameters as a dict (texts `without_nul`), or QueryError naming one that is NaN or infinite: a
    measurement that is not a number says nothing, and FalkorDB would only report a parse error at its
    parameter header."""
    values = dict(params or {})
    where = non_finite(values)
    if where is not None:
        first_line = next((line.strip() for line in query.splitlines() if line.strip()), "")[:80]
        raise QueryError(f"parameter {where} is not a finite number; the graph stores none (in: {first_line})")
    return {name: without_nul(value) for name, value in values.items()}


def int64(value: int) -> bool:
    """Whether an integer fits what both stores hold (64-bit signed: they cap a larger one silently)."""
    return -(2**63) <= value < 2**63


NUL_STANDIN = "\ufffd"  # what a NUL character of a text is stored as


def without_nul(value: Any) -> Any:
    """A value with every NUL character of its texts replaced by U+FFFD, on both stores alike: FalkorDB
    reads its parameters from the query's text, where a NUL ends it (a model's answer holding one
    failed the statement that records it, and the run)."""
    if isinstance(value, str):
        return value.replace("\0", NUL_STANDIN) if "\0" in value else value
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    if isinstance(value, dict):
        return {key: without_nul(item) for key, item in value.items()}
    return value
