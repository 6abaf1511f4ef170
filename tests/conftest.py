"""Fixtures: a real Neo4j over Bolt (started once per session) and embedded FalkorDB stores.

Set CHIPLORE_TEST_NEO4J_URI (and CHIPLORE_TEST_NEO4J_PASSWORD) to use a Neo4j you run yourself;
otherwise the session starts one with chiplore.kg.neo4j_local (Java 17+ and Maven needed), named by
CHIPLORE_TEST_NEO4J_NAME (default `pytest`) so that concurrent sessions each get their own (and each
pytest-xdist worker its own, the name suffixed by the worker's). A missing Neo4j fails the run: the Neo4j
suite is never skipped.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from chiplore.kg import neo4j_local
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD

BACKENDS = ("embedded", "neo4j")
TEST_PASSWORD = "chiplore-test-password"


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored,
    and Python then keeps it ignored: the tests of what Ctrl-C does would see nothing. Python's handler
    here restores it, and the commands the tests start get the default disposition (a caught signal is
    reset on exec)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


class Neo4jServer:
    def __init__(self, uri: str, password: str) -> None:
        self.uri = uri
        self.user = "neo4j"
        self.password = password

    def store(self, **kwargs: object) -> Neo4jStore:
        return Neo4jStore(self.uri, self.user, self.password, **kwargs)  # type: ignore[arg-type]

    def env(self) -> dict[str, str]:
        """Environment that points chiplore at this server."""
        return {
            "CHIPLORE_STORE": "neo4j",
            "CHIPLORE_NEO4J_URI": self.uri,
            "CHIPLORE_NEO4J_USER": self.user,
            "CHIPLORE_NEO4J_PASSWORD": self.password,
        }


@pytest.fixture(scope="session")
def neo4j_server() -> Iterator[Neo4jServer]:
    external = os.environ.get("CHIPLORE_TEST_NEO4J_URI")
    if external:
        if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers wiping one database break each other's tests
            pytest.fail("CHIPLORE_TEST_NEO4J_URI names one database: run those tests with `-n 0`")
        yield Neo4jServer(external, os.environ.get("CHIPLORE_TEST_NEO4J_PASSWORD", ""))
        return
    name = os.environ.get("CHIPLORE_TEST_NEO4J_NAME", "pytest")  # one instance per concurrent session
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # and per pytest-xdist worker: each wipes its database before every test
        name = f"{name}-{worker}"
    instance = neo4j_local.start(name, TEST_PASSWORD, fresh=True)
    assert instance.uri is not None
    try:
        yield Neo4jServer(instance.uri, TEST_PASSWORD)
    finally:
        neo4j_local.stop(name)


def wipe_neo4j(store: Neo4jStore) -> None:
    """A clean database for each test: no data and no schema (community has one database)."""
    store.delete_all()
    for row in store.read("SHOW CONSTRAINTS YIELD name RETURN name"):
        store.write(f"DROP CONSTRAINT `{row['name']}` IF EXISTS")
    for row in store.read("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name"):
        store.write(f"DROP INDEX `{row['name']}` IF EXISTS")


@pytest.fixture
def neo4j_store(neo4j_server: Neo4jServer) -> Iterator[Neo4jStore]:
    store = neo4j_server.store()
    wipe_neo4j(store)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def embedded_store(tmp_path: Path) -> Iterator[EmbeddedStore]:
    store = EmbeddedStore(tmp_path / "data")
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest) -> GraphStore:
    """One fresh, empty store per test, on each backend in turn."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
def embedded_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a CLI run on a fresh embedded store."""
    return {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}


@pytest.fixture
def neo4j_env(neo4j_server: Neo4jServer) -> dict[str, str]:
    """The environment of a CLI run on the test Neo4j, wiped."""
    store = neo4j_server.store()
    wipe_neo4j(store)
    store.close()
    return neo4j_server.env()


@pytest.fixture
def graph(store: GraphStore) -> GraphStore:
    """A fresh store on each backend with the schema and SimRNGD registered (the ingest and loop tests)."""
    return _with_simrngd(store)


@pytest.fixture
def embedded_graph(embedded_store: EmbeddedStore) -> GraphStore:
    """`graph` on the embedded store only: for a learning run whose subject is the chip, not the store."""
    return _with_simrngd(embedded_store)


@pytest.fixture
def neo4j_graph(neo4j_store: GraphStore) -> GraphStore:
    """`graph` on Neo4j only: for a long run whose other store another test of its module covers."""
    return _with_simrngd(neo4j_store)


def _with_simrngd(store: GraphStore) -> GraphStore:
    ensure_schema(store)
    target = SimRNGD()
    register_target(store, target.name, target.toolchains(), target.default_toolchain())
    return store


SERVER_FIXTURES = frozenset({"neo4j_server", "neo4j_store", "embedded_store", "store", "graph", "toy_graph"})
# the simulator needs no graph: its tests are unit tests unless they are slow or say they start a store
UNIT_FOLDERS = ("simulator",)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group marks set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers: every test that reaches the Neo4j server is marked `neo4j`; a fast test that needs
    no server (the simulator's, or one its module marks `unit`) is marked `unit`. A test marked
    `server` starts a store itself (through the CLI, say) and is never a unit test."""
    root = Path(__file__).parent
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "neo4j_server" in fixtures:
            item.add_marker(pytest.mark.neo4j)
        servers = sorted(fixtures & SERVER_FIXTURES)
        explicit = item.get_closest_marker("unit") is not None
        if explicit and servers:
            raise pytest.UsageError(f"{item.nodeid} is marked unit but uses {servers}")
        folder = Path(str(item.fspath)).relative_to(root).parts[0]
        if (not explicit and folder in UNIT_FOLDERS and not servers and item.get_closest_marker("slow") is None
                and item.get_closest_marker("server") is None):  # fmt: skip
            item.add_marker(pytest.mark.unit)
        if _shares_a_module_fixture(item):  # with `--dist loadgroup`, the fixture is built once, on one worker
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker of `--dist loadgroup` whose grouped tests lack xdist's `@group` suffix would scatter a
    module's campaign over the workers, each building it (CI built the upgrade campaign twice, 13 min
    each): refuse to run so rather than be slow in silence."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not getattr(session.config.option, "loadgroup", False):
        return
    ungrouped = [i.nodeid for i in session.items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
    if ungrouped:
        raise pytest.UsageError(f"pytest-xdist did not group {len(ungrouped)} tests (first: {ungrouped[0]}): "
                                "this pytest and pytest-xdist do not work together; see pyproject.toml")  # fmt: skip


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture built once for its module or class (a campaign, a server)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in ("module", "class", "package") for defs in info.name2fixturedefs.values() for d in defs)


@pytest.fixture(autouse=True)
def _unit_tests_start_no_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test that opens a graph store fails at once, saying so (the tier runs with no server)."""
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{request.node.nodeid} is a unit test but opens a graph store: mark it `server`")

    monkeypatch.setattr(EmbeddedStore, "__init__", refuse)
    monkeypatch.setattr(Neo4jStore, "__init__", refuse)
