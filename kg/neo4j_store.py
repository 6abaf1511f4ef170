"""GraphStore on a Neo4j 5 server over Bolt, with the official driver."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import neo4j
import neo4j.exceptions as neo4j_errors
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from chiplore.core.errors import (
    QueryError,
    StoreAuthError,
    StoreError,
    StoreUnavailable,
    WriteRefused,
)
from chiplore.core.secrets import redact, redact_uri, uri_password
from chiplore.kg.deadline import GRACE_S, DeadlinePassed, run_bounded
from chiplore.kg.dialect import NEO4J
from chiplore.kg.guard import (
    DEFAULT_LIMITS,
    GuardedResult,
    QueryRefused,
    RowCap,
    UntrustedLimits,
    check_params,
    check_text,
    timed_out,
    vet_plan,
)
from chiplore.kg.plans import PlanNode, plan_from_neo4j
from chiplore.kg.store import DEFAULT_BATCH_SIZE, Params, Record, ServerInfo, finite_params, write_in_batches
from chiplore.kg.values import plain

log = logging.getLogger(__name__)

T = TypeVar("T")

# Raised when the server goes away between or during transactions; worth another try.
_RETRYABLE = (
    neo4j_errors.ServiceUnavailable,
    neo4j_errors.SessionExpired,
    neo4j_errors.TransientError,
    neo4j_errors.SessionError,
)


class Neo4jStore:
    """GraphStore on Neo4j: reads in read transactions, writes in managed write transactions."""

    backend = "neo4j"
    dialect = NEO4J

    def __init__(
        self,
        uri: str,
        user: str,
        password: str,
        *,
        database: str = "neo4j",
        query_timeout_s: float = 30.0,
        connect_attempts: int = 4,
    ) -> None:
        # Messages name the server by `address`: a password inside the URI never reaches them.
        self.address = redact_uri(uri)
        self._secrets = (password, uri_password(uri))
        self.database = database
        self.query_timeout_s = query_timeout_s
        self._retry = Retrying(
            retry=retry_if_exception_type(_RETRYABLE),
            stop=stop_after_attempt(connect_attempts),
            wait=wait_exponential(multiplier=0.2, max=3.0),
            before_sleep=before_sleep_log(log, logging.DEBUG),  # --debug shows them; the failure is one line
            reraise=True,
        )
        self._uri, self._auth = uri, (user, password)
        self._driver = self._new_driver()
        self._closed = False

    def _new_driver(self) -> neo4j.Driver:
        try:
            return neo4j.GraphDatabase.driver(
                self._uri,
                auth=self._auth,
                connection_timeout=10.0,
                # Schema-less warnings ("label does not exist yet") are noise for a growing graph.
                notifications_min_severity="OFF",
                # Retries are ours (tenacity, below): one policy, not two stacked ones.
                max_transaction_retry_time=0.0,
            )
        except (ValueError, neo4j_errors.ConfigurationError) as error:
            reason = redact(str(error), self._secrets)
            raise StoreUnavailable(f"invalid Neo4j address {self.address!r}: {reason}") from None

    # -- queries --------------------------------------------------------------------------------

    def read(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        work, values = self._unit_of_work(timeout_s), finite_params(params, query)
        return self._retrying(lambda session: session.execute_read(work, query, values), timeout_s)

    def write(self, query: str, params: Params | None = None, *, timeout_s: float | None = None) -> list[Record]:
        work, values = self._unit_of_work(timeout_s), finite_params(params, query)
        return self._retrying(lambda session: session.execute_write(work, query, values), timeout_s)

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
        if self._closed:
            raise StoreUnavailable("the Neo4j store was closed")
        values = finite_params(params, query)
        # A driver of each untrusted read's own (a few ms): cutting a runaway's connection, by closing
        # that driver, leaves alone the other work of this process, other untrusted reads included.
        driver = self._new_driver()
        cut = _once(lambda: _cut(driver))

        def work() -> GuardedResult:
            # Not retried: a query that broke the connection is not sent again.
            with (
                driver.session(
                    database=self.database,
                    default_access_mode=neo4j.READ_ACCESS,  # a read transaction, routed to a reader
                    fetch_size=min(limits.max_rows + 1, 1_000),  # the server sends no more than is kept
                ) as session,
                session.begin_transaction(timeout=limits.timeout_s, metadata={"app": "chiplore-untrusted"}) as tx,
            ):
                try:
                    planned = tx.run(f"{EXPLAIN}{query}", values).consume()
                except neo4j_errors.Neo4jError as error:  # the user's text, not ours, in what it quotes
                    said = self._translate(error, limits.timeout_s)
                    raise (QueryError(_unexplained(str(said))) if type(said) is QueryError else said) from None
                self._vet(planned, query)
                result = tx.run(query, values)  # type: ignore[arg-type]
                cap = RowCap(limits)
                for record in result:
                    if not cap.take({key: plain(value) for key, value in record.items()}):
                        break
                return cap.result(result.keys())
            # Leaving the block rolls the transaction back: the rest of the result is discarded.

        try:
            # The server checks the transaction's timeout between rows only: one expression that
            # computes for long, or one huge row being decoded here, would hold this call past it.
            return run_bounded(work, seconds=limits.timeout_s + GRACE_S, abort=cut)
        except DeadlinePassed:
            raise timed_out(limits.timeout_s) from None
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as error:
            raise self._translate(error, limits.timeout_s) from error
        finally:
            cut()

    def _vet(self, summary: neo4j.ResultSummary, query: str) -> None:
        """Refuse what the planner says is not a plain read of this database."""
        if summary.query_type in ("w", "rw"):
            raise WriteRefused("writes are refused on the read-only path; this query modifies the graph")
        if summary.query_type == "s":
            raise QueryRefused("schema changes and administration commands are refused on the read-only path")
        if summary.query_type != "r":
            raise QueryRefused("only queries that read the graph run on the read-only path")
        if summary.database not in (None, self.database):
            raise QueryRefused(f"the read-only path reads database {self.database!r} only")
        vet_plan(plan_from_neo4j(summary.plan or {}), query)

    def explain(self, query: str, params: Params | None = None) -> PlanNode:
        values = finite_params(params, query)
        summary = self._retrying(lambda session: session.run(f"EXPLAIN {query}", values).consume())
        return plan_from_neo4j(summary.plan or {})

    def _unit_of_work(self, timeout_s: float | None) -> Callable[..., list[Record]]:
        """The transaction function, with the server-side timeout for this query."""
        return neo4j.unit_of_work(timeout=timeout_s or self.query_timeout_s)(_collect)

    def _retrying(self, work: Callable[[neo4j.Session], T], timeout_s: float | None = None) -> T:
        """Run work in a fresh session; retry when the connection drops, map errors to ours (a
        timeout quoted as `timeout_s`, the one this query ran under)."""
        if self._closed:
            raise StoreUnavailable("the Neo4j store was closed")

        def attempt() -> T:
            with self._driver.session(database=self.database) as session:
                return work(session)

        try:
            return self._retry(attempt)
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as error:
            raise self._translate(error, timeout_s) from error

    def _translate(self, error: Exception, timeout_s: float | None = None) -> StoreError | QueryError:
        code = getattr(error, "code", "") or ""
        if "TransactionTimedOut" in code:
            return timed_out(timeout_s or self.query_timeout_s)
        if "OutOfMemoryError" in code:  # transient to Neo4j (its pool or its heap), though no retry can help
            return QueryError(f"the query needs more memory than this Neo4j server lets it use: "
                              f"{_message(error, self._secrets)}")  # fmt: skip
        if isinstance(error, neo4j_errors.AuthError):
            return StoreAuthError(
                f"Neo4j at {self.address} refused the credentials (check CHIPLORE_NEO4J_USER / _PASSWORD)"
            )
        if isinstance(error, _RETRYABLE):
            return StoreUnavailable(f"Neo4j at {self.address} is unreachable: {_message(error, self._secrets)}")
        if code == "Neo.ClientError.Statement.AccessMode":
            return WriteRefused("writes are refused on the read-only path; this query modifies the graph")
        if code == "Neo.ClientError.Database.DatabaseNotFound":
            return StoreUnavailable(f"Neo4j at {self.address} has no database {self.database!r}")
        message = _message(error, self._secrets)
        if re.search(r"no procedure with the name `?db\.(indexes|constraints)\b", message):
            # FalkorDB's listings; Neo4j 5 has commands for them
            listing = "INDEXES" if "db.indexes" in message else "CONSTRAINTS"
            return QueryError(f"Cypher error: {message}: Neo4j 5 lists them with SHOW {listing}")
        return QueryError(f"Cypher error: {message}")

    # -- schema ---------------------------------------------------------------------------------

    def ensure_unique(self, label: str, prop: str) -> bool:
        name = f"chiplore_unique_{label}_{prop}".lower()
        ddl = f"CREATE CONSTRAINT `{name}` IF NOT EXISTS FOR (n:`{label}`) REQUIRE n.`{prop}` IS UNIQUE"
        return self._run_ddl(ddl).constraints_added > 0

    def ensure_index(self, label: str, prop: str) -> bool:
        name = f"chiplore_index_{label}_{prop}".lower()
        ddl = f"CREATE INDEX `{name}` IF NOT EXISTS FOR (n:`{label}`) ON (n.`{prop}`)"
        return self._run_ddl(ddl).indexes_added > 0

    def _run_ddl(self, ddl: str) -> neo4j.SummaryCounters:
        # Schema commands cannot share a transaction with data writes: an auto-commit query.
        return self._retrying(lambda session: session.run(ddl).consume().counters)

    def _schema_rows(self) -> list[Record]:
        constraints = self.read(
            "SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties "
            "RETURN name, 'unique' AS kind, labelsOrTypes[0] AS label, properties AS props"
        )
        indexes = self.read(
            "SHOW INDEXES YIELD name, type, entityType, labelsOrTypes, properties, owningConstraint "
            "WHERE type = 'RANGE' AND entityType = 'NODE' "
            "RETURN name, 'index' AS kind, labelsOrTypes[0] AS label, properties AS props"
        )
        return constraints + indexes

    def schema_objects(self) -> list[Record]:
        objects = [
            {"kind": row["kind"], "label": row["label"], "property": prop}
            for row in self._schema_rows()
            for prop in row["props"] or []
        ]
        return sorted(objects, key=lambda o: (o["label"], o["property"], o["kind"]))

    # -- lifecycle ------------------------------------------------------------------------------

    def compact(self) -> None:
        """Neo4j manages its own transaction logs: nothing to do."""

    def server_info(self) -> ServerInfo:
        if self._closed:
            raise StoreUnavailable("the Neo4j store was closed")
        try:
            info = self._driver.get_server_info()
            self._driver.verify_authentication()
        except neo4j_errors.AuthError as error:
            raise self._translate(error) from error
        except (neo4j_errors.DriverError, neo4j_errors.Neo4jError, OSError) as error:
            reason = _message(error, self._secrets)
            raise StoreUnavailable(f"Neo4j at {self.address} is unreachable: {reason}") from error
        return ServerInfo(
            backend=self.backend,
            address=self.address,
            server_version=f"{info.agent} (Bolt {'.'.join(map(str, info.protocol_version))})",
            database=self.database,
        )

    def delete_all(self) -> None:
        while self.write("MATCH (n) WITH n LIMIT 20000 DETACH DELETE n RETURN count(*) AS deleted")[0]["deleted"]:
            pass

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._driver.close()

    def __enter__(self) -> Neo4jStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut(driver: neo4j.Driver) -> None:
    """Close a driver, connection in use included: the server then terminates its transaction, and
    a thread waiting on its reply wakes up. Waits a second at most (closing says goodbye first)."""
    closer = threading.Thread(target=driver.close, name="chiplore-cut-untrusted", daemon=True)
    closer.start()
    closer.join(1.0)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()

    return run


def _collect(tx: neo4j.ManagedTransaction, query: str, params: dict[str, Any]) -> list[Record]:
    result = tx.run(query, params)  # type: ignore[arg-type]
    return [{key: plain(value) for key, value in record.items()} for record in result]


EXPLAIN = "EXPLAIN "  # the guarded path plans a query before it runs it


def _unexplained(text: str) -> str:
    """A planning error as if the user's query had been sent alone: the quoted query without the
    EXPLAIN the guarded path put before it, and positions that point into the user's text."""

    def shifted(found: re.Match[str]) -> str:
        line, column, offset = (int(found[i]) for i in (1, 2, 3))
        column -= len(EXPLAIN) if line == 1 else 0
        return f"(line {line}, column {column} (offset: {offset - len(EXPLAIN)}))"

    text = re.sub(r"\(line (\d+), column (\d+) \(offset: (\d+)\)\)", shifted, text)
    return text.replace(f'"{EXPLAIN}', '"', 1)


def _message(error: Exception, secrets: tuple[str, ...] = ()) -> str:
    message = getattr(error, "message", None) or str(error)
    return redact(" ".join(str(message).split()), secrets)
