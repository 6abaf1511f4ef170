"""Neo4j-specific behaviour: dropped connections are retried, a dead server is reported."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlparse

import pytest

from chiplore.core.errors import StoreAuthError, StoreUnavailable
from chiplore.kg.neo4j_store import Neo4jStore
from tests.conftest import Neo4jServer


class CuttableProxy:
    """A loopback TCP proxy whose live connections can be cut, like a network blip or a restart."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.refuse_next = 0  # connections to hang up on at once, like a server still restarting
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.refuse_next > 0:
                    self.refuse_next -= 1
                    client.close()
                    continue
            server = socket.create_connection(self.upstream)
            with self.lock:
                self.connections += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self.connections.clear()

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone would leave it listening.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.cut()


@pytest.fixture
def proxy(neo4j_server: Neo4jServer) -> CuttableProxy:
    address = urlparse(neo4j_server.uri)
    assert address.hostname and address.port
    proxy = CuttableProxy(address.hostname, address.port)
    yield proxy
    proxy.close()


def test_reads_and_writes_survive_a_dropped_connection(neo4j_server: Neo4jServer, proxy: CuttableProxy) -> None:
    store = Neo4jStore(f"bolt://127.0.0.1:{proxy.port}", neo4j_server.user, neo4j_server.password)
    try:
        store.write("MERGE (c:Concept {key: 'retry-probe'})")
        for _ in range(3):
            proxy.cut()  # every pooled connection dies between two queries
            assert store.read("MATCH (c:Concept {key: 'retry-probe'}) RETURN count(c) AS n") == [{"n": 1}]
            proxy.cut()
            store.write("MATCH (c:Concept {key: 'retry-probe'}) SET c.kind = 'probe'")
    finally:
        store.write("MATCH (c:Concept {key: 'retry-probe'}) DETACH DELETE c")
        store.close()


def test_connection_failures_are_retried_with_backoff(neo4j_server: Neo4jServer, proxy: CuttableProxy) -> None:
    uri = f"bolt://127.0.0.1:{proxy.port}"
    patient = Neo4jStore(uri, neo4j_server.user, neo4j_server.password, connect_attempts=4)
    impatient = Neo4jStore(uri, neo4j_server.user, neo4j_server.password, connect_attempts=1)
    try:
        proxy.refuse_next = 2
        assert patient.read("RETURN 1 AS x") == [{"x": 1}]
        proxy.cut()
        proxy.refuse_next = 2
        with pytest.raises(StoreUnavailable):
            impatient.read("RETURN 1 AS x")
    finally:
        patient.close()
        impatient.close()


def test_a_server_that_goes_away_is_reported_after_retries(neo4j_server: Neo4jServer, proxy: CuttableProxy) -> None:
    store = Neo4jStore(f"bolt://127.0.0.1:{proxy.port}", neo4j_server.user, neo4j_server.password)
    assert store.read("RETURN 1 AS x") == [{"x": 1}]
    proxy.close()
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="unreachable"):
        store.read("RETURN 1 AS x")
    assert time.monotonic() - started < 30, "retries are bounded"
    store.close()


def test_wrong_password_is_an_auth_error_not_retried(neo4j_server: Neo4jServer) -> None:
    store = Neo4jStore(neo4j_server.uri, neo4j_server.user, neo4j_server.password + "-wrong")
    with pytest.raises(StoreAuthError):
        store.read("RETURN 1 AS x")
    store.close()


def test_malformed_address_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="invalid Neo4j address"):
        Neo4jStore("http//nope", "neo4j", "x")
