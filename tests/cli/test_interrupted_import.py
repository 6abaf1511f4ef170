"""A `graph import --replace` stopped half-way (Ctrl-C, a server that went away) has deleted the old
graph and written part of the file. A user's every command then read the fragment as a graph
(`db check` ok, kernels with no baseline): now each refuses it in one line until an import finishes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.graph_file import NodeLine, RelationshipLine, read_lines
from chiplore.kg.graph_io import import_lines, unfinished_import

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
TOY = "tests.toy:from_settings"  # learnt in seconds


def chiplore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chiplore.cli", *args], env=env, capture_output=True, text=True,
                          timeout=600, cwd=ROOT)  # fmt: skip


def test_a_graph_an_interrupted_import_left_is_refused_until_an_import_finishes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data), "CHIPLORE_TARGET": TOY,
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    assert chiplore(env, "init").returncode == 0
    assert chiplore(env, "learn").returncode == 0
    graph = tmp_path / "graph.jsonl"
    assert chiplore(env, "graph", "export", str(graph)).returncode == 0
    with graph.open() as handle:
        lines = list(read_lines(handle, graph.name))

    def cut_short() -> Iterator[NodeLine | RelationshipLine]:
        yield from lines[: len(lines) // 2]
        raise KeyboardInterrupt  # the user's Ctrl-C half-way

    with EmbeddedStore(data) as store:
        with pytest.raises(KeyboardInterrupt):
            import_lines(store, cut_short(), replace=True, source=str(graph))
        # the interrupted process goes on (a notebook, say): its graph is one an import did not finish
        left = unfinished_import(store)
        assert left is not None and "did not finish" in str(left)
        # while an import's process runs, it is under way: commands wait for it, a second import is refused
        importing = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        try:
            store.write("MATCH (m:SchemaVersion {name: 'import-under-way'}) SET m.owner = $live",
                        {"live": f"{socket.gethostname()}:{importing.pid}"})  # fmt: skip
            live = chiplore(env, "graph", "import", str(graph), "--replace")
            assert live.returncode == 1 and "an import into this graph is under way (process " in live.stderr
            assert "let it finish" in chiplore(env, "status").stderr
        finally:
            importing.kill()
            importing.wait()  # its process has ended since
    for args in (
        ("status",),
        ("best", "gemv"),
        ("graph", "export", str(tmp_path / "again.jsonl")),
        ("cypher", "MATCH (k:Kernel) RETURN k.name"),
        ("query", "stale-facts"),
    ):
        refused = chiplore(env, *args)
        errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
        assert refused.returncode == 1 and len(errors) == 1, refused.stderr
        assert "an import into this graph did not finish (started " in errors[0] and str(graph) in errors[0]
        assert "graph import FILE --replace" in errors[0] and "Traceback" not in refused.stderr
    checked = chiplore(env, "db", "check")
    assert checked.returncode == 1 and "the graph is partial" in checked.stderr, checked.stdout + checked.stderr
    assert chiplore(env, "graph", "import", str(graph), "--replace").returncode == 0
    assert chiplore(env, "db", "check").returncode == 0
    status = chiplore(env, "status", "--json")
    assert status.returncode == 0, status.stderr


def test_an_import_refused_into_a_new_data_dir_leaves_no_data_dir(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "header", "format": "chiplore-graph", "version": 1, "schema_version": 3}\n'
                   '{"kind": "end", "nodes": 2, "relationships": 0}\n')  # fmt: skip
    data = tmp_path / "new"
    env = {**os.environ, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data), "PYTHONPATH": str(ROOT)}
    refused = chiplore(env, "graph", "import", str(bad))
    assert refused.returncode == 1 and "the file holds 0" in refused.stderr and not data.exists()
