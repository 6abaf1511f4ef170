"""E0102: every axis, layout, type, dtype, tensor, function and method a program names must exist."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import walk

PIPELINE_CALLS = frozenset({"main", "sub"})
# "did you mean" costs a fuzzy match against every name in scope: a program of thousands of unknown names
# gets suggestions for its first ones only, so its check stays linear.
MAX_SUGGESTIONS = 64
_Unknown = tuple[str, str, Iterable[str], ir.Span | None]  # kind, name, the names it could have meant, where
VECTOR_OPS = frozenset(
    {"add", "sub", "mul", "div", "max", "min", "square", "exp", "erf", "tanh", "rsqrt", "recip", "neg", "stash",
     "sum_time", "sum_packet", "sum_all", "max_all"}
)  # fmt: skip
PATH_CALLS = frozenset({"dm::empty", "dm::zeros", "dm::at_addr"})
# Bare words some stages take as arguments: switch kinds, reducer ops and results, `auto`, `stash`.
KEYWORDS = frozenset({"auto", "broadcast", "gather", "scatter", "add", "max", "leader", "all", "stash"})
METHODS = frozenset(
    {"dma", "dma_into", "tile", "roll", "at", "rename", "fill", "fetch", "lut", "decode", "cast", "widen", "narrow",
     "collect", "switch", "contract", "vector", "reduce_slices", "allreduce_slices", "reduce_clusters", "transpose",
     "commit", "commit_into", "to_trf", "to_vrf"}
)  # fmt: skip


@dataclass
class Scope:
    axes: set[str] = field(default_factory=set)
    layouts: set[str] = field(default_factory=set)
    types: set[str] = field(default_factory=set)
    fns: set[str] = field(default_factory=set)
    values: set[str] = field(default_factory=set)  # tensors, ints, loop variables

    def extended(self, params: Iterable[object], body: ir.Block | None) -> Scope:
        inner = Scope(set(self.axes), set(self.layouts), set(self.types), set(self.fns), set(self.values))
        for param in params:
            if isinstance(param, ir.AxisParam):
                inner.axes.add(param.name)
            elif isinstance(param, ir.LayoutParam):
                inner.layouts.add(param.name)
            elif isinstance(param, ir.TensorParam | ir.IntParam):
                inner.values.add(param.name)
        if body is not None:
            for node in walk(body):
                if isinstance(node, ir.Let | ir.Assign):
                    inner.values.add(node.name)
                elif isinstance(node, ir.For):
                    inner.values.add(node.var)
        return inner


def check_names(program: ir.Program) -> list[Diagnostic]:
    globals_ = Scope()
    for item in program.items:
        if isinstance(item, ir.AxesDecl):
            globals_.axes |= {axis.name for axis in item.axes}
        elif isinstance(item, ir.LayoutDecl):
            globals_.layouts.add(item.name)
        elif isinstance(item, ir.TypeDecl):
            globals_.types.add(item.name)
        elif isinstance(item, ir.FnDecl):
            globals_.fns.add(item.name)
    unknown: list[_Unknown] = []
    for item in program.items:
        if isinstance(item, ir.AxesDecl):
            for axis in item.axes:
                if isinstance(axis, ir.AxisComposite):
                    unknown += [
                        ("axis", part, globals_.axes, axis.span) for part in axis.parts if part not in globals_.axes
                    ]
            continue
        scope = globals_
        if isinstance(item, ir.FnDecl | ir.KernelDecl):
            scope = globals_.extended(item.params, item.body)
        unknown += list(_check_node(item, scope))
    return [_unknown(*found, suggest=index < MAX_SUGGESTIONS) for index, found in enumerate(unknown)]


def _check_node(root: ir.Node, scope: Scope) -> Iterator[_Unknown]:
    for node in walk(root):
        if isinstance(node, ir.HbmType | ir.DevType) and node.dtype not in ir.DTYPES:
            yield ("dtype", node.dtype, ir.DTYPES, node.span)
        elif isinstance(node, ir.Term):
            if node.kind == "axis" and node.axis not in scope.axes:
                yield ("axis", str(node.axis), scope.axes, node.span)
            for _, operand in node.ops:
                if isinstance(operand, str) and operand not in scope.values:
                    yield ("name", operand, scope.values, node.span)
        elif isinstance(node, ir.Spread) and node.name not in scope.layouts:
            yield ("layout", node.name, scope.layouts, node.span)
        elif isinstance(node, ir.TypeRef) and node.name not in scope.types:
            yield ("type", node.name, scope.types, node.span)
        elif isinstance(node, ir.Name):
            known = scope.values | scope.axes | scope.layouts | set(ir.DTYPES) | KEYWORDS | scope.fns
            if node.id not in known:
                yield ("name", node.id, scope.values | scope.axes, node.span)
        elif isinstance(node, ir.Call) and node.func not in scope.fns | PIPELINE_CALLS | VECTOR_OPS:
            yield ("fn", node.func, scope.fns | PIPELINE_CALLS | VECTOR_OPS, node.span)
        elif isinstance(node, ir.PathCall) and f"{node.path}::{node.func}" not in PATH_CALLS:
            yield ("fn", f"{node.path}::{node.func}", PATH_CALLS, node.span)
        elif isinstance(node, ir.Method):
            if node.name not in METHODS:
                yield ("method", node.name, METHODS, node.name_span or node.span)
            elif node.name == "at":
                for arg in node.args:
                    if arg.name is not None and arg.name not in scope.axes:
                        yield ("axis", arg.name, scope.axes, arg.span)
            elif node.name == "rename":
                for arg in [a for a in node.args if a.name is None][:2]:
                    axis = arg.value
                    if isinstance(axis, ir.Name) and axis.id not in scope.axes:  # `t.rename(w, Rall, 0)`
                        yield ("axis", axis.id, scope.axes, axis.span)
            elif node.name in ("tile", "roll") and node.args:
                axis = _digit_axis(node.args[0].value)
                if axis is not None and axis.id not in scope.axes:  # `t.tile(Rows % 4, ..)`: a layout, not an axis
                    yield ("axis", axis.id, scope.axes, axis.span)


def _digit_axis(expr: ir.Expr) -> ir.Name | None:
    """The axis name a view's digit expression (`A`, `A / 4 % 2`) starts from."""
    while isinstance(expr, ir.BinOp) and expr.op in ("/", "%"):
        expr = expr.left
    return expr if isinstance(expr, ir.Name) else None


def _unknown(kind: str, name: str, candidates: Iterable[str], span: ir.Span | None, suggest: bool = True) -> Diagnostic:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6) if suggest else []
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return Diagnostic(code="E0102", severity="error", message=f"unknown {kind} '{name}'{hint}", span=span)
