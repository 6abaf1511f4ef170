"""The embedded default store: FalkorDB in a supervised redis-server under the data dir."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import redis
from falkordb import FalkorDB
from falkordb.helpers import stringify_param_value
from falkordb.query_result import QueryResult

from chiplore.core.errors import QueryError, StoreUnavailable, WriteRefused
from chiplore.kg.deadline import GRACE_S, DeadlinePassed, run_bounded
from chiplore.kg.dialect import FALKORDB, falkordb_hint, falkordb_refusal
from chiplore.kg.falkordb_server import (
    QUERY_MEM_CAPACITY_BYTES,
    SERVER_HEAP_MAX_BYTES,
    FalkorDBServer,
    client_name,
)
from chiplore.kg.guard import (
    DEFAULT_LIMITS,
    GuardedResult,
    QueryTimedOut,
    RowCap,
    UntrustedLimits,
    blank_comments,
    capped_query,
    check_params,
    check_text,
    has_return,
    return_columns,
    timed_out,
    vet_plan,
)
from chiplore.kg.plans import PlanNode, plan_from_falkordb
from chiplore.kg.store import DEFAULT_BATCH_SIZE, Params, Record, ServerInfo, finite_params, write_in_batches
from chiplore.kg.values import plain

log = logging.getLogger(__name__)

GRAPH_NAME = "chiplore"
_READ_ONLY_MESSAGE = "is to be executed only on read-only queries"


class EmbeddedStore:
    """GraphStore on FalkorDB; starts (or attaches to) its server on open, stops it on close."""

    backend = "embedded"
    dialect = FALKORDB

    def __init__(self, data_dir: Path, *, query_timeout_s: float = 30.0) -> None:
        self.data_dir = data_dir
        self.query_timeout_s = query_timeout_s
        self.server = FalkorDBServer(data_dir)
        try:
            self.started_server = self.server.ensure_running()
        except OSError as error:  # a read-only disk, a folder this user may not write
            raise StoreUnavailable(f"cannot use the data dir {data_dir}: {error.strerror or error} "
                                   f"({error.filename or data_dir})") from None  # fmt: skip
        self._token = uuid.uuid4().hex[:12]
        self._db = FalkorDB(
            unix_socket_path=str(self.server.paths.socket),
            client_name=client_name(self._token),
            socket_timeout=query_timeout_s + 5.0,
        )
        self._graph = self._db.select_graph(GRAPH_NAME)
        self._closed = False
        self._create_graph(fresh=self.started_server)

    def _create_graph(self, *, fresh: bool = False) -> None:
        """Read-only queries fail on a graph key that does not exist yet (an empty graph is not in the
        append-only file, so a restart loses it too); a write creates it. A server `fresh`ly started
        here that does not answer that write is killed and started once more: FalkorDB can deadlock as
        it starts (rarely; a test run saw a new server answer PING, then sleep on futexes for good)."""
        try:
            self.write("RETURN 1 AS ready")
        except StoreUnavailable as error:
            if not fresh or self.server.disk_full_reason():
                raise
            log.warning("the embedded store's new server did not answer its first query (%s): starting it again", error)
            self.server.restart()
            self.write("RETURN 1 AS ready")

    # -- queries --------------------------------------------------------------------------------

    def read(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        return self._run(query, params, timeout_s, read_only=True)

    def write(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        return self._run(query, params, timeout_s, read_only=False)

    def write_rows(
        self,
        query: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        params: Params | None = None,
    ) -> int:
        return write_in_batches(self, query, rows, batch_size, params)

    def read_untrusted(
        self, query: str, params: Params | None = None, *, limits: UntrustedLimits = DEFAULT_LIMITS
    ) -> GuardedResult:
        check_text(query)
        check_params(params)
        refused = falkordb_refusal(query)
        if refused:
            raise QueryError(f"Cypher error: {refused}")
        self._ensure_open()
        body = blank_comments(query).rstrip().rstrip(";")  # leading blanks kept: positions stay the user's
        columns = return_columns(body)
        capped, added = capped_query(body, limits.max_rows) if has_return(body) else (body, "")
        header = _params_header(finite_params(params, query))  # the texts sent are the ones the server lists as running
        sent = [header + body]
        timeout_ms = max(1, math.ceil(1000 * limits.timeout_s))

        clients: list[FalkorDB] = []

        def work() -> QueryResult:
            # A client of its own, so that cutting its connection at the deadline touches nothing else.
            client = FalkorDB(
                unix_socket_path=str(self.server.paths.socket),
                client_name=client_name(self._token),
                socket_timeout=limits.timeout_s + GRACE_S + 5.0,  # a backstop: the deadline comes first
            )
            clients.append(client)
            # EXPLAIN too runs within the deadline: FalkorDB folds constants while planning, so
            # planning `range(1, 1000000000)` already builds the list.
            plan = client.connection.execute_command("GRAPH.EXPLAIN", GRAPH_NAME, sent[0])
            vet_plan(plan_from_falkordb(list(plan)), query)
            sent.append(header + capped)
            return client.select_graph(GRAPH_NAME).ro_query(sent[-1], timeout=timeout_ms)

        log_mark = self.server.log_size()
        try:
            result = run_bounded(work, seconds=limits.timeout_s + GRACE_S, abort=lambda: _cut(clients))
        except DeadlinePassed:
            raise self._stop_runaway(sent[-1], limits.timeout_s) from None
        except (KeyboardInterrupt, SystemExit):
            self._abandon(sent[-1])
            raise
        except redis.exceptions.ResponseError as error:
            raise _query_error(error, query, limits.timeout_s) from error
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as error:
            raise self._after_failure(error, log_mark) from error
        finally:
            _cut(clients)
        names = [column[1] for column in result.header]
        kept = [name for name in names if name != added]
        order = columns if columns is not None and sorted(columns) == sorted(kept) else kept
        cap = RowCap(limits)
        for row in result.result_set:
            record = dict(zip(names, row, strict=True))
            if not cap.take({name: plain(record[name]) for name in order}):
                break
        return cap.result(order)

    def _after_failure(self, error: Exception, log_mark: int) -> QueryError | StoreUnavailable:
        """The server stopped during an untrusted query: when the query asked it for more memory than
        it may hold (it aborts then), start it again and say so; otherwise it is unavailable."""
        if not self.server.out_of_memory_since(log_mark):
            return self._unavailable(error)
        log.info("an untrusted query took the embedded store's server past its memory cap: restarting it")
        self.server.restart()
        self._create_graph(fresh=True)
        return QueryError(
            f"the query asked for more memory than the embedded store's server may hold "
            f"({SERVER_HEAP_MAX_BYTES >> 30} GiB), which stopped it; chiplore started it again (nothing committed "
            "is lost): return fewer or smaller values, or aggregate"
        )

    def _stop_runaway(self, text: str, timeout_s: float) -> QueryTimedOut:
        """The query outlived its timeout and its grace. FalkorDB checks the timeout between records
        only, and a query that computes inside one expression holds a worker and the graph's read
        lock (every write waits) until it finishes, which may be hours: the only way to stop it is to
        restart the server (its append-only file is fsynced on every write: nothing committed is lost)."""
        if not self.server.is_running_query(text):
            return timed_out(timeout_s)  # the server is done; the reply was too large to read in time
        log.info("an untrusted query outlived its timeout of %g s: restarting the embedded store", timeout_s)
        self.server.restart()
        self._create_graph(fresh=True)
        return timed_out(timeout_s, " (FalkorDB cannot interrupt one long expression, so chiplore restarted the "
                                    "embedded store's server; nothing committed is lost)")  # fmt: skip

    def _abandon(self, text: str) -> None:
        """Ctrl-C or SIGTERM while the query runs: stop it now rather than leave it to the server's
        timeout, which a runaway ignores (and a stop of the server waits for a running query). The
        server is restarted when other processes use it, killed otherwise (this one is leaving)."""
        try:
            if not self.server.is_running_query(text):
                return
            if self.server.others_attached(self._token):
                self.server.restart()
                self._create_graph(fresh=True)
            else:
                self.server.kill()
        except Exception as error:  # the interrupt matters more than the clean-up
            log.debug("stopping an abandoned untrusted query: %s", error)

    def explain(self, query: str, params: Params | None = None) -> PlanNode:
        self._ensure_open()
        values = finite_params(params, query)
        try:
            text = _params_header(values) + blank_comments(query)
            lines = self._db.connection.execute_command("GRAPH.EXPLAIN", GRAPH_NAME, text)
        except redis.exceptions.ResponseError as error:
            raise _query_error(error, query) from error
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as error:
            raise self._unavailable(error) from error
        return plan_from_falkordb(list(lines))

    def _run(self, query: str, params: Params | None, timeout_s: float | None, *, read_only: bool) -> list[Record]:
        return _records(self._query(query, params, timeout_s, read_only=read_only))

    def _query(self, query: str, params: Params | None, timeout_s: float | None, *, read_only: bool) -> QueryResult:
        self._ensure_open()
        values = finite_params(params, query)
        timeout_ms = max(1, math.ceil(1000 * (timeout_s or self.query_timeout_s)))
        text = blank_comments(query)
        try:
            if read_only:
                return self._graph.ro_query(text, values, timeout=timeout_ms)
            return self._graph.query(text, values, timeout=timeout_ms)
        except redis.exceptions.ResponseError as error:
            raise _query_error(error, query, timeout_s or self.query_timeout_s) from error
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as error:
            raise self._unavailable(error) from error

    def _unavailable(self, error: Exception) -> StoreUnavailable:
        """The server stopped answering: say why when its disk is full (redis exits on a failed AOF write)."""
        full = self.server.disk_full_reason()
        if full:
            return StoreUnavailable(f"the embedded store at {self.data_dir} stopped: {full}")
        return StoreUnavailable(f"the embedded store at {self.data_dir} stopped answering: {error}")

    # -- schema ---------------------------------------------------------------------------------

    def ensure_index(self, label: str, prop: str) -> bool:
        if any(o["label"] == label and o["property"] == prop for o in self._indexes()):
            return False
        self.write(f"CREATE INDEX FOR (n:`{label}`) ON (n.`{prop}`)")
        return True

    def ensure_unique(self, label: str, prop: str) -> bool:
        # FalkorDB enforces uniqueness through an exact-match index on the same property.
        self.ensure_index(label, prop)
        if any(o["label"] == label and o["property"] == prop for o in self._constraints()):
            return False
        try:
            self._db.connection.execute_command(
                "GRAPH.CONSTRAINT",
                "CREATE",
                GRAPH_NAME,
                "UNIQUE",
                "NODE",
                label,
                "PROPERTIES",
                "1",
                prop,
            )
        except redis.exceptions.ResponseError as error:
            raise QueryError(f"cannot create the unique constraint on {label}.{prop}: {error}") from error
        return True

    def schema_objects(self) -> list[Record]:
        objects = [{"kind": "unique", **c} for c in self._constraints()]
        objects += [{"kind": "index", **i} for i in self._indexes()]
        return sorted(objects, key=lambda o: (o["label"], o["property"], o["kind"]))

    def _indexes(self) -> list[Record]:
        rows = self.read("CALL db.indexes() YIELD label, properties, entitytype RETURN label, properties, entitytype")
        return [
            {"label": r["label"], "property": p} for r in rows if r["entitytype"] == "NODE" for p in r["properties"]
        ]

    def _constraints(self) -> list[Record]:
        rows = self.read(
            "CALL db.constraints() YIELD type, label, properties, entitytype RETURN type, label, properties, entitytype"
        )
        return [
            {"label": r["label"], "property": p}
            for r in rows
            if r["type"] == "UNIQUE" and r["entitytype"] == "NODE"
            for p in r["properties"]
        ]

    # -- lifecycle ------------------------------------------------------------------------------

    def compact(self) -> None:
        self._ensure_open()
        self._await_constraints()
        self.server.compact()

    def _await_constraints(self, timeout_s: float = 60.0) -> None:
        """FalkorDB builds constraints in the background; a snapshot taken before would miss them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            rows = self.read("CALL db.constraints() YIELD status RETURN status")
            if all(row["status"] == "OPERATIONAL" for row in rows):
                return
            time.sleep(0.05)

    def server_info(self) -> ServerInfo:
        self._ensure_open()
        try:
            info = self._db.connection.info("server")
            modules = self._db.connection.execute_command("MODULE", "LIST")
        except (redis.exceptions.ConnectionError, OSError) as error:
            raise StoreUnavailable(f"the embedded store at {self.data_dir} does not answer: {error}") from error
        falkor = next((m for m in modules if _module_name(m) == "graph"), None)
        version = _module_version(falkor) if falkor is not None else "unknown"
        return ServerInfo(
            backend=self.backend,
            address=f"unix://{self.server.paths.socket}",
            server_version=f"FalkorDB {version} on redis {info.get('redis_version', '?')}",
            database=GRAPH_NAME,
        )

    def delete_all(self) -> None:
        # Batched so that a large graph does not become one huge transaction.
        while self.write("MATCH (n) WITH n LIMIT 50000 DETACH DELETE n RETURN count(*) AS deleted")[0]["deleted"]:
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._db.connection.close()
            self._db.connection.connection_pool.disconnect()
        finally:
            self.server.release(self._token)

    def _ensure_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("the embedded store was closed")

    def __enter__(self) -> EmbeddedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _params_header(params: Params | None) -> str:
    """The `CYPHER name=value ...` prefix that carries parameters to FalkorDB."""
    if not params:
        return ""
    return "CYPHER " + " ".join(f"`{name}`={stringify_param_value(value)}" for name, value in params.items()) + " "


def _records(result: QueryResult) -> list[Record]:
    names = [column[1] for column in result.header]
    return [{name: plain(value) for name, value in zip(names, row, strict=True)} for row in result.result_set]


def _query_error(error: redis.exceptions.ResponseError, query: str, timeout_s: float | None = None) -> QueryError:
    """One line for a FalkorDB error; `query` is the text the caller gave (never a wrapper of chiplore's)."""
    message = " ".join(str(error).split())
    if _READ_ONLY_MESSAGE in message:
        return WriteRefused("writes are refused on the read-only path; this query modifies the graph")
    if message.startswith("Query timed out"):
        return timed_out(timeout_s) if timeout_s is not None else QueryTimedOut(None)
    if "mem consumption exceeded capacity" in message:
        limit = QUERY_MEM_CAPACITY_BYTES >> 20
        return QueryError(f"the query needs more than the {limit:,} MiB of memory one query may use: "
                          "return fewer or smaller values, or aggregate")  # fmt: skip
    code = blank_comments(query)  # the first line of code, not a comment; the hints read the code
    first_line = _shortened(code.strip().splitlines()[0].strip()) if code.strip() else ""
    hint = falkordb_hint(message, code)
    return QueryError(f"Cypher error: {message} (in: {first_line})" + (f": {hint}" if hint else ""))


def _shortened(line: str, width: int = 80) -> str:
    """The line, or its first words within `width` and an ellipsis (never a name cut in two)."""
    if len(line) <= width:
        return line
    return line[: width + 1].rsplit(" ", 1)[0].rstrip() + " ..."


def _cut(clients: list[FalkorDB]) -> None:
    """Close every connection of an untrusted read's client, one in use included (a shutdown of the
    socket wakes the thread reading it)."""
    for client in clients:
        client.connection.connection_pool.disconnect()


def _module_name(module: Any) -> str:
    fields = _module_fields(module)
    return str(fields.get("name", ""))


def _module_version(module: Any) -> str:
    raw = int(_module_fields(module).get("ver", 0))
    return f"{raw // 10000}.{raw // 100 % 100}.{raw % 100}"


def _module_fields(module: Any) -> dict[str, Any]:
    if isinstance(module, dict):
        return module
    return dict(zip(module[::2], module[1::2], strict=False))
