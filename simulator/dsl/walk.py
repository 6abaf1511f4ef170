"""Generic traversal of the Ferrite IR."""

from __future__ import annotations

from collections.abc import Iterator

from simulator.dsl import ir


def walk(node: ir.Node) -> Iterator[ir.Node]:
    """The node and every node below it, parents before children, in source order."""
    stack: list[ir.Node] = [node]
    while stack:
        current = stack.pop()
        yield current
        children: list[ir.Node] = []
        for name in type(current).model_fields:
            if name.endswith("span"):
                continue
            _collect(getattr(current, name), children)
        stack.extend(reversed(children))


def _collect(value: object, into: list[ir.Node]) -> None:
    if isinstance(value, ir.Node):
        into.append(value)
    elif isinstance(value, tuple):
        for item in value:
            _collect(item, into)


def viewed_name(expr: object) -> str | None:
    """The tensor a view expression refers to: `w`, `w.tile(..)`, `o_weight.tile(..).rename(..)`."""
    while isinstance(expr, ir.Method):
        expr = expr.receiver
    return expr.id if isinstance(expr, ir.Name) else None
