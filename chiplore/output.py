"""Rendering for the CLI: rich tables for people, JSON for programs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kg.store import Record


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, default=str)


def records_table(records: Sequence[Record], title: str | None = None) -> Table:
    columns: list[str] = []
    for record in records:
        columns += [key for key in record if key not in columns]
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(*(_cell(record.get(column)) for column in columns))
    return table


def print_records(console: Console, records: Sequence[Record], *, as_json: bool, title: str | None = None) -> None:
    if as_json:
        click.echo(to_json(list(records)))
        return
    if not records:
        console.print("[dim]no rows[/dim]")
        return
    console.print(records_table(records, title))
    console.print(f"[dim]{len(records)} row{'s' if len(records) != 1 else ''}[/dim]")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)
