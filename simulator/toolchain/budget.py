"""The compiler's budget (E0104): how much source it reads and how much work unrolling makes.

Loops are unrolled and `fn`s inlined at compile time, so a 5 KB program can ask for millions of
passes. Before any rule runs, `over_budget` counts the *lowering steps* the program would take
(each loop iteration, each statement and each `fn` call, after unrolling and inlining) and stops
counting at the limit, so a program past it is refused in milliseconds rather than compiled for
minutes. The limits sit far above any shipped program (the FFN baseline, the largest, takes 718
steps and 8 KB).
"""

from __future__ import annotations

from collections.abc import Iterator

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import walk
from chiplore.simulator.toolchain.rules import emit

MAX_SOURCE_BYTES = 64 * 1024
MAX_LOWERING_STEPS = 4096
MAX_INLINE_DEPTH = 32  # fns call fns this deep at most (a recursive fn would inline forever)


class _Exhausted(Exception):
    """The count passed the limit, or inlining nests too deep: nothing more needs counting."""


def source_over_budget(source: str, version: str) -> list[Diagnostic]:
    """E0104 for a source text longer than the compiler reads."""
    size = len(source.encode("utf-8", errors="replace"))
    if size <= MAX_SOURCE_BYTES:
        return []
    return emit("0104", version, f"the program is too large to compile: {size:,} bytes of source "
                f"(the budget is {MAX_SOURCE_BYTES:,})")  # fmt: skip


def lowering_steps(program: ir.Program, limit: int = MAX_LOWERING_STEPS) -> int:
    """The steps lowering the program's kernel takes, counted up to `limit + 1` at most."""
    counter = _Counter(program, limit)
    try:
        for kernel in program.kernels:
            counter.block(kernel.body, {}, ())
    except _Exhausted:
        return limit + 1
    return counter.steps


def steps_over_budget(program: ir.Program, version: str) -> list[Diagnostic]:
    """E0104 for a program whose unrolled, inlined kernel would take more than the budget's steps."""
    counter = _Counter(program, MAX_LOWERING_STEPS)
    try:
        for kernel in program.kernels:
            counter.block(kernel.body, {}, ())
        return []
    except _Exhausted:
        pass
    if counter.too_deep is not None:
        fn = counter.fns[counter.too_deep]
        message = (f"the program is too large to compile: calls of fn {fn.name} nest more than {MAX_INLINE_DEPTH} "
                   "deep (fns are inlined, so one that calls itself never ends)")  # fmt: skip
        return emit("0104", version, message, fn.span)
    kernel = program.kernels[0] if program.kernels else None
    loop = next((n for k in program.kernels for n in walk(k) if isinstance(n, ir.For)), None)
    where = loop.span if loop is not None else kernel.span if kernel is not None else None
    message = (f"the program is too large to compile: unrolling its loops and inlining its fns takes more than "
               f"{MAX_LOWERING_STEPS:,} steps (loop iterations, statements and calls)")  # fmt: skip
    return emit("0104", version, message, where)


class _Counter:
    """A walk that mirrors the lowerer's unrolling and inlining, evaluating only integers."""

    def __init__(self, program: ir.Program, limit: int) -> None:
        self.fns = {item.name: item for item in program.items if isinstance(item, ir.FnDecl)}
        self.limit = limit
        self.steps = 0
        self.too_deep: str | None = None

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise _Exhausted

    def block(self, block: ir.Block, ints: dict[str, int | None], calling: tuple[str, ...]) -> None:
        for statement in block.stmts:
            self.tick()
            if isinstance(statement, ir.For):
                self.loop(statement, ints, calling)
            elif isinstance(statement, ir.Let | ir.Assign):
                ints[statement.name] = self.integer(statement.value, ints)
                self.calls(statement.value, ints, calling)
            elif isinstance(statement, ir.ExprStmt):
                self.calls(statement.expr, ints, calling)
        if block.tail is not None:
            self.tick()
            self.calls(block.tail, ints, calling)

    def loop(self, loop: ir.For, ints: dict[str, int | None], calling: tuple[str, ...]) -> None:
        start, stop = self.integer(loop.start, ints), self.integer(loop.stop, ints)
        if start is None or stop is None:
            return  # the lowerer refuses a bound it cannot evaluate
        for value in range(start, stop):
            self.tick()
            inner = dict(ints)
            inner[loop.var] = value
            self.block(loop.body, inner, calling)

    def calls(self, expr: ir.Expr, ints: dict[str, int | None], calling: tuple[str, ...]) -> None:
        for call in _fn_calls(expr, self.fns):
            self.tick()
            fn = self.fns[call.func]
            if len(calling) >= MAX_INLINE_DEPTH:
                self.too_deep = fn.name
                raise _Exhausted
            bound: dict[str, int | None] = {}
            positional = [a.value for a in call.args if a.name is None]
            for param, value in zip(fn.params, positional, strict=False):
                if isinstance(param, ir.IntParam):
                    bound[param.name] = self.integer(value, ints)
            self.block(fn.body, bound, (*calling, fn.name))

    def integer(self, expr: ir.Expr, ints: dict[str, int | None]) -> int | None:
        """The value of an integer expression (None when it is not one the lowerer evaluates)."""
        if isinstance(expr, ir.Int):
            return expr.value
        if isinstance(expr, ir.Name):
            return ints.get(expr.id)
        if isinstance(expr, ir.Neg):
            value = self.integer(expr.operand, ints)
            return None if value is None else -value
        if isinstance(expr, ir.BinOp):
            left, right = self.integer(expr.left, ints), self.integer(expr.right, ints)
            if left is None or right is None:
                return None
            if expr.op in ("/", "%"):
                return left // max(right, 1) if expr.op == "/" else left % max(right, 1)
            return {"+": left + right, "-": left - right, "*": left * right}.get(expr.op)
        return None


def _fn_calls(expr: ir.Expr, fns: dict[str, ir.FnDecl]) -> Iterator[ir.Call]:
    for node in walk(expr):
        if isinstance(node, ir.Call) and node.func in fns:
            yield node
