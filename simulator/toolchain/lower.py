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
from dataclasses import dataclass, field

import numpy as np

from simulator.dsl import ir
from simulator.dsl.parser import CACHED_SOURCE_BYTES, parse
from simulator.toolchain.budget import MAX_LOWERING_STEPS
from simulator.toolchain.digits import AxisSystem, Digit
from simulator.toolchain.env import Env
from simulator.toolchain.lower_dma import dm_base, dm_dims, plan_dma
from simulator.toolchain.lower_pass import plan_pass
from simulator.toolchain.lowered import (
    BufferInfo,
    DmaOp,
    LoweredProgram,
    OutputCoverage,
    PartialDigit,
    PassOp,
    PassWork,
)
from simulator.toolchain.placement import LoweringError, Place, Tensor, View, live_positions, range_restrictions
from simulator.toolchain.versions import DEFAULT_VERSION, spec

SLICES = 256  # per cluster
MAX_OUTPUT_ELEMENTS = 1 << 28  # an output beyond this is refused rather than exhausting memory
VIEW_METHODS = {"tile", "roll", "at", "rename"}
PASS_ENDS = {"commit", "commit_into", "to_trf", "to_vrf"}


@dataclass(frozen=True)
class AxisRef:
    name: str


@dataclass(frozen=True)
class LayoutRef:
    name: str


@dataclass
class Frame:
    values: dict[str, object]
    label: str = ""  # op labels: call sites and loop iterations, e.g. "q/" or "c=2/"
    slot: str = ""  # buffer identities: call sites and loop variables without their values
    depth: int = 1  # pipeline depth of the innermost loop
    iteration: int | None = None

    def child(self, label: str, slot: str, **changes: object) -> Frame:
        frame = Frame(dict(self.values), self.label + label, self.slot + slot, self.depth, self.iteration)
        for key, value in changes.items():
            setattr(frame, key, value)
        return frame


@dataclass
class _State:
    ops: list[DmaOp | PassOp] = field(default_factory=list)
    writers: dict[str, list[str]] = field(default_factory=dict)
    buffers: dict[str, BufferInfo] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    tensor_ids: dict[str, int] = field(default_factory=dict)
    written: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # HBM param -> byte ranges
    selected: dict[str, set[str]] = field(default_factory=dict)  # HBM param -> atoms picked by `.at`


@dataclass(frozen=True)
class StageArg:
    """One resolved argument of a pass stage: places (a mapping), a number, a word, a tensor view,
    or a nested call (`mul(vrf = v)`)."""

    name: str | None
    places: tuple[Place, ...] | None = None
    number: float | None = None
    word: str | None = None
    view: View | None = None
    call: SemStage | None = None


@dataclass(frozen=True)
class SemStage:
    name: str
    args: tuple[StageArg, ...]

    def kwarg(self, name: str) -> StageArg | None:
        return next((a for a in self.args if a.name == name), None)

    def positional(self) -> list[StageArg]:
        return [a for a in self.args if a.name is None]


@dataclass(frozen=True)
class SemOp:
    """What an op does to values, for the executor: the same views the cost model's op was planned from."""

    op_id: str
    kind: str  # dma | pass | fill
    source: View | None
    destination: View
    stages: tuple[SemStage, ...] = ()
    context: str = ""
    value: float = 0.0  # fill


def lower_semantics(text: str, version: str | None = None) -> tuple[LoweredProgram, tuple[SemOp, ...]]:
    """The lowered program and, op by op, the views and resolved stages the executor interprets (and
    the compiler's coverage rule reads). Nothing in either is changed after lowering, so they are
    shared between callers."""
    if len(text) <= CACHED_SOURCE_BYTES:
        return _lower_traced(text, version)
    return _trace(text, version)


@functools.lru_cache(maxsize=64)
def _lower_traced(text: str, version: str | None) -> tuple[LoweredProgram, tuple[SemOp, ...]]:
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
            return _lower_text(program, version)
        program = parse(program)
    chosen = version or program.toolchain or DEFAULT_VERSION
    return _Lowerer(program, chosen).run()


@functools.lru_cache(maxsize=64)
def _lower_text(text: str, version: str | None) -> LoweredProgram:
    """check, estimate and execute all lower the same text: once is enough (the result is frozen)."""
    return _lower_traced(text, version)[0]


class _Lowerer:
    def __init__(self, program: ir.Program, version: str) -> None:
        self.program = program
        self.version = version
        self.spec = spec(version)
        self.env = Env.of_program(program)
        self.axes = self.env.axes
        self.fns = {item.name: item for item in program.items if isinstance(item, ir.FnDecl)}
        self.state = _State()
        self.trace: list[SemOp] | None = None  # filled by lower_semantics
        self.steps = 0

    def run(self) -> LoweredProgram:
        kernels = self.program.kernels
        if len(kernels) != 1:
            raise LoweringError(f"a Ferrite file holds one kernel, found {len(kernels)}")
        kernel = kernels[0]
        frame = Frame(values={})
        for param in kernel.params:
            if not isinstance(param, ir.TensorParam):
                raise LoweringError(f"kernel parameter {param.name} must be a tensor")
            frame.values[param.name] = View(self._param_tensor(param))
        self._block(kernel.body, frame, None)
        outputs = [frame.values[p.name] for p in kernel.params if isinstance(p, ir.TensorParam) and p.ref == "&mut"]
        return LoweredProgram(
            kernel=kernel.name,
            version=self.version,
            ops=tuple(self.state.ops),
            buffers=tuple(self.state.buffers.values()),
            outputs=tuple(self._coverage(view.tensor) for view in outputs if isinstance(view, View)),
        )

    def _coverage(self, param: Tensor) -> OutputCoverage:
        """Which elements of an output the DMAs into it write (E0801, docs/simrngd.md §5.3)."""
        width = ir.DTYPE_BYTES[param.dtype]
        sizes = [d.size for d in param.hbm]
        if math.prod(sizes) > MAX_OUTPUT_ELEMENTS:
            raise LoweringError(f"output {param.name} has {math.prod(sizes):,} elements; the lowerer follows at most "
                                f"{MAX_OUTPUT_ELEMENTS:,}")  # fmt: skip
        written = np.zeros(math.prod(sizes), dtype=bool)
        for start, end in self.state.written.get(param.id, []):
            written[int(start // width) : math.ceil(end / width)] = True
        grid = written.reshape(sizes) if sizes else written
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
            raise LoweringError(f"the program takes more than {MAX_LOWERING_STEPS:,} lowering steps (E0104)")

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
            raise LoweringError(f"{expr.func}(..) is not a value here")
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
        raise LoweringError(f"cannot lower expression of kind {expr.kind}")

    def _lookup(self, name: str, frame: Frame) -> object:
        if name not in frame.values:
            raise LoweringError(f"'{name}' is not defined here")
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
            raise LoweringError(f"'{expr.id}' is not an integer")
        if isinstance(expr, ir.BinOp):
            left, right = self._int(expr.left, frame), self._int(expr.right, frame)
            if expr.op in ("/", "%") and right == 0:
                raise LoweringError("division by zero in an integer expression")
            return {"+": left + right, "-": left - right, "*": left * right, "/": left // max(right, 1),
                    "%": left % max(right, 1)}[expr.op]  # fmt: skip
        raise LoweringError(f"expected an integer, found {expr.kind}")

    def _inline(self, fn: ir.FnDecl, call: ir.Call, frame: Frame, binding: str | None) -> object:
        positional = [a for a in call.args if a.name is None]
        if len(positional) != len(fn.params):
            raise LoweringError(f"{fn.name} takes {len(fn.params)} arguments, got {len(positional)}")
        site = binding or fn.name
        inner = frame.child(f"{site}/", f"{site}/")
        inner.values = {}
        for param, arg in zip(fn.params, positional, strict=True):
            if isinstance(param, ir.AxisParam):
                if not isinstance(arg.value, ir.Name):
                    raise LoweringError(f"axis argument {param.name} of {fn.name} must be an axis name")
                inner.values[param.name] = AxisRef(self._axis_name(arg.value.id, frame))
            elif isinstance(param, ir.IntParam):
                inner.values[param.name] = self._int(arg.value, frame)
            elif isinstance(param, ir.LayoutParam):
                if not isinstance(arg.value, ir.Name):
                    raise LoweringError(f"layout argument {param.name} of {fn.name} must be a layout name")
                inner.values[param.name] = LayoutRef(self._layout_name(arg.value.id, frame))
            else:
                value = self._value(arg.value, frame, None, None)
                if not isinstance(value, View):
                    raise LoweringError(f"argument {param.name} of {fn.name} must be a tensor")
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

    _scope: Frame | None = None

    # ---- names, mappings, types --------------------------------------------------------------

    def _axis_name(self, name: str, frame: Frame | None = None) -> str:
        frame = frame or self._scope
        value = frame.values.get(name) if frame is not None else None
        return value.name if isinstance(value, AxisRef) else name

    def _layout_name(self, name: str, frame: Frame | None = None) -> str:
        frame = frame or self._scope
        value = frame.values.get(name) if frame is not None else None
        return value.name if isinstance(value, LayoutRef) else name

    def _operand(self, operand: int | str) -> int:
        if isinstance(operand, int):
            return operand
        value = self._scope.values.get(operand) if self._scope is not None else None
        if not isinstance(value, int):
            raise LoweringError(f"'{operand}' is not an integer in a mapping")
        return value

    def _digit(self, axis: str, ops: list[tuple[str, int]]) -> Digit:
        axis = self._axis_name(axis)
        if axis not in self.axes.atoms and axis not in self.axes.composites:
            raise LoweringError(f"unknown axis {axis}")
        try:
            return self.axes.digit(axis, ops)
        except ValueError as error:  # `Q % n` with n = 0 from a fn's int parameter
            raise LoweringError(f"{error}: a digit's operands must be positive", rule="0201") from None

    def _place(self, term: ir.Term) -> Place:
        if term.kind == "axis":
            digit = self._digit(str(term.axis), [(op, self._operand(x)) for op, x in term.ops])
            atoms = self.axes.to_atoms(digit)
            if len(atoms) == 1 and atoms[0].axis in self.axes.composites:
                raise LoweringError(f"{digit} does not align with the atoms of {digit.axis}", rule="0204")
            digits = tuple(a for a in atoms if a.size > 1)
            size = digit.size
            count = min(size, term.restrict) if term.restrict is not None else size
            return Place(term.pad or count, digits, restrict=term.restrict, written=digit)
        if term.kind == "rep":
            return Place(term.pad or int(term.value or 1), copies=int(term.value or 1))
        if term.kind == "at":
            return Place(int(term.positions or 1), at=int(term.value or 0))
        return Place(term.pad or 1)

    def _places(self, mapping: ir.Mapping) -> tuple[Place, ...]:
        return tuple(self._place(term) for term in mapping.terms)

    def _mapping_arg(self, expr: ir.Expr | None) -> tuple[Place, ...]:
        if expr is None:
            return ()
        if isinstance(expr, ir.Bracket):
            return self._places(expr.mapping)
        if isinstance(expr, ir.Name):  # `slice = Layout` names a layout's slice mapping
            layout = self.env.layouts.get(self._layout_name(expr.id))
            if layout is not None:
                fields = self.env.fields(layout)
                slice_field = fields.get("slice")
                if isinstance(slice_field, ir.MapField):
                    return self._places(slice_field.mapping)
        raise LoweringError("expected a mapping argument")

    def _resolve_type(self, ttype: ir.TType | None) -> ir.DevType | ir.HbmType | None:
        resolved = self.env.resolve(ttype)
        if resolved is None:
            raise LoweringError("unknown type")
        return resolved

    def _layout_fields(self, layout: ir.Layout) -> dict[str, ir.MapField | ir.IntField]:
        fields: dict[str, ir.MapField | ir.IntField] = {}
        for item in layout.items:
            if isinstance(item, ir.Spread):
                target = self.env.layouts.get(self._layout_name(item.name))
                if target is None:
                    raise LoweringError(f"unknown layout {item.name}")
                fields.update(self._layout_fields(target))
            else:
                fields[item.name] = item
        return fields

    def _param_tensor(self, param: ir.TensorParam) -> Tensor:
        ttype = self._resolve_type(param.type)
        if not isinstance(ttype, ir.HbmType):
            raise LoweringError(f"kernel parameter {param.name} must live in HBM")
        digits = tuple(d for place in self._places(ttype.mapping) for d in place.digits)
        return Tensor(
            id=param.name, name=param.name, space="hbm", dtype=ttype.dtype, hbm=digits,
            mutable=param.ref == "&mut", line=param.span.line if param.span else None,
        )  # fmt: skip

    def _new_tensor(self, ttype: object, name: str | None, frame: Frame, line: int | None) -> Tensor:
        if not isinstance(ttype, ir.DevType):
            raise LoweringError(f"'{name or 'the result'}' needs a device tensor type (dm, trf or vrf)")
        fields = self._layout_fields(ttype.layout)
        places = {k: self._places(v.mapping) for k, v in fields.items() if isinstance(v, ir.MapField)}
        buffers_field = fields.get("buffers")
        # `#[pipeline(depth)]` rotates the loop's DM tensors; register files are rewritten in place.
        depth = buffers_field.value if isinstance(buffers_field, ir.IntField) else None
        return self._make_tensor(name, ttype.space, ttype.dtype, places, frame, line, depth)

    def _make_tensor(self, name: str | None, space: str, dtype: str, fields: dict[str, tuple[Place, ...]],
                     frame: Frame, line: int | None, depth: int | None = None) -> Tensor:  # fmt: skip
        """A device tensor with a unique id and its buffer identity (`depth` rotating buffers in a loop)."""
        name = name or "tmp"
        if depth is None:
            depth = frame.depth if space == "dm" else 1
        buffer = f"{frame.slot}{name}"
        if frame.iteration is not None:
            buffer += f"[{frame.iteration % max(depth, 1)}]"
        tensor_id = self._unique(self.state.tensor_ids, f"{frame.label}{name}")
        tensor = Tensor(id=tensor_id, name=name, space=space, dtype=dtype, fields=fields, buffer=buffer, line=line)
        self._record_buffer(tensor)
        return tensor

    def _view_of(self, tensor: Tensor) -> View:
        """A whole tensor: `T = k` terms hold only the first k values of their digit."""
        restrictions = []
        for places in tensor.fields.values():
            for place in places:
                if place.restrict is not None and place.written is not None and place.restrict < place.size:
                    restrictions += range_restrictions(place.written, 0, place.restrict, self.axes, {}, move=False)
        return View(tensor, restrictions=tuple(restrictions))

    def _record_buffer(self, tensor: Tensor) -> None:
        width = ir.DTYPE_BYTES[tensor.dtype]
        per_slice = width * math.prod(p.positions for p in tensor.places("elem") + tensor.places("lane"))
        slices = _live_slice_ids(View(tensor), self.axes)
        self.state.buffers[tensor.buffer] = BufferInfo(
            id=tensor.buffer, space=tensor.space, bytes_per_slice=per_slice, live_slices=len(slices), slices=slices
        )

    # ---- views -------------------------------------------------------------------------------

    def _as_view(self, expr: ir.Expr, frame: Frame) -> View:
        value = self._value(expr, frame, None, None)
        if not isinstance(value, View):
            raise LoweringError("expected a tensor")
        return value

    def _digit_expr(self, expr: ir.Expr, frame: Frame) -> Digit:
        ops: list[tuple[str, int]] = []
        while isinstance(expr, ir.BinOp) and expr.op in ("/", "%"):
            ops.append((expr.op, self._int(expr.right, frame)))
            expr = expr.left
        if not isinstance(expr, ir.Name):
            raise LoweringError("expected a digit such as `A`, `A / d` or `A % m`")
        saved, self._scope = self._scope, frame
        try:
            return self._digit(expr.id, list(reversed(ops)))
        finally:
            self._scope = saved

    def _view(self, method: ir.Method, frame: Frame) -> View:
        view = self._as_view(method.receiver, frame)
        positional = [a.value for a in method.args if a.name is None]
        shifts = dict(view.shifts)
        if method.name == "tile":
            if len(positional) != 3:
                raise LoweringError("tile takes (digit, start, len)")
            digit = self._digit_expr(positional[0], frame)
            start, length = self._int(positional[1], frame), self._int(positional[2], frame)
            added = range_restrictions(digit, start, start + length, self.axes, shifts, move=True)
            return View(view.tensor, tuple(shifts.items()), view.restrictions + tuple(added), view.renames,
                        view.gathers, view.rolls, view.selectors)  # fmt: skip
        if method.name == "roll":
            digit = self._digit_expr(positional[0], frame)
            amount = self._int(positional[1], frame) if len(positional) > 1 else 1
            return View(view.tensor, view.shifts, view.restrictions, view.renames, view.gathers,
                        (*view.rolls, (digit, amount)), view.selectors)  # fmt: skip
        if method.name == "at":
            selected = [a for a in method.args if a.name is not None]
            if len(selected) != 1:
                raise LoweringError("at takes one `Axis = index` argument")
            axis = self._axis_name(selected[0].name or "", frame)
            whole = self.axes.digit(axis, [])
            added = range_restrictions(whole, 0, 1, self.axes, shifts, move=True)
            atoms = tuple(d.axis for d in self.axes.to_atoms(whole))
            index = selected[0].value
            holder = self._lookup(index.id, frame) if isinstance(index, ir.Name) else None
            selector = ((axis, holder.tensor.name),) if isinstance(holder, View) else ()
            return View(view.tensor, tuple(shifts.items()), view.restrictions + tuple(added), view.renames,
                        view.gathers + atoms, view.rolls, view.selectors + selector)  # fmt: skip
        # rename(A, B, offset): axis A of the tensor seen as the range [offset, offset + |A|) of B
        if len(positional) != 3 or not all(isinstance(p, ir.Name) for p in positional[:2]):
            raise LoweringError("rename takes (axis, axis, offset)")
        source = self._axis_name(positional[0].id, frame)  # type: ignore[union-attr]
        target = self._axis_name(positional[1].id, frame)  # type: ignore[union-attr]
        offset = self._int(positional[2], frame)
        for axis in (source, target):
            if axis not in self.axes.atoms and axis not in self.axes.composites:
                raise LoweringError(f"rename takes axes; {axis} is not one")
        size = self.axes.size(source)
        added = range_restrictions(self.axes.digit(target, []), offset, offset + size, self.axes, shifts, move=False)
        return View(view.tensor, view.shifts, view.restrictions + tuple(added),
                    (*view.renames, (source, target, offset)), view.gathers, view.rolls, view.selectors)  # fmt: skip

    # ---- ops ---------------------------------------------------------------------------------

    def _label(self, frame: Frame, name: str) -> str:
        return self._unique(self.state.labels, f"{frame.label}{name}")

    @staticmethod
    def _unique(seen: dict[str, int], base: str) -> str:
        """`base`, or `base#n` when it was taken n times before."""
        n = seen.get(base, 0)
        seen[base] = n + 1
        return base if n == 0 else f"{base}#{n}"

    def _emit(self, op: DmaOp | PassOp, written: Tensor, whole: bool) -> None:
        self.state.ops.append(op)
        if whole:
            self.state.writers[written.id] = [op.id]
        else:
            self.state.writers.setdefault(written.id, []).append(op.id)

    def _deps(self, reads: list[Tensor]) -> tuple[str, ...]:
        """The writers of what an op reads, first-written first, each once (linear: a tensor a loop
        writes piecewise may have thousands)."""
        return tuple(dict.fromkeys(writer for tensor in reads for writer in self.state.writers.get(tensor.id, [])))

    @staticmethod
    def _buffers(tensors: list[Tensor]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.buffer for t in tensors if t.space != "hbm"))

    def _dma(self, method: ir.Method, frame: Frame, ttype: object, name: str | None) -> View | None:
        source = self._as_view(method.receiver, frame)
        line = method.span.line if method.span else None
        if method.name == "dma":
            destination = self._view_of(self._new_tensor(ttype, name, frame, line))
        else:
            target = next((a.value for a in method.args if a.name is None), None)
            if target is None:
                raise LoweringError("dma_into needs a destination view")
            destination = self._as_view(target, frame)
        engines_arg, packet_arg, order_arg = method.kwarg("engines"), method.kwarg("packet"), method.kwarg("order")
        engines = None
        if isinstance(engines_arg, ir.Bracket):
            engines = tuple(int(t.value or 0) for t in engines_arg.mapping.terms)
        packet = packet_arg.value if isinstance(packet_arg, ir.Int) else None
        order = None
        if isinstance(order_arg, ir.Bracket):
            order = [d for p in self._places_in(order_arg.mapping, frame) for d in p.digits]
        plan = plan_dma(source, destination, self.axes, engines, packet, order, self.spec.auto_engines)
        what = name if method.name == "dma" else f"{destination.tensor.name}<-{source.tensor.name}"
        label = self._label(frame, str(what))
        reads = [source.tensor]
        if destination.tensor.space == "hbm":
            self.state.written.setdefault(destination.tensor.id, []).extend(plan.written)
            self.state.selected.setdefault(destination.tensor.id, set()).update(destination.gathers)
        destination.tensor.partial = _merged(destination.tensor.partial, source.tensor.partial)
        op = DmaOp(
            id=label, label=label, line=line, dma_kind=plan.kind, bytes=plan.bytes, packet_bytes=plan.packet_bytes,
            packets=plan.packets, engines=plan.engines, flows=plan.flows, clusters=plan.clusters,
            source=source.tensor.id, destination=destination.tensor.id, deps=self._deps(reads),
            reads=self._buffers(reads), writes=self._buffers([destination.tensor]),
            partial=_partial_digits(source.tensor, source.tensor.partial),
        )  # fmt: skip
        self._emit(op, destination.tensor, destination.whole and method.name == "dma")
        if self.trace is not None:
            self.trace.append(SemOp(op_id=label, kind="dma", source=source, destination=destination))
        return destination if method.name == "dma" else None

    def _places_in(self, mapping: ir.Mapping, frame: Frame) -> tuple[Place, ...]:
        saved, self._scope = self._scope, frame
        try:
            return self._places(mapping)
        finally:
            self._scope = saved

    def _pass(self, end: ir.Method, frame: Frame, ttype: object, name: str | None) -> View | None:
        chain: list[ir.Method] = []
        node: ir.Expr = end
        while isinstance(node, ir.Method):
            chain.append(node)
            node = node.receiver
        chain.reverse()
        assert isinstance(node, ir.Call)
        context = node.func
        if not node.args:
            raise LoweringError(f"{context}(..) needs a source tensor")
        source = self._as_view(node.args[0].value, frame)
        last = chain[-1]
        if last.name not in PASS_ENDS:
            raise LoweringError(f"a pass ends in commit, commit_into, to_trf or to_vrf, not {last.name}")
        line = node.span.line if node.span else None
        if ttype is None and self._scope is not None and last.name != "commit_into":
            ttype = self._scope.values.get("__returns__")
        saved, self._scope = self._scope, frame
        try:
            plan = plan_pass(context, source, tuple(chain), self.axes, self._mapping_arg,
                             lambda e: self._int(e, frame))  # fmt: skip
        finally:
            self._scope = saved
        operands = [self._as_view(e, frame).tensor for e in plan.operands]
        if last.name == "commit_into":
            target = next((a.value for a in last.args if a.name is None), None)
            if target is None:
                raise LoweringError("commit_into needs a destination view")
            destination = self._as_view(target, frame)
        elif ttype is None:
            # An untyped result keeps the source's placement, in the stream's dtype and the end's space.
            space = {"to_trf": "trf", "to_vrf": "vrf"}.get(last.name, "dm")
            if source.tensor.space == "hbm":
                raise LoweringError("a pass reads a device tensor, not HBM")
            tensor = self._make_tensor(name, space, plan.dtype, dict(source.tensor.fields), frame, line)
            destination = View(tensor)
        else:
            destination = self._view_of(self._new_tensor(ttype, name, frame, line))
        reads = [source.tensor, *operands]
        # Partial sums flow on through every operand; a VRF operand's partial digit must also be one the
        # stream holds, or every position would combine with the same partial (E0710).
        partial, mixes = plan.partial, []
        for operand in operands:
            partial = _merged(partial, operand.partial)
        for expr in plan.vector_operands:
            operand = self._as_view(expr, frame).tensor
            mixes += _partial_digits(operand, tuple(d for d in operand.partial if not _holds(source.tensor, d)))
        destination.tensor.partial = _merged(() if destination.whole else destination.tensor.partial, partial)
        clusters = _live_clusters(source, self.axes)
        label = self._label(frame, name or f"{destination.tensor.name}<-{context}")
        op = PassOp(
            id=label, label=label, line=line, context=context,  # type: ignore[arg-type]
            clusters=clusters, live_slices=live_positions(source.tensor.places("slice"), source.constraints(),
                                                          self.axes),
            work=plan.work, shape=plan.shape, sources=tuple(t.id for t in reads), destination=destination.tensor.id,
            deps=self._deps(reads), reads=self._buffers(reads), writes=self._buffers([destination.tensor]),
            mixes_partial=tuple(mixes),
        )  # fmt: skip
        self._emit(op, destination.tensor, destination.whole and last.name != "commit_into")
        if self.trace is not None:
            saved, self._scope = self._scope, frame
            try:
                stages = tuple(self._resolve_stage(stage, frame) for stage in chain)
            finally:
                self._scope = saved
            self.trace.append(SemOp(op_id=label, kind="pass", source=source, destination=destination, stages=stages,
                                    context=context))  # fmt: skip
        return destination if last.name != "commit_into" else None

    def _resolve_stage(self, stage: ir.Method | ir.Call, frame: Frame) -> SemStage:
        name = stage.name if isinstance(stage, ir.Method) else stage.func
        args: list[StageArg] = []
        for arg in stage.args:
            if name == "commit_into" and arg.name is None:
                continue  # the destination view is the op's destination
            args.append(self._resolve_arg(arg, frame))
        return SemStage(name=name, args=tuple(args))

    def _resolve_arg(self, arg: ir.Arg, frame: Frame) -> StageArg:
        value = arg.value
        if isinstance(value, ir.Bracket):
            return StageArg(arg.name, places=self._places(value.mapping))
        if isinstance(value, ir.Float):
            return StageArg(arg.name, number=value.value)
        if isinstance(value, ir.Neg) and isinstance(value.operand, ir.Float):  # `min(-1.0)`
            return StageArg(arg.name, number=-value.operand.value)
        if isinstance(value, ir.Int | ir.BinOp | ir.Neg):
            return StageArg(arg.name, number=float(self._int(value, frame)))
        if isinstance(value, ir.Call):
            return StageArg(arg.name, call=self._resolve_stage(value, frame))
        if isinstance(value, ir.Name):
            bound = frame.values.get(value.id)
            if isinstance(bound, View):
                return StageArg(arg.name, view=bound)
            if isinstance(bound, int):
                return StageArg(arg.name, number=float(bound))
            if (arg.name == "slice" and value.id in self.env.layouts) or isinstance(bound, LayoutRef):
                return StageArg(arg.name, places=self._mapping_arg(value))
            return StageArg(arg.name, word=value.id)
        if isinstance(value, ir.Method):
            return StageArg(arg.name, view=self._as_view(value, frame))
        raise LoweringError(f"cannot resolve the argument {arg.name or ''} of {arg.value.kind}")

    def _fill(self, method: ir.Method, frame: Frame) -> None:
        view = self._as_view(method.receiver, frame)
        constant = next((a.value for a in method.args if a.name is None), None)
        value = float(constant.value) if isinstance(constant, ir.Int | ir.Float) else 0.0
        self._fill_view(view, frame, method.span.line if method.span else None, value)

    def _fill_view(self, view: View, frame: Frame, line: int | None, value: float = 0.0) -> None:
        tensor = view.tensor
        elems = live_positions(tensor.places("elem"), view.constraints(), self.axes)
        flits = max(1, math.ceil(elems * ir.DTYPE_BYTES[tensor.dtype] / 32))
        label = self._label(frame, f"{tensor.name}.fill")
        op = PassOp(
            id=label, label=label, line=line, context="main", clusters=_live_clusters(view, self.axes),
            live_slices=live_positions(tensor.places("slice"), view.constraints(), self.axes),
            work=PassWork(vector_flits=flits, flits=flits, commit_writes=flits), sources=(), destination=tensor.id,
            deps=(), reads=(), writes=self._buffers([tensor]),
        )  # fmt: skip
        self._emit(op, tensor, False)
        if self.trace is not None:
            self.trace.append(SemOp(op_id=label, kind="fill", source=None, destination=view, value=value))

    def _allocate(self, call: ir.PathCall, frame: Frame, ttype: object, name: str | None) -> View:
        if call.path != "dm" or call.func not in ("empty", "zeros"):
            raise LoweringError(f"{call.path}::{call.func} is not supported by the lowerer")
        line = call.span.line if call.span else None
        view = self._view_of(self._new_tensor(ttype, name, frame, line))
        if call.func == "zeros":
            self._fill_view(view, frame, line)
        return view


def _merged(first: tuple[Digit, ...], second: tuple[Digit, ...]) -> tuple[Digit, ...]:
    return tuple(dict.fromkeys(first + second))


def _holds(tensor: Tensor, digit: Digit) -> bool:
    """Does the tensor place (part of) this digit, so each position sees its own partial?"""
    placed = [d for places in tensor.fields.values() for p in places for d in p.digits] + list(tensor.hbm)
    return any(d.axis == digit.axis and d.stride < digit.limit and digit.stride < d.limit for d in placed)


def _partial_digits(tensor: Tensor, digits: tuple[Digit, ...]) -> tuple[PartialDigit, ...]:
    return tuple(PartialDigit(tensor=tensor.name, digit=str(d), axis=d.axis) for d in digits)


def _chain_root(expr: ir.Expr) -> ir.Expr:
    while isinstance(expr, ir.Method):
        expr = expr.receiver
    return expr


def _live_clusters(view: View, axes: AxisSystem) -> tuple[int, ...]:
    """Cluster indices that hold data of the view."""
    return tuple(sorted({i // SLICES for i in _live_slice_ids(view, axes)}))


def _live_slice_ids(view: View, axes: AxisSystem) -> tuple[int, ...]:
    """Global ids (cluster * 256 + slice) of the slices that hold the view's data or copies."""
    dims = [d for d in dm_dims(view, view.constraints(), axes, with_copies=True) if d.field in ("cluster", "slice")]
    base = dm_base(view)
    ids = {int(base["cluster"]) * SLICES + int(base["slice"])}
    for dim in dims:
        scale = SLICES if dim.field == "cluster" else 1
        ids = {i + v * int(dim.step) * scale for i in ids for v in dim.values}
    return tuple(sorted(ids))
