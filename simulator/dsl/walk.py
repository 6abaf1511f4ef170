"""Generic traversal of the Ferrite IR."""

from __future__ import annotations

from collections.abc import Iterator

from chiplore.simulator.dsl import ir


def walk(node: ir.Node) -> Iterator[ir.Node]:
    """The node and every node below it, parents before children, in source order."""
    walked = node.walked()
    if walked is None:
        walked = tuple(_walk(node))
        node.keep_walked(walked)
    return iter(walked)


def _walk(node: ir.Node) -> Iterator[ir.Node]:
    stack: list[ir.Node] = [node]
    while stack:
        current = stack.pop()
        yield current
        children: list[ir.Node] = []
        for name in _child_fields(type(current)):
            value = getattr(current, name)
            if isinstance(value, ir.Node):
                children.append(value)
            elif isinstance(value, tuple):
                _collect(value, children)
        stack.extend(reversed(children))


_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type[ir.Node]) -> tuple[str, ...]:
    """The fields of a node class that may hold nodes (not its spans), looked up once per class: the
    checks walk every program's tree a few dozen times."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(name for name in cls.model_fields if not name.endswith("span"))
    return names


def _collect(value: object, into: list[ir.Node]) -> None:
    for item in value:  # type: ignore[attr-defined]
        if isinstance(item, ir.Node):
            into.append(item)
        elif isinstance(item, tuple):
            _collect(item, into)


def viewed_name(expr: object) -> str | None:
    """The tensor a view expression refers to: `w`, `w.tile(..)`, `o_weight.tile(..).rename(..)`."""
    while isinstance(expr, ir.Method):
        expr = expr.receiver
    return expr.id if isinstance(expr, ir.Name) else None
