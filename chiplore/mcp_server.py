"""`chiplore mcp`: the knowledge graph served to any Model Context Protocol client over stdio, with
the official `mcp` SDK. Read-only by construction: every tool reads through the Session, and the
one that takes Cypher runs it on the guarded read path (`GraphStore.read_untrusted`: the planner
refuses writes, file loads and administration; a read transaction; a server-side timeout; row and
byte caps), refusing a write the way the LLM policy's Cypher tool does.

Tools: `cypher`, `named_query`, `list_queries`, `status`, `design_tree`, `best_program`,
`parameter_keys`. One Session serves every call, one call at a time (the SDK runs a synchronous
tool in a worker thread; a lock keeps the store's connection to one of them). A client's mistakes
get an answer in one line: arguments that do not fit a tool's schema are named with what each should
be (the SDK's text is pydantic's multi-line report), an argument the tool does not take is refused
(the SDK dropped it silently), and a line that is no JSON-RPC message gets
JSON-RPC's parse or invalid-request error (the SDK's stdio transport drops it unanswered, so the
client waits on it for ever).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from chiplore import queries as named_queries
from chiplore.core.errors import ChiploreError, WriteRefused
from chiplore.core.jsonable import finite
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
SHOWN_CHARS = 40  # of a refused argument's value, in the one-line answer


class ChiploreMCP(MCPServer):
    """The SDK's server, with a tool's refused arguments said in one line and a line on stdin that
    is no JSON-RPC message answered."""

    async def run_stdio_async(self) -> None:
        async with stdio_server() as (read, write):
            lowlevel = self._lowlevel_server  # as the SDK's own stdio run, reading through the answering stream
            await lowlevel.run(AnsweringBadLines(read, write), write, lowlevel.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None) -> Any:
        schema = next((tool.input_schema for tool in await self.list_tools() if tool.name == name), None)
        takes = list((schema or {}).get("properties", {}))
        unknown = sorted(set(arguments) - set(takes)) if schema is not None else []
        # these refusals leave before the SDK frames a tool's error: framed here as it frames the others
        framing = f"Error executing tool {name}: "
        if unknown:  # a misnamed argument would be dropped, and the call answered as if it had not been given
            raise ToolError(f"{framing}refused: {name}: no argument {unknown[0]!r} "
                            f"(it takes {', '.join(takes) or 'none'})")  # fmt: skip
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error, UnexpectedToolError) or not isinstance(error.__cause__, ValidationError):
                raise
            # from the validation error: the SDK then logs the refused fields' names, not the caller's values
            raise ToolError(f"{framing}refused: {name}: {arguments_problem(error.__cause__)}") from error.__cause__


def arguments_problem(error: ValidationError) -> str:
    """Each refused argument with what it should be, on one line: `query: Input should be a valid
    string (got 5)`; a missing one is `query: Field required`."""
    parts = []
    for problem in error.errors():
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        said = f"{where}: {problem['msg']}"
        if problem["type"] != "missing":
            shown = repr(problem.get("input"))
            said += f" (got {shown[:SHOWN_CHARS]}{'...' if len(shown) > SHOWN_CHARS else ''})"
        parts.append(said)
    return "; ".join(parts)


def build_server(session: Session, *, timeout_s: float = 10.0) -> MCPServer:
    """An MCP server whose tools read `session`'s graph; nothing it offers writes."""
    server: MCPServer = ChiploreMCP(NAME, instructions=INSTRUCTIONS, version=_version())
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
        # as the CLI's --max-rows: no answer is not an answer, and more than the cap was cut without a word
        if not 1 <= max_rows <= MAX_ROWS:
            raise ToolError(f"refused: max_rows is {max_rows}; ask for 1 to {MAX_ROWS}")
        limits = UntrustedLimits(max_rows=max_rows, max_bytes=MAX_BYTES, timeout_s=timeout_s)
        result = guarded(lambda: session.cypher(query, params or {}, limits=limits))
        return {"columns": result.columns, "rows": finite(result.rows), "truncated": result.truncated,
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
        return guarded(lambda: finite(session.query(name, params or {})))

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


class AnsweringBadLines:
    """The stdio transport's read stream, minus the lines it could not read as JSON-RPC messages:
    each is answered on the write stream with JSON-RPC's error (parse error for no JSON, invalid
    request for JSON of another shape; with the line's id where it has one) and skipped."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner, self._write = inner, write

    @property
    def last_context(self) -> Any:  # the dispatcher reads the sender's context here
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = bad_line_answer(item)
            if answer is not None:
                await self._write.send(SessionMessage(answer))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringBadLines:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringBadLines:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:  # fmt: skip
        await self.aclose()


def bad_line_answer(error: Exception) -> JSONRPCError | None:
    """JSON-RPC 2.0's answer to a line that is no message: -32700 where it is no JSON, -32600 where
    it is JSON of another shape (with its id where it gives a usable one, else null); None for what
    reads as a broken response (a `result` or an `error`, no `method`): a response is never answered,
    and an error with its id would fail the client's own request of that number."""
    problems = error.errors() if isinstance(error, ValidationError) else []
    if not problems or any(p["type"] == "json_invalid" for p in problems):
        return JSONRPCError(jsonrpc="2.0", id=None,
                            error=ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON"))  # fmt: skip
    objects = [p["input"] for p in problems if isinstance(p.get("input"), dict)]
    if any(("result" in o or "error" in o) and "method" not in o for o in objects):
        return None
    ids = [o.get("id") for o in objects]
    usable = next((i for i in ids if isinstance(i, str | int) and not isinstance(i, bool)), None)
    message = "Invalid Request: the line is JSON but no JSON-RPC 2.0 request, notification or response"
    return JSONRPCError(jsonrpc="2.0", id=usable, error=ErrorData(code=INVALID_REQUEST, message=message))
