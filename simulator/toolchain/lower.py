"""lower(program, version) -> LoweredProgram (docs/simrngd.md §6).

An interpreter over the kernel body: `fn`s are inlined at their call sites (tensor, axis, int and
layout parameters bound to the caller's values), loops are unrolled, every type is resolved to
atom-digit places, and each DMA and Tensor-Unit pass becomes an op with its work counts
(lower_dma, lower_pass), its producers (read-after-write) and the buffers it reads and writes
(`#[pipeline(depth = N)]` / `buffers: N` rotate N buffers; without them a loop reuses one, which
the scheduler serialises as write-after-read). Lower only programs that check clean: on anything
else it raises LoweringError rather than guess.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from chiplore.simulator._truth import chip_key
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import CACHED_SOURCE_BYTES, parse
from chiplore.simulator.toolchain.budget import MAX_LOWERING_STEPS
from chiplore.simulator.toolchain.env import Env
from chiplore.simulator.toolchain.lower_names import AxisRef, Frame, LayoutRef, LoweringState
from chiplore.simulator.toolchain.lower_ops import OpLowering
from chiplore.simulator.toolchain.lowered import LoweredProgram, OutputCoverage
from chiplore.simulator.toolchain.op_semantics import SemOp
from chiplore.simulator.toolchain.placement import LoweringError, Tensor, View
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION, spec

MAX_OUTPUT_ELEMENTS = 1 << 28  # an output beyond this is refused rather than exhausting memory (E0105)
VIEW_METHODS = {"tile", "roll", "at", "rename"}
_KINDS = {"float": "float literal", "str": "string", "bracket": "bracket list", "path_call": "path call",
          "method": "method call", "call": "call", "name": "name", "int": "integer", "binop": "integer expression",
          "neg": "negation"}  # fmt: skip


def lower_semantics(text: str, version: str | None = None) -> tuple[LoweredProgram, tuple[SemOp, ...]]:
    """The lowered program and, op by op, the views and resolved stages the executor interprets (and
    the compiler's coverage rule reads). Nothing in either is changed after lowering, so they are
    shared between callers."""
    if len(text) <= CACHED_SOURCE_BYTES:
        return _lower_traced(text, version, chip_key())
    return _trace(text, version)


@functools.lru_cache(maxsize=64)
def _lower_traced(text: str, version: str | None, chip: str | None) -> tuple[LoweredProgram, tuple[SemOp, ...]]:
    # Keyed by chip too: slice and engine numbers are lowered for the chip's shape.
    return _trace(text, version)


def _trace(text: str, version: str | None) -> tuple[LoweredProgram, tuple[SemOp, ...]]:
    program = parse(text)
    lowerer = _Lowerer(program, version or program.toolchain or DEFAULT_VERSION)
    lowerer.trace = []
    lowered = lowerer.run()
    return lowered, tuple(lowerer.trace)


def lower(program: ir.Program | str, version: str | None = None) -> LoweredProgram:
    """Lower a (checked) program under `version` (else its header, else the default)."""
    if isinstance(program, str):
        if len(program) <= CACHED_SOURCE_BYTES:
            return _lower_text(program, version, chip_key())
        program = parse(program)
    chosen = version or program.toolchain or DEFAULT_VERSION
    return _Lowerer(program, chosen).run()


@functools.lru_cache(maxsize=64)
def _lower_text(text: str, version: str | None, chip: str | None) -> LoweredProgram:
    """check, estimate and execute all lower the same text: once is enough (the result is frozen)."""
    return _lower_traced(text, version, chip)[0]


class _Lowerer(OpLowering):
    def __init__(self, program: ir.Program, version: str) -> None:
        self.program = program
        self.version = version
        self.spec = spec(version)
        self.env = Env.of_program(program)
        self.axes = self.env.axes
        self.fns = {item.name: item for item in program.items if isinstance(item, ir.FnDecl)}
        self.state = LoweringState()
        self.trace: list[SemOp] | None = None  # filled by lower_semantics
        self.steps = 0

    def run(self) -> LoweredProgram:
        kernels = self.program.kernels
        if len(kernels) != 1:
            held = "no kernel" if not kernels else f"{len(kernels)} kernels"
            raise LoweringError(f"a Ferrite file holds one kernel, whose parameters are HBM tensors: it holds {held}",
                                rule="0106")  # fmt: skip
        kernel = kernels[0]
        frame = Frame(values={})
        outputs: list[Tensor] = []
        for param in kernel.params:
            if not isinstance(param, ir.TensorParam):
                raise LoweringError(f"a Ferrite file holds one kernel, whose parameters are HBM tensors: {param.name} "
                                    "is not a tensor", rule="0106")  # fmt: skip
            tensor = self._param_tensor(param)
            frame.values[param.name] = View(tensor)
            if param.ref == "&mut":
                outputs.append(tensor)  # the parameter itself, whatever its name is bound to after the body
        self._block(kernel.body, frame, None)
        return LoweredProgram(
            kernel=kernel.name,
            version=self.version,
            ops=tuple(self.state.ops),
            buffers=tuple(self.state.buffers.values()),
            outputs=tuple(self._coverage(tensor) for tensor in outputs),
        )

    def _coverage(self, param: Tensor) -> OutputCoverage:
        """Which elements of an output the DMAs into it write (E0801, docs/simrngd.md §5.3)."""
        width = ir.DTYPE_BYTES[param.dtype]
        sizes = [d.size for d in param.hbm]
        if math.prod(sizes) > MAX_OUTPUT_ELEMENTS:
            raise LoweringError(f"output {param.name} of {math.prod(sizes):,} elements is past the compiler's limit "
                                f"of {MAX_OUTPUT_ELEMENTS:,} elements", rule="0105")  # fmt: skip
        written = np.zeros(math.prod(sizes), dtype=bool)
        for start, end in self.state.written.get(param.id, []):
            written[int(start // width) : math.ceil(end / width)] = True
        grid = written.reshape(sizes)  # no digits (a literal shape): one element, zero-dimensional
        selected = self.state.selected.get(param.id, set())
        for axis_index, digit in enumerate(param.hbm):
            if digit.axis in selected:  # run-time index: the written row stands for all of them
                grid = np.take(grid, [0], axis=axis_index)
        holes = np.flatnonzero(~grid.reshape(-1))
        first = None
        if len(holes):
            position = np.unravel_index(int(holes[0]), grid.shape) if grid.ndim else ()
            named = [d.axis if d.stride == 1 and d.size == self.axes.size(d.axis) else str(d) for d in param.hbm]
            first = ", ".join(f"{n}={int(i)}" for n, d, i in zip(named, param.hbm, position, strict=True) if d.size > 1)
        return OutputCoverage(param=param.name, elements=int(grid.size), written=int(grid.sum()), first_missing=first)

    # ---- statements --------------------------------------------------------------------------

    def _step(self) -> None:
        """The budget's safety net for callers that lower without checking (E0104 refuses first)."""
        self.steps += 1
        if self.steps > MAX_LOWERING_STEPS:
            raise LoweringError(f"the program is too large to compile: it takes more than {MAX_LOWERING_STEPS:,} "
                                "lowering steps", rule="0104")  # fmt: skip

    def _block(self, block: ir.Block, frame: Frame, returns: ir.DevType | None) -> object:
        for statement in block.stmts:
            self._step()
            self._scope = frame
            if isinstance(statement, ir.Let):
                ttype = self._resolve_type(statement.type) if statement.type is not None else None
                frame.values[statement.name] = self._value(statement.value, frame, ttype, statement.name)
            elif isinstance(statement, ir.Assign):
                frame.values[statement.name] = self._value(statement.value, frame, None, statement.name)
            elif isinstance(statement, ir.ExprStmt):
                self._value(statement.expr, frame, None, None)
            elif isinstance(statement, ir.For):
                self._loop(statement, frame)
        if block.tail is not None:
            self._scope = frame
            return self._value(block.tail, frame, returns, None)
        return None

    def _loop(self, loop: ir.For, frame: Frame) -> None:
        start, stop = self._int(loop.start, frame), self._int(loop.stop, frame)
        depth = 1
        for attr in loop.attrs:
            if attr.name == "pipeline":
                for arg in attr.args or ():
                    if arg.name == "depth" and isinstance(arg.value.value, int):
                        depth = arg.value.value
        for k in range(start, stop):
            self._step()
            inner = frame.child(f"{loop.var}={k}/", f"{loop.var}/", depth=depth, iteration=k - start)
            inner.values[loop.var] = k
            self._block(loop.body, inner, None)

    # ---- expressions -------------------------------------------------------------------------

    def _value(self, expr: ir.Expr, frame: Frame, ttype: ir.DevType | None, name: str | None) -> object:
        if isinstance(expr, ir.Int | ir.BinOp | ir.Neg):
            return self._int(expr, frame)
        if isinstance(expr, ir.Name):
            return self._lookup(expr.id, frame)
        if isinstance(expr, ir.Call):
            if expr.func in self.fns:
                return self._inline(self.fns[expr.func], expr, frame, name)
            raise LoweringError(f"{expr.func}(..) cannot be compiled as written: it is not a value (a pass is "
                                "main(..) or sub(..) followed by its stages)", rule="0107")  # fmt: skip
        if isinstance(expr, ir.PathCall):
            return self._allocate(expr, frame, ttype, name)
        if isinstance(expr, ir.Method):
            root = _chain_root(expr)
            if isinstance(root, ir.Call) and root.func in ("main", "sub"):
                return self._pass(expr, frame, ttype, name)
            if expr.name == "dma":
                return self._dma(expr, frame, ttype, name)
            if expr.name == "dma_into":
                return self._dma(expr, frame, None, name)
            if expr.name == "fill":
                return self._fill(expr, frame)
            if expr.name in VIEW_METHODS:
                return self._view(expr, frame)
        raise LoweringError(f"a {_KINDS.get(expr.kind, expr.kind)} cannot be compiled as written: it is not a "
                            "tensor or an integer", rule="0107")  # fmt: skip

    def _lookup(self, name: str, frame: Frame) -> object:
        if name not in frame.values:
            raise LoweringError(f"'{name}' is used before it is defined (or outside the loop that defines it)",
                                rule="0501")  # fmt: skip
        return frame.values[name]

    def _int(self, expr: ir.Expr, frame: Frame) -> int:
        if isinstance(expr, ir.Int):
            return expr.value
        if isinstance(expr, ir.Neg):
            return -self._int(expr.operand, frame)
        if isinstance(expr, ir.Name):
            value = self._lookup(expr.id, frame)
            if isinstance(value, int):
                return value
            raise LoweringError(f"'{expr.id}' cannot be compiled as written: an integer is needed here",
                                rule="0107")  # fmt: skip
        if isinstance(expr, ir.BinOp):
            left, right = self._int(expr.left, frame), self._int(expr.right, frame)
            if expr.op in ("/", "%") and right == 0:
                raise LoweringError("an integer expression cannot be compiled as written: it divides by zero",
                                    rule="0107")  # fmt: skip
            return {"+": left + right, "-": left - right, "*": left * right, "/": left // max(right, 1),
                    "%": left % max(right, 1)}[expr.op]  # fmt: skip
        raise LoweringError(f"a {_KINDS.get(expr.kind, expr.kind)} cannot be compiled as written: an integer is "
                            "needed here", rule="0107")  # fmt: skip

    def _inline(self, fn: ir.FnDecl, call: ir.Call, frame: Frame, binding: str | None) -> object:
        positional = [a for a in call.args if a.name is None]
        if len(positional) != len(fn.params):
            raise LoweringError(f"the call of {fn.name} cannot be compiled as written: {fn.name} takes "
                                f"{len(fn.params)} arguments, it is given {len(positional)}", rule="0107")  # fmt: skip
        site = binding or fn.name
        inner = frame.child(f"{site}/", f"{site}/")
        inner.values = {}
        for param, arg in zip(fn.params, positional, strict=True):
            if isinstance(param, ir.AxisParam):
                if not isinstance(arg.value, ir.Name):
                    raise LoweringError(f"the call of {fn.name} cannot be compiled as written: its argument "
                                        f"{param.name} must be an axis name", rule="0107")  # fmt: skip
                inner.values[param.name] = AxisRef(self._axis_name(arg.value.id, frame))
            elif isinstance(param, ir.IntParam):
                inner.values[param.name] = self._int(arg.value, frame)
            elif isinstance(param, ir.LayoutParam):
                if not isinstance(arg.value, ir.Name):
                    raise LoweringError(f"the call of {fn.name} cannot be compiled as written: its argument "
                                        f"{param.name} must be a layout name", rule="0107")  # fmt: skip
                inner.values[param.name] = LayoutRef(self._layout_name(arg.value.id, frame))
            else:
                value = self._value(arg.value, frame, None, None)
                if not isinstance(value, View):
                    raise LoweringError(f"the call of {fn.name} cannot be compiled as written: its argument "
                                        f"{param.name} must be a tensor", rule="0107")  # fmt: skip
                inner.values[param.name] = value
        returns = None
        if fn.returns is not None:
            # The return type is read in the callee's scope (its axis and int parameters).
            returns = self._resolve_type(fn.returns)
            inner.values["__returns__"] = returns
        saved = self._scope
        self._scope = inner
        try:
            return self._block(fn.body, inner, returns)
        finally:
            self._scope = saved


def _chain_root(expr: ir.Expr) -> ir.Expr:
    while isinstance(expr, ir.Method):
        expr = expr.receiver
    return expr
