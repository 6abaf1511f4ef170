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
