"""`scripts/neo4j-local` keeps what a team relies on across restarts: an instance made with a password
never starts without one (a user's restart without the variable turned authentication off, and
every password was then accepted), a running one is not handed out for another password, and its
Bolt port is kept where it is free (each restart moved it, and teammates' exported URIs went stale)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from chiplore.kg import neo4j_local

pytestmark = pytest.mark.unit


@pytest.fixture
def made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An instance home as a start with the password 's3cret' left it (stopped)."""
    monkeypatch.setenv("CHIPLORE_NEO4J_LOCAL_HOME", str(tmp_path))
    home = neo4j_local.instance("team").home
    home.mkdir(parents=True)
    (home / "auth").write_text(neo4j_local._auth_mark("s3cret"))
    return home


def test_an_instance_made_with_a_password_does_not_start_without_one(made: Path) -> None:
    with pytest.raises(neo4j_local.Neo4jLocalError, match="would turn its authentication off"):
        neo4j_local.start("team", "")
    assert "s3cret" not in (made / "auth").read_text()  # a hash, never the password


def test_a_running_instance_is_not_handed_out_for_another_password(made: Path) -> None:
    (made / "pid").write_text(str(os.getpid()))  # a live process: the instance runs
    (made / "uri").write_text("bolt://127.0.0.1:7687")
    with pytest.raises(neo4j_local.Neo4jLocalError, match=r"runs with a password, and .* is another"):
        neo4j_local.start("team", "other")
    assert neo4j_local.start("team", "s3cret").uri == "bolt://127.0.0.1:7687"


def test_a_free_port_asked_for_is_kept_and_a_taken_one_is_not() -> None:
    kept = neo4j_local._free_port()
    assert neo4j_local._free_port(kept) == kept
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert neo4j_local._free_port(port) != port


def test_an_instance_an_older_chiplore_made_does_not_start_without_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made before its authentication was kept (a store, no auth file): it may have had a password."""
    monkeypatch.setenv("CHIPLORE_NEO4J_LOCAL_HOME", str(tmp_path))
    (neo4j_local.instance("old").home / "dbms").mkdir(parents=True)
    with pytest.raises(neo4j_local.Neo4jLocalError, match=r"a password, perhaps \(an older chiplore made it\)"):
        neo4j_local.start("old", "")


def test_the_password_is_kept_salted_and_the_ports_file_read_with_care(tmp_path: Path) -> None:
    first, second = neo4j_local._auth_mark("s3cret"), neo4j_local._auth_mark("s3cret")
    assert first != second and neo4j_local._same_auth(first, "s3cret") and not neo4j_local._same_auth(first, "x")
    assert neo4j_local._same_auth(neo4j_local.NO_AUTH, "") and not neo4j_local._same_auth(first, "")
    for kept in ("abc", "7687", "99999 1", ""):
        (tmp_path / "ports").write_text(kept)
        assert neo4j_local._last_ports(tmp_path) == (0, 0)
    (tmp_path / "ports").write_text("7687 7474")
    assert neo4j_local._last_ports(tmp_path) == (7687, 7474)


def test_java_opts_come_after_chiplores_flags_and_a_broken_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last of a JVM flag wins: CHIPLORE_NEO4J_JAVA_OPTS can undo the small server's defaults."""
    monkeypatch.setenv(neo4j_local.JAVA_OPTS_ENV, "-Xmx8g -XX:TieredStopAtLevel=4 '-Dname=a b'")
    flags = neo4j_local.java_flags()
    assert flags[: len(neo4j_local.JVM_FLAGS)] == neo4j_local.JVM_FLAGS
    assert flags[len(neo4j_local.JVM_FLAGS) :] == ["-Xmx8g", "-XX:TieredStopAtLevel=4", "-Dname=a b"]
    monkeypatch.setenv(neo4j_local.JAVA_OPTS_ENV, "-Dname='unclosed")
    with pytest.raises(neo4j_local.Neo4jLocalError, match=r"CHIPLORE_NEO4J_JAVA_OPTS=.* cannot be split"):
        neo4j_local.java_flags()
