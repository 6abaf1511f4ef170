"""`chiplore mcp`: the knowledge graph served to any Model Context Protocol client over stdio, with
the official `mcp` SDK. Read-only by construction: every tool reads through the Session, and the
one that takes Cypher runs it on the guarded read path (`GraphStore.read_untrusted`: the planner
refuses writes, file loads and administration; a read transaction; a server-side timeout; row and
byte caps), refusing a write the way the LLM policy's Cypher tool does.

Tools: `cypher`, `named_query`, `list_queries`, `status`, `design_tree`, `best_program`,
`parameter_keys`. One Session serves every call, one call at a time (the SDK runs a synchronous
tool in a worker thread; a lock keeps the store's connection to one of them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from chiplore import queries as named_queries
from chiplore.core.errors import ChiploreError, WriteRefused
from chiplore.kg.guard import QueryRefused, QueryTimedOut, UntrustedLimits
from chiplore.session import Session

NAME = "chiplore"
ROW_CAP = 200  # rows a call returns by default; a client may ask for up to MAX_ROWS
MAX_ROWS = 1_000
MAX_BYTES = 1_000_000
WRITE_REFUSED = "refused: this server is read-only; the graph is written by chiplore's loop, not by its clients"
TIMEOUT_REMEDY = "start `chiplore mcp` with a longer --timeout"
INSTRUCTIONS = (
    "chiplore's knowledge graph of one accelerator: what it learnt (Claim, Measurement, LegalityRule, "
    "DocChunk, each UNDER the Toolchain it holds under) and what it tried (Kernel -ROOT-> DesignNode "
    "-CHILD_OF-> ..., Kernel -BEST-> DesignNode -HAS_VERSION-> KernelVersion {source}, DeviceRun, "
    "Comparison). Start with `status`, `list_queries` and `parameter_keys`; `cypher` runs read-only Cypher."
)
T = TypeVar("T")


def build_server(session: Session, *, timeout_s: float = 10.0) -> MCPServer:
    """An MCP server whose tools read `session`'s graph; nothing it offers writes."""
    server: MCPServer = MCPServer(NAME, instructions=INSTRUCTIONS, version=_version())
    lock = threading.Lock()

    def guarded(work: Callable[[], T]) -> T:
        """One call at a time; chiplore's own errors become the tool's error text (one line)."""
        with lock:
            try:
                return work()
            except WriteRefused:
                raise ToolError(WRITE_REFUSED) from None
            except QueryTimedOut as error:  # the remedy is this server's --timeout, not the CLI's variable
                raise ToolError(f"failed: {error.worded(TIMEOUT_REMEDY)}") from None
            except QueryRefused as error:
                raise ToolError(f"refused: {error}") from None
            except ChiploreError as error:
                raise ToolError(f"failed: {error}") from None

    @server.tool()
    def cypher(query: str, params: dict[str, Any] | None = None, max_rows: int = ROW_CAP) -> dict[str, Any]:
        """Run a read-only Cypher query on the graph. Writes, file loads and administration are refused;
        the server stops a query at the timeout; rows past max_rows (at most 1000) are cut and the
        answer says so."""
        if max_rows < 1:  # as the CLI's --max-rows: no answer is not an answer
            raise ToolError(f"refused: max_rows is {max_rows}; ask for 1 to {MAX_ROWS}")
        limits = UntrustedLimits(max_rows=min(max_rows, MAX_ROWS), max_bytes=MAX_BYTES, timeout_s=timeout_s)
        result = guarded(lambda: session.cypher(query, params or {}, limits=limits))
        return {"columns": result.columns, "rows": result.rows, "truncated": result.truncated,
                "cut_reason": result.cut_reason}  # fmt: skip

    @server.tool()
    def list_queries() -> list[dict[str, Any]]:
        """chiplore's named queries: each one's name, description and typed parameters."""
        return [{"name": q.name, "description": q.description,
                 "params": [{"name": p.name, "type": p.type, "required": p.required, "default": p.default}
                            for p in q.params]}
                for q in named_queries.load_all().values()]  # fmt: skip

    @server.tool()
    def named_query(name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run a named query (list_queries names them) with its typed parameters, read-only."""
        return guarded(lambda: session.query(name, params or {}))

    @server.tool()
    def status() -> list[dict[str, Any]]:
        """Each kernel's BEST against its baseline and bound under the active toolchain (cycles with
        a 95 % interval, speedup, device seconds), as `chiplore status --json` prints it."""
        return guarded(lambda: [k.model_dump() for k in session.status()])

    @server.tool()
    def design_tree(kernel: str) -> dict[str, Any]:
        """A kernel's Design Tree: every design with its role, status, cycles and change; BEST and
        the path to it marked."""
        return guarded(lambda: session.tree(kernel).as_record())

    @server.tool()
    def best_program(kernel: str) -> dict[str, Any]:
        """A kernel's BEST program (its source, with a header comment in `text`), its cycles and
        interval, speedup, ratio to the bound and lineage."""

        def read() -> dict[str, Any]:
            found = session.best(kernel)
            return {**found.model_dump(), "text": session.program_text(found)}

        return guarded(read)

    @server.tool()
    def parameter_keys() -> list[dict[str, Any]]:
        """The hardware parameter keys the graph holds (the values measurements-of takes), with unit,
        counts, latest value and meaning."""
        return guarded(session.parameter_keys)

    return server


def _version() -> str:
    from importlib.metadata import version

    return version("chiplore")


def serve_stdio(session: Session, *, timeout_s: float = 10.0) -> None:
    """Serve the session's graph over stdin/stdout until the client closes them."""
    build_server(session, timeout_s=timeout_s).run("stdio")
