"""What a rule needs to know about names in one kernel or fn: axis sizes, declared tensor types,
layouts with their spreads resolved."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import viewed_name, walk
from chiplore.simulator.toolchain.digits import AxisSystem, Digit


def axis_system(program: ir.Program) -> AxisSystem:
    """The program's axes; composites over undeclared parts are left out (E0102 names those)."""
    atoms: dict[str, int] = {}
    composites: dict[str, tuple[str, ...]] = {}
    for item in program.items:
        if isinstance(item, ir.AxesDecl):
            for axis in item.axes:
                if isinstance(axis, ir.AxisAtom):
                    atoms[axis.name] = axis.size
                else:
                    composites[axis.name] = axis.parts
    known = {name: parts for name, parts in composites.items() if all(p in atoms for p in parts)}
    return AxisSystem(atoms=atoms, composites=known)


def expand_layout(layout: ir.Layout, lookup: Callable[[str], ir.Layout | None]) -> dict[str, ir.MapField | ir.IntField]:
    """The fields of `layout` with each `..Spread` expanded where it stands (later fields win, as
    written); `lookup` gives the layout a spread names (None: it is skipped). A chain of spreads may
    be thousands long, so the walk keeps its own stack; a spread of a layout already being expanded
    is skipped (the cycle is E0501's)."""
    fields: dict[str, ir.MapField | ir.IntField] = {}
    stack: list[tuple[str | None, Iterator[ir.LayoutItem]]] = [(None, iter(layout.items))]
    expanding: set[str] = set()
    while stack:
        name, items = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            expanding.discard(name or "")
        elif isinstance(item, ir.Spread):
            target = lookup(item.name)
            if target is not None and item.name not in expanding:
                expanding.add(item.name)
                stack.append((item.name, iter(target.items)))
        else:
            fields[item.name] = item
    return fields


def term_digit(term: ir.Term, axes: AxisSystem) -> Digit | None:
    """The digit an axis term denotes; None for other terms or when a size is unknown."""
    axis = str(term.axis)
    if term.kind != "axis" or (axis not in axes.atoms and axis not in axes.composites):
        return None
    if any(not isinstance(operand, int) or operand <= 0 for _, operand in term.ops):
        return None
    return axes.digit(axis, [(op, int(operand)) for op, operand in term.ops])


@dataclass
class Env:
    axes: AxisSystem = field(default_factory=lambda: AxisSystem(atoms={}, composites={}))
    layouts: dict[str, ir.Layout] = field(default_factory=dict)
    types: dict[str, ir.HbmType | ir.DevType | ir.TypeRef] = field(default_factory=dict)
    tensors: dict[str, ir.HbmType | ir.DevType | ir.TypeRef] = field(default_factory=dict)

    @classmethod
    def of_program(cls, program: ir.Program) -> Env:
        env = cls(axes=axis_system(program))
        for item in program.items:
            if isinstance(item, ir.LayoutDecl):
                env.layouts[item.name] = item.layout
            elif isinstance(item, ir.TypeDecl):
                env.types[item.name] = item.type
        return env

    def for_body(self, params: tuple[object, ...], body: ir.Block) -> Env:
        """The environment inside a kernel or fn: its tensor parameters and typed lets."""
        inner = Env(self.axes, dict(self.layouts), dict(self.types), {})
        for param in params:
            if isinstance(param, ir.TensorParam):
                inner.tensors[param.name] = param.type
        for node in walk(body):
            if isinstance(node, ir.Let) and node.type is not None:
                inner.tensors[node.name] = node.type
        return inner

    def resolve(self, ttype: ir.HbmType | ir.DevType | ir.TypeRef | None) -> ir.HbmType | ir.DevType | None:
        seen: set[str] = set()
        while isinstance(ttype, ir.TypeRef) and ttype.name not in seen:
            seen.add(ttype.name)
            ttype = self.types.get(ttype.name)
        return ttype if isinstance(ttype, ir.HbmType | ir.DevType) else None

    def viewed(self, expr: object) -> ir.HbmType | ir.DevType | None:
        """The declared type of the tensor a view expression refers to."""
        name = viewed_name(expr)
        return self.tensor(name) if name is not None else None

    def tensor(self, name: str) -> ir.HbmType | ir.DevType | None:
        return self.resolve(self.tensors.get(name))

    def fields(self, layout: ir.Layout) -> dict[str, ir.MapField | ir.IntField]:
        """The layout's fields with `..Spread`s expanded (later fields win, as written)."""
        return expand_layout(layout, self.layouts.get)

    def term_positions(self, term: ir.Term) -> int | None:
        """How many positions a mapping term spans; None when it depends on an unknown size."""
        if term.pad is not None:
            return term.pad
        if term.restrict is not None:
            return term.restrict
        if term.kind in ("unit",):
            return 1
        if term.kind == "rep":
            return term.value
        if term.kind == "at":
            return term.positions
        return self.digit_size(term)

    def digit_size(self, term: ir.Term) -> int | None:
        digit = term_digit(term, self.axes)
        return digit.size if digit is not None else None

    def positions(self, mapping: ir.Mapping) -> int | None:
        sizes = [self.term_positions(t) for t in mapping.terms]
        return None if any(s is None for s in sizes) else math.prod(s for s in sizes if s is not None)
