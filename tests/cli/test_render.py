"""How the CLI writes a query's values (chiplore.cli.render)."""

from __future__ import annotations

import pytest
from rich.console import Console

from chiplore.cli.render import emit_records, visible

pytestmark = pytest.mark.unit


def test_csv_and_markdown_keep_every_digit_a_reader_needs(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"param": "dm.usable_bytes_per_slice", "value": 1_048_568.0},
            {"param": "noc.chip_bytes_per_cycle", "value": 300.050362457077}]  # fmt: skip
    emit_records(Console(), rows, "csv")
    out = capsys.readouterr().out
    assert "dm.usable_bytes_per_slice,1048568\n" in out  # it was 1.04857e+06
    assert "noc.chip_bytes_per_cycle,300.050362457077\n" in out  # CSV is data: the digits JSON gives
    emit_records(Console(), rows, "markdown")
    out = capsys.readouterr().out
    assert "| dm.usable_bytes_per_slice | 1048568 |" in out
    assert "| noc.chip_bytes_per_cycle | 300.050362457 |" in out  # a table for people: 12 figures


def test_csv_reads_back_as_the_json_does(capsys: pytest.CaptureFixture[str]) -> None:
    """A dashboard loaded `--format csv` and got 123456789.123 for 123456789.123456 and Python's True."""
    rows = [{"x": 123456789.123456, "big": 2.0**62, "tiny": 1.2e-6, "ok": True, "no": False, "n": 3,
             "inf": float("inf")}]  # fmt: skip
    emit_records(Console(), rows, "csv")
    header, line = capsys.readouterr().out.splitlines()
    values = dict(zip(header.split(","), line.split(","), strict=True))
    assert float(values["x"]) == 123456789.123456 and float(values["big"]) == 2.0**62
    assert float(values["tiny"]) == 1.2e-6 and values["n"] == "3"
    assert (values["ok"], values["no"]) == ("true", "false")
    assert values["inf"] == ""  # JSON's null


def test_a_query_with_no_rows_still_has_its_header(capsys: pytest.CaptureFixture[str]) -> None:
    emit_records(Console(), [], "csv", columns=["name", "x"])  # it printed nothing: a csv reader wants a header
    assert capsys.readouterr().out == "name,x\n"
    emit_records(Console(), [], "markdown", columns=["name", "x"])
    assert capsys.readouterr().out == "| name | x |\n|---|---|\n"


def test_control_characters_of_the_graph_reach_the_terminal_as_escapes() -> None:
    """A model's rationale holding ESC[2J cleared a user's screen when `chiplore cypher` printed it."""
    assert visible("a\x1b[2Jb\x00c\nd\te") == "a\\x1b[2Jb\\x00c\nd\te"
    assert visible("plain text, 1,024 B") == "plain text, 1,024 B"
