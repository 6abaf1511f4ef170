"""The Python API as README shows it (`chiplore.open_session`), on the toy target: a team's script
learns, optimizes, reads and exports; what it gets wrong (a mistyped setting, a bad value, a path
as text, one kernel's name, Cypher that is no text, an unknown format) is a ChiploreError that says
so, never an AttributeError or a setting silently ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chiplore
from chiplore.core.errors import ConfigError, QueryError

pytestmark = pytest.mark.server
TOY = "tests.toy:from_settings"  # learnt and optimized in seconds


def test_a_script_learns_optimizes_reads_and_exports(tmp_path: Path) -> None:
    with chiplore.open_session(data_dir=tmp_path / "data", target=TOY, create=True) as session:
        session.learn(budget_s=120)
        summary = session.optimize("gemv", budget_s=40)  # one name, as a user writes it
        assert summary.kernels == ["gemv"]
        [kernel] = session.status()
        assert kernel.kernel == "gemv" and kernel.best_cycles
        assert "gemv" in session.program_text(session.best("gemv"))
        rows = session.query("accepted-changes", {"kernel": "gemv"})
        assert isinstance(rows, list)
        assert session.cypher("MATCH (k:Kernel) RETURN k.name AS name").rows == [{"name": "gemv"}]
        done = session.export_graph(str(tmp_path / "graph.jsonl"))  # a path as text, as most scripts pass one
        assert done.nodes and json.loads((tmp_path / "graph.jsonl").read_text().splitlines()[0])["kind"] == "header"
        with pytest.raises(QueryError, match="a Cypher query is text, not NoneType"):
            session.cypher(None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="no graph format 'xml'"):
            session.export_graph(tmp_path / "graph.xml", format="xml")  # type: ignore[arg-type]
        assert not (tmp_path / "graph.xml").exists()


@pytest.mark.unit
@pytest.mark.parametrize(("settings", "message"), [
    ({"neo4j_url": "bolt://elsewhere:7687"}, "open_session has no setting 'neo4j_url'; it takes "),
    ({"store": "mongo"}, "store='mongo': Input should be 'embedded' or 'neo4j'"),
])  # fmt: skip
def test_a_setting_open_session_cannot_take_is_refused_in_one_line(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        chiplore.open_session(**settings)
    assert message in str(refused.value) and "\n" not in str(refused.value)
