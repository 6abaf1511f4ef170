"""E0502: a name is bound once where it is visible (docs/simrngd.md §3.1).

Ferrite calls a tensor by the name its `let` gives it: op labels, buffer identities
(`slot[name][iteration % N]`), the outputs the harness reads and the checker's table of declared
types all go by that name. A second binding would make two tensors share a buffer, an output
parameter stand for a local tensor, or a rule read the other tensor's type, so Ferrite has no
shadowing:

* a parameter, `let`, assignment or loop variable may not take the name of a parameter, an axis,
  layout, type or fn, a dtype or a stage keyword (`auto`, `all`, ...), or a `let` or loop variable
  in scope;
* a `let` (or an assignment, which binds like an untyped `let`) may not repeat another `let` of the
  same kernel or fn, even in another loop: the checker keeps one declared type per name and body;
* a program declares each axis, layout, type, fn and kernel once.

Sibling loops may reuse a loop variable (`for i` twice), since a loop's variable lives in its body.
"""

from __future__ import annotations

from collections.abc import Iterable

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.names import KEYWORDS
from chiplore.simulator.toolchain.rules import emit

_PARAM_KINDS = {ir.TensorParam: "a parameter", ir.AxisParam: "an axis parameter", ir.IntParam: "an int parameter",
                ir.LayoutParam: "a layout parameter"}  # fmt: skip
_ARTICLES = {"axis": "an axis", "layout": "a layout", "type": "a type", "fn": "a fn", "kernel": "a kernel"}


def check_bindings(program: ir.Program, version: str) -> list[Diagnostic]:
    """E0502 for every declaration or binding that reuses a name already bound where it appears."""
    out: list[Diagnostic] = []
    declared: dict[str, dict[str, str]] = {}  # kind -> name -> where it was first declared
    for kind, name, span in _declarations(program):
        earlier = declared.setdefault(kind, {}).get(name)
        if earlier is not None:
            out += _refuse(name, earlier, span, version)
        else:
            declared[kind][name] = _described(_ARTICLES[kind], span)
    reserved = {name: where for kind, names in declared.items() if kind != "kernel" for name, where in names.items()}
    reserved |= {dtype: "a dtype" for dtype in ir.DTYPES} | {word: "a keyword" for word in KEYWORDS}
    for item in program.items:
        if isinstance(item, ir.FnDecl | ir.KernelDecl):
            out += _Body(reserved, version).check(item)
    return out


class _Body:
    """The bindings of one kernel or fn body, scope by scope."""

    def __init__(self, reserved: dict[str, str], version: str) -> None:
        self.reserved = reserved
        self.version = version
        self.lets: dict[str, str] = {}  # every let of the body so far, whatever its scope
        self.out: list[Diagnostic] = []

    def check(self, item: ir.FnDecl | ir.KernelDecl) -> list[Diagnostic]:
        scope: dict[str, str] = {}
        for param in item.params:
            self._bind(param.name, _PARAM_KINDS[type(param)], param.span, scope)
        self._block(item.body, scope)
        return self.out

    def _block(self, block: ir.Block, outer: dict[str, str]) -> None:
        scope = dict(outer)  # a loop body's names end with it
        for statement in block.stmts:
            if isinstance(statement, ir.Let | ir.Assign):
                earlier = self.lets.get(statement.name)
                if earlier is not None and statement.name not in scope:  # a let of another loop's body
                    self.out += _refuse(statement.name, earlier, statement.span, self.version)
                    continue
                if self._bind(statement.name, "a let", statement.span, scope):
                    self.lets[statement.name] = scope[statement.name]
            elif isinstance(statement, ir.For):
                inner = dict(scope)
                if self._bind(statement.var, "a loop variable", statement.span, inner):
                    self._block(statement.body, inner)
                else:
                    self._block(statement.body, scope)

    def _bind(self, name: str, what: str, span: ir.Span | None, scope: dict[str, str]) -> bool:
        earlier = scope.get(name) or self.reserved.get(name)
        if earlier is not None:
            self.out += _refuse(name, earlier, span, self.version)
            return False
        scope[name] = _described(what, span)
        return True


def _declarations(program: ir.Program) -> Iterable[tuple[str, str, ir.Span | None]]:
    for item in program.items:
        if isinstance(item, ir.AxesDecl):
            for axis in item.axes:
                yield "axis", axis.name, axis.span
        elif isinstance(item, ir.LayoutDecl):
            yield "layout", item.name, item.span
        elif isinstance(item, ir.TypeDecl):
            yield "type", item.name, item.span
        elif isinstance(item, ir.FnDecl):
            yield "fn", item.name, item.span
        elif isinstance(item, ir.KernelDecl):
            yield "kernel", item.name, item.span


def _described(what: str, span: ir.Span | None) -> str:
    return f"{what} (line {span.line})" if span is not None else what


def _refuse(name: str, earlier: str, span: ir.Span | None, version: str) -> list[Diagnostic]:
    message = f"'{name}' is already bound, as {earlier}: Ferrite has no shadowing, so give the new binding another name"
    return emit("0502", version, message, span)
