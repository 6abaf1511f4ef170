"""Hostile Cypher on both stores: queries a person or a model could type into `chiplore cypher`, the
MCP server or the LLM's Cypher tool, each run on the guarded read path (`read_untrusted`, the CLI's
limits) with a short timeout, then a plain read and a write to see the store still answers.

    python benchmarks/hostile_cypher.py [--timeout 5] [--stores embedded,neo4j] [--only TEXT] [--no-signals]

The embedded store runs on a scratch data dir; Neo4j is started with chiplore.kg.neo4j_local as the
test suite starts it (instance `bench-hostile`, Java 17+ and Maven; stopped at the end, which also ends
what Neo4j computes on past a timeout), or CHIPLORE_BENCH_NEO4J_URI / _PASSWORD name a server of yours.
A small graph (300 nodes, 1,500 relationships, so that path patterns explode) is written first.

Prints one table: per query and store, the outcome in one line (rows, cut, refused, timed out, error;
a traceback would be a defect), the seconds it took to end (the goal: timeout + 5 s at most), the
server's peak memory while it ran, and whether the next read and write worked. Then, unless
--no-signals, SIGINT and SIGTERM sent to `chiplore cypher` while it runs a runaway: seconds to exit.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from rich.console import Console
from rich.table import Table

from chiplore.core.errors import ChiploreError, QueryError, StoreUnavailable, WriteRefused
from chiplore.kg import neo4j_local
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.falkordb_server import ServerPaths
from chiplore.kg.guard import GuardedResult, QueryRefused, QueryTimedOut, UntrustedLimits
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.store import GraphStore

NEO4J_INSTANCE = "bench-hostile"
NEO4J_PASSWORD = "chiplore-bench-password"
GOAL_GRACE_S = 5.0

# (what it tries, the query); the four first, the ones Neo4j computes to their end (it cannot
# stop one long expression) last, so that they slow down nothing after them.
QUERIES: list[tuple[str, str]] = [
    ("issue: WITH first", "WITH 1 AS x RETURN x"),
    ("issue: 25M-value row", "WITH range(1,5000) AS r RETURN [x IN r | range(1,5000)]"),
    ("issue: 100M rows", "UNWIND range(1,100000000) AS x RETURN x"),
    ("deep nesting", "RETURN " + "[" * 40 + "1" + "]" * 40 + " AS x"),
    ("deep CASE", "RETURN " + "CASE WHEN true THEN " * 20 + "1" + " END" * 20 + " AS x"),
    ("long text", "RETURN 1 AS x // " + "x" * 30_000),
    ("cartesian product", "MATCH (a), (b), (c) RETURN count(*) AS n"),
    ("all paths", "MATCH p = (a)-[*]-(b) RETURN count(p) AS n"),
    ("shortestPath over everything",
     "MATCH (a), (b) WHERE id(a) < id(b) MATCH p = shortestPath((a)-[*]-(b)) RETURN max(length(p)) AS d"),
    ("collect then square", "UNWIND range(1, 100000) AS x WITH collect(x) AS c UNWIND c AS a UNWIND c AS b "
                            "RETURN count(*) AS n"),
    ("sort 10M", "UNWIND range(1, 10000000) AS x RETURN x ORDER BY x DESC"),
    ("10 billion rows", "UNWIND range(1, 10000000000) AS x RETURN x"),
    ("a list of 100M in one row", "RETURN range(1, 100000000) AS l"),
    ("a string doubled 40 times", "RETURN size(reduce(s = 'x', i IN range(1, 40) | s + s)) AS n"),
    ("apoc", "CALL apoc.periodic.iterate('MATCH (n) RETURN n', 'DETACH DELETE n', {}) YIELD batches RETURN batches"),
    ("apoc function", "RETURN apoc.version() AS v"),
    ("LOAD CSV of a host file", "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row"),
    ("LOAD CSV from the network", "LOAD CSV FROM 'http://169.254.169.254/latest/meta-data/' AS row RETURN row"),
    ("write in a subquery", "CALL { CREATE (:Hostile {k: 1}) } RETURN 1 AS x"),
    ("write per row in a subquery", "MATCH (n) CALL { WITH n SET n.hacked = true } RETURN count(*) AS n"),
    ("write in FOREACH", "FOREACH (x IN [1] | CREATE (:Hostile))"),
    ("delete in a subquery", "CALL { MATCH (n) DETACH DELETE n } RETURN 1 AS x"),
    ("a second statement", "RETURN 1 AS x; MATCH (n) DETACH DELETE n"),
    ("db.labels", "CALL db.labels() YIELD label RETURN label"),
    ("a writing db procedure", "CALL db.idx.fulltext.createNodeIndex('Concept', 'key')"),
    ("dbms procedure", "CALL dbms.killConnections(['bolt-1'])"),
    ("admin command", "SHOW TRANSACTIONS"),
    ("terminate others", "TERMINATE TRANSACTIONS 'neo4j-transaction-1'"),
    ("issue: quadratic string",  # Neo4j computes these to their end: last
     "RETURN reduce(s='', x IN range(1,2000000) | s+'aaaaaaaaaa')"),
    ("regex backtracking", "RETURN 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' =~ '(a+)+$' AS m"),
]  # fmt: skip


@dataclass
class Outcome:
    name: str
    query: str
    store: str
    outcome: str
    seconds: float
    peak_mb: int | None
    next_ok: str
    defect: bool = False


def classify(run: Callable[[], object]) -> str:
    """One line for what the guarded read gave."""
    try:
        result = run()
    except QueryTimedOut as error:
        return f"timed out: {error}"
    except (WriteRefused, QueryRefused) as error:
        return f"refused: {error}"
    except QueryError as error:
        return f"error: {error}"
    except StoreUnavailable as error:
        return f"unavailable: {error}"
    except ChiploreError as error:
        return f"{type(error).__name__}: {error}"
    return f"rows: {result.summary()}" if isinstance(result, GuardedResult) else f"rows: {result}"


def next_query(store: GraphStore) -> str:
    """Whether a plain read, a guarded read and a write work now, and how long they took."""
    started = time.monotonic()
    try:
        ok = store.read_untrusted("RETURN 1 AS ok").rows == [{"ok": 1}]
        store.write("MERGE (p:Probe {key: 'probe'}) SET p.n = coalesce(p.n, 0) + 1")
        ok = ok and store.read("MATCH (p:Probe {key: 'probe'}) RETURN count(p) AS n") == [{"n": 1}]
    except Exception as error:  # reported, not raised: the table says what broke
        return f"no: {type(error).__name__}: {' '.join(str(error).split())[:60]}"
    return f"{'yes' if ok else 'no'} ({time.monotonic() - started:.2f} s)"


class PeakMemory:
    """Samples a process's resident memory every 50 ms (the pid may change: a restarted server)."""

    def __init__(self, pid: Callable[[], int | None]) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            pid = self.pid()
            try:
                with open(f"/proc/{pid}/status") as status:
                    for line in status:
                        if line.startswith("VmRSS:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            except (OSError, ValueError):
                pass
            self._stop.wait(0.05)


def seed(store: GraphStore) -> None:
    """300 nodes and 1,500 random relationships: enough for path patterns to explode."""
    rng = random.Random(33)
    store.write("UNWIND range(1, 300) AS i CREATE (:Concept {key: toString(i), n: i})")
    pairs = [{"a": str(rng.randint(1, 300)), "b": str(rng.randint(1, 300))} for _ in range(1_500)]
    store.write("UNWIND $pairs AS p MATCH (a:Concept {key: p.a}), (b:Concept {key: p.b}) CREATE (a)-[:LINKS]->(b)",
                {"pairs": pairs})  # fmt: skip


def run_store(name: str, store: GraphStore, server_pid: Callable[[], int | None], limits: UntrustedLimits,
              only: str | None) -> Iterator[Outcome]:  # fmt: skip
    seed(store)
    for label, query in QUERIES:
        if only and only.lower() not in (label + query).lower():
            continue
        started = time.monotonic()
        with PeakMemory(server_pid) as memory:
            outcome = classify(lambda q=query: store.read_untrusted(q, limits=limits))  # type: ignore[misc]
        seconds = time.monotonic() - started
        after = next_query(store)
        defect = seconds > limits.timeout_s + GOAL_GRACE_S or not after.startswith("yes")
        defect = defect or outcome.startswith(("unavailable", "StoreError")) or "\n" in outcome
        written = store.read("MATCH (h:Hostile) RETURN count(h) AS n")[0]["n"] + store.read(
            "MATCH (n {hacked: true}) RETURN count(n) AS n")[0]["n"]  # fmt: skip
        if written or store.read("MATCH (c:Concept) RETURN count(c) AS n")[0]["n"] != 300:
            outcome, defect = f"WROTE TO THE GRAPH; {outcome}", True
        yield Outcome(label, query, name, outcome, seconds, memory.peak_kb // 1024 or None, after, defect)


@dataclass
class Opened:
    store: GraphStore
    server_pid: Callable[[], int | None]
    env: dict[str, str]  # what points `chiplore` at it


@contextmanager
def embedded(data_dir: Path) -> Iterator[Opened]:
    store = EmbeddedStore(data_dir)
    pid_file = ServerPaths.for_data_dir(data_dir).pid_file
    try:
        yield Opened(store, lambda: int(pid_file.read_text()) if pid_file.exists() else None,
                     {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data_dir)})  # fmt: skip
    finally:
        store.close()


@contextmanager
def neo4j() -> Iterator[Opened]:
    uri = os.environ.get("CHIPLORE_BENCH_NEO4J_URI")
    password = os.environ.get("CHIPLORE_BENCH_NEO4J_PASSWORD", "")
    started = None
    if not uri:
        started = neo4j_local.start(NEO4J_INSTANCE, NEO4J_PASSWORD, fresh=True)
        uri, password = started.uri, NEO4J_PASSWORD
    assert uri is not None
    store = Neo4jStore(uri, "neo4j", password)
    env = {"CHIPLORE_STORE": "neo4j", "CHIPLORE_NEO4J_URI": uri, "CHIPLORE_NEO4J_PASSWORD": password}
    try:
        store.delete_all()
        yield Opened(store, lambda: started.pid if started else None, env)
    finally:
        store.close()
        if started:
            neo4j_local.stop(NEO4J_INSTANCE)  # also ends what Neo4j still computes


# -- signals to the command line ------------------------------------------------------------------------


def signal_runs(env: dict[str, str], store: str, running: Callable[[], bool]) -> Iterator[tuple[str, str, float, str]]:
    """`chiplore cypher` with a runaway, a signal once the server runs it: seconds to exit, exit code."""
    chiplore = shutil.which("chiplore", path=str(Path(sys.executable).parent)) or "chiplore"
    query = QUERIES[-2][1] if store == "embedded" else "UNWIND range(1, 1000000000) AS x WITH x WHERE x < 0 RETURN x"
    full_env = {**os.environ, **env, "CHIPLORE_QUERY_TIMEOUT_S": "60"}
    for signum in (signal.SIGINT, signal.SIGTERM):
        process = subprocess.Popen([chiplore, "cypher", query], env=full_env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 90
        while not running() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        sent = time.monotonic()
        process.send_signal(signum)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        seconds = time.monotonic() - sent
        stderr = (process.stderr.read() if process.stderr else "").strip()
        yield store, signal.Signals(signum).name, seconds, f"exit {code}; stderr: {stderr.splitlines()[-1:] or '-'}"


def embedded_running(data_dir: Path) -> Callable[[], bool]:
    def check() -> bool:
        socket = ServerPaths.for_data_dir(data_dir).socket
        client = redis.Redis(unix_socket_path=str(socket), socket_timeout=2)
        try:
            return "reduce" in str(client.execute_command("GRAPH.INFO"))
        except (redis.exceptions.RedisError, OSError):
            return False
        finally:
            client.close()

    return check


def neo4j_running(store: Neo4jStore) -> Callable[[], bool]:
    def check() -> bool:
        rows = store.read("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery")
        return any("range(1, 1000000000)" in (row["currentQuery"] or "") for row in rows)

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=5.0, help="the query timeout, seconds")
    parser.add_argument("--stores", default="embedded,neo4j")
    parser.add_argument("--only", help="run only the queries whose label or text contains this")
    parser.add_argument("--no-signals", action="store_true", help="skip SIGINT/SIGTERM to `chiplore cypher`")
    args = parser.parse_args()
    limits = UntrustedLimits(timeout_s=args.timeout)  # the CLI's rows and bytes
    outcomes: list[Outcome] = []
    signals: list[tuple[str, str, float, str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="chiplore-hostile-") as scratch:
        data_dir = Path(scratch) / "data"
        for name in args.stores.split(","):
            with embedded(data_dir) if name == "embedded" else neo4j() as opened:
                outcomes += run_store(name, opened.store, opened.server_pid, limits, args.only)
                if not args.no_signals and isinstance(opened.store, Neo4jStore):
                    signals += signal_runs(opened.env, name, neo4j_running(opened.store))
            if not args.no_signals and name == "embedded":  # the command alone on its data dir, as a user runs it
                signals += signal_runs(opened.env, name, embedded_running(data_dir))
    console = Console(width=200)
    table = Table(title=f"Hostile Cypher on the guarded read path (timeout {args.timeout:g} s, "
                        f"{limits.max_rows:,} rows, {limits.max_bytes:,} bytes)")  # fmt: skip
    widths = {"store": 8, "s to end": 8, "server MB": 9, "next query": 14}
    for column in ("query", "store", "outcome", "s to end", "server MB", "next query"):
        table.add_column(column, justify="right" if column in ("s to end", "server MB") else "left", no_wrap=True,
                         min_width=widths.get(column))  # fmt: skip
    for o in outcomes:
        style = "red" if o.defect else None
        table.add_row(f"{o.name}: {_short(o.query, 40)}", o.store, _short(o.outcome, 90), f"{o.seconds:.2f}",
                      str(o.peak_mb or "-"), o.next_ok, style=style)  # fmt: skip
    defects = sum(o.defect for o in outcomes)
    table.caption = (f"{len(outcomes)} runs, {defects} past timeout + {GOAL_GRACE_S:g} s or leaving the store "
                     f"unusable (red); {time.perf_counter() - started:.0f} s of wall time")  # fmt: skip
    console.print(table)
    if signals:
        sig_table = Table(title="A signal to `chiplore cypher` while it runs a runaway (query timeout 60 s)")
        for column in ("store", "signal", "s to exit", "exit"):
            sig_table.add_column(column, justify="right" if column == "s to exit" else "left")
        for store_name, signame, seconds, code in signals:
            sig_table.add_row(store_name, signame, f"{seconds:.2f}", code)
        console.print(sig_table)


def _short(query: str, width: int = 60) -> str:
    flat = " ".join(query.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


if __name__ == "__main__":
    main()
