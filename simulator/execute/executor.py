"""The functional executor (SIMULATOR.md 6.4): runs a program's lowered ops on numpy values.

Every value is addressed the way the lowerer addresses it: by atom indices seen through views
(tile shifts, renames, rolls, run-time `.at` selections). A device tensor is stored over the atom
digits its layout holds, so replicated copies are one value, padding holds nothing, and a tensor
of partial sums simply keeps the digit of the axis it did not finish reducing. A stream is the
source view's elements over the same digits; stages transform it, reduce some of its digits, and
the end of the pass writes it into its destination by atom index, rounding to the destination's
dtype. Elements never written read as NaN, which propagates to the outputs.

Values are dense here: the QKV and O kernels run at full shape; the FFN's 177 M weight codes wait
for the row-periodic representation of 6.4 (`ExecutionError` says so rather than running out of
memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from simulator.dsl import ir
from simulator.execute.fixtures import Periodic, RopeTable, Value, fixture
from simulator.execute.numerics import F8_VALUES, bf16, f4_decode_nibbles, f8
from simulator.toolchain.digits import AxisSystem, Digit
from simulator.toolchain.lower import SemOp, SemStage, lower_semantics
from simulator.toolchain.lower_dma import _aligned, cuts_of, dm_dims
from simulator.toolchain.placement import Tensor, View

MAX_ELEMENTS = 20_000_000  # a dense stream or tensor beyond this is refused (the FFN waits for periodic values)
TRANSCENDENTAL = {
    "exp": np.exp, "erf": None, "tanh": np.tanh, "rsqrt": lambda x: 1.0 / np.sqrt(x), "recip": lambda x: 1.0 / x,
    "square": np.square, "neg": np.negative,
}  # fmt: skip
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum}

Index = dict[str, np.ndarray]


class ExecutionError(RuntimeError):
    """The executor cannot run this program (a construct it does not model, or too large)."""


class IndexOutOfRange(RuntimeError):
    """A run-time `.at(A = p)` index outside its axis: on the device the DMA never completes (HANG)."""


# ---- stored device tensors ------------------------------------------------------------------


@dataclass
class Stored:
    """A DM/TRF/VRF tensor: one array axis per atom digit its layout holds (`held` values of it)."""

    digits: list[Digit]
    held: list[int]
    data: np.ndarray
    valid: np.ndarray

    @classmethod
    def empty(cls, tensor: Tensor) -> Stored:
        digits: list[Digit] = []
        held: list[int] = []
        for name in ("cluster", "slice", "lane", "elem"):
            for place in tensor.places(name):
                if place.is_rep or not place.digits:
                    continue
                inner = 1
                sizes: list[int] = []
                for digit in reversed(place.digits):
                    size = digit.size
                    if place.restrict is not None:
                        size = min(size, max(1, math.ceil(place.restrict / inner)))
                    sizes.append(size)
                    inner *= digit.size
                digits += list(place.digits)
                held += list(reversed(sizes))
        count = math.prod(held)
        if count > MAX_ELEMENTS:
            raise ExecutionError(f"{tensor.name} holds {count:,} values; the dense executor stops at {MAX_ELEMENTS:,}")
        return cls(digits, held, np.full(held, np.nan, dtype=np.float32), np.zeros(held, dtype=bool))

    def coords(self, root: Index) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        coords = []
        inside: np.ndarray = np.array(True)
        for digit, held in zip(self.digits, self.held, strict=True):
            value = (root.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
            inside = inside & (value < held)
            coords.append(np.minimum(value, held - 1))
        return tuple(coords), inside


@dataclass
class Stream:
    """The values a pass carries: one array axis per enumerated digit of its source view."""

    dims: list[tuple[Digit, np.ndarray, str]]  # digit, its values (view coordinates), field
    data: np.ndarray
    packet: list[Digit] = field(default_factory=list)  # digits in the packet (what sum_packet reduces)
    stash: np.ndarray | None = None
    dtype: str | None = None  # the format the values are exactly in; None once computed in f32
    carried: str = "f32"  # the dtype the stream carries (what a commit without a cast reinterprets)

    def index(self) -> Index:
        return grid_index([(d, v) for d, v, _ in self.dims])

    def reduce(self, keep: list[bool], op: str = "add") -> None:
        axes = tuple(i for i, k in enumerate(keep) if not k)
        if axes:
            reducer = np.max if op == "max" else np.sum
            self.data = reducer(self.data.astype(np.float64), axis=axes).astype(np.float32)
            if self.stash is not None and self.stash.ndim == len(keep):
                self.stash = None
            self.dims = [d for d, k in zip(self.dims, keep, strict=True) if k]


def grid_index(dims: list[tuple[Digit, np.ndarray]]) -> Index:
    """Atom -> view index over a broadcast grid with one axis per dim (nothing materialised)."""
    index: Index = {}
    count = len(dims)
    for axis_no, (digit, values) in enumerate(dims):
        shape = [1] * count
        shape[axis_no] = len(values)
        term = np.asarray(values, dtype=np.int64).reshape(shape) * digit.stride
        index[digit.axis] = index[digit.axis] + term if digit.axis in index else term
    return index


# ---- the machine ------------------------------------------------------------------------------


class Executor:
    def __init__(self, source: str, kernel: str, fixture_set: str, version: str | None = None) -> None:
        _, self.ops = lower_semantics(source, version)
        self.axes: AxisSystem = _axes_of(source)
        self.kernel = kernel
        self.inputs = fixture(kernel, fixture_set)
        self.outputs: dict[str, np.ndarray] = {}
        self.stored: dict[str, Stored] = {}

    def run(self) -> dict[str, np.ndarray]:
        for op in self.ops:
            if op.kind == "dma":
                self._dma(op)
            elif op.kind == "fill":
                self._fill(op)
            else:
                self._pass(op)
        return {name: value.reshape(_shape(self.inputs[name])) for name, value in self.outputs.items()}

    # ---- reading and writing through views ------------------------------------------------------

    def _root(self, view: View, index: Index) -> Index:
        root: Index = {atom: index.get(atom, np.int64(0)) + view.shift(atom) for atom in self.axes.atoms}
        for source, target, offset in reversed(view.renames):
            flat = sum(root[atom] * place for atom, place, _ in self.axes.atoms_of(target)) - offset
            for atom, place, _ in self.axes.atoms_of(source):
                root[atom] = (flat // place) % self.axes.atoms[atom]
        for digit, amount in view.rolls:
            for piece in self.axes.to_atoms(digit):
                value = (root[piece.axis] // piece.stride) % piece.size
                root[piece.axis] = root[piece.axis] + (((value + amount) % piece.size) - value) * piece.stride
        for axis, holder in view.selectors:
            chosen = int(np.asarray(self.inputs[holder]).reshape(-1)[0])
            if not 0 <= chosen < self.axes.size(axis):
                raise IndexOutOfRange(f"{holder} = {chosen} selects outside {axis} (size {self.axes.size(axis)})")
            for atom, place, size in self.axes.atoms_of(axis):
                root[atom] = root[atom] + (chosen // place) % size
        return root

    def read(self, view: View, index: Index) -> np.ndarray:
        tensor = view.tensor
        root = self._root(view, index)
        if tensor.space == "hbm":
            return self._read_hbm(tensor, root)
        stored = self._stored(tensor)
        coords, inside = stored.coords(root)
        values = stored.data[coords]
        ok = stored.valid[coords] & inside
        return np.where(ok, values, np.float32(np.nan))

    def write(self, view: View, index: Index, values: np.ndarray, exact_in: str | None = None) -> None:
        """Store values; `exact_in` names a dtype the values already are, so rounding to a format
        that holds it exactly (f4 in f8, f8 in bf16, ...) is skipped."""
        tensor = view.tensor
        root = self._root(view, index)
        if exact_in is None or not _holds_exactly(tensor.dtype, exact_in):
            values = _round(values.astype(np.float32), tensor.dtype)
        if tensor.space == "hbm":
            flat = self._flat(tensor, root)
            out = self._output(tensor)
            flat, values = np.broadcast_arrays(flat, values)
            out[flat.reshape(-1)] = values.reshape(-1)
            return
        stored = self._stored(tensor)
        coords, inside = stored.coords(root)
        if not stored.digits:  # a scalar per slice (`elem: [1 # 8]`): every position holds the one value
            stored.data[()] = np.asarray(values).reshape(-1)[-1]
            stored.valid[()] = True
            return
        if bool(np.all(inside)):  # the usual case: no masking, numpy broadcasts the index arrays
            stored.data[coords] = values
            stored.valid[coords] = True
            return
        shape = np.broadcast_shapes(values.shape, inside.shape, *(c.shape for c in coords))
        mask = np.broadcast_to(inside, shape)
        picked = tuple(np.broadcast_to(c, shape)[mask] for c in coords)
        stored.data[picked] = np.broadcast_to(values, shape)[mask]
        stored.valid[picked] = True

    def _stored(self, tensor: Tensor) -> Stored:
        if tensor.id not in self.stored:
            self.stored[tensor.id] = Stored.empty(tensor)
        return self.stored[tensor.id]

    def _flat(self, tensor: Tensor, root: Index) -> np.ndarray:
        flat: np.ndarray = np.int64(0)  # type: ignore[assignment]
        row = 1
        for digit in reversed(tensor.hbm):
            flat = flat + ((root.get(digit.axis, np.int64(0)) // digit.stride) % digit.size) * row
            row *= digit.size
        return np.asarray(flat)

    def _output(self, tensor: Tensor) -> np.ndarray:
        if tensor.name not in self.outputs:
            self.outputs[tensor.name] = _dense(self.inputs[tensor.name], tensor.dtype).reshape(-1).copy()
        return self.outputs[tensor.name]

    def _read_hbm(self, tensor: Tensor, root: Index) -> np.ndarray:
        flat = self._flat(tensor, root)
        if tensor.name in self.outputs:  # an output read back after the kernel wrote it
            return self.outputs[tensor.name][flat]
        value = self.inputs[tensor.name]
        if isinstance(value, Periodic):
            per_row = math.prod(value.distinct.shape[1:]) * (2 if tensor.dtype == "f4e2m1" else 1)
            row, col = flat // max(per_row, 1), flat % max(per_row, 1)
            distinct = value.distinct
            rows = row % distinct.shape[0]
            if tensor.dtype == "f4e2m1":
                byte = distinct.reshape(distinct.shape[0], -1)[rows, col // 2]
                return f4_decode_nibbles(np.where(col % 2 == 0, byte & 0xF, byte >> 4))
            picked = distinct.reshape(distinct.shape[0], -1)[rows, col] if distinct.ndim > 1 else distinct[rows]
            return F8_VALUES[picked] if tensor.dtype == "f8e4m3" else picked.astype(np.float32)
        if isinstance(value, RopeTable):
            row, col = flat // value.width, flat % value.width
            wanted = np.unique(row)
            table = value.rows(wanted)
            return table[np.searchsorted(wanted, row), col]
        return _dense(value, tensor.dtype).reshape(-1)[flat]

    # ---- ops ---------------------------------------------------------------------------------------

    def _enumerate(
        self, view: View, constraints: tuple, cuts: dict | None = None
    ) -> list[tuple[Digit, np.ndarray, str]]:
        dims = dm_dims(view, constraints, self.axes, with_copies=False, cuts=cuts)
        out = [(d.digit, np.asarray(d.values, dtype=np.int64), d.field) for d in dims if d.digit is not None]
        if math.prod(len(v) for _, v, _ in out) > MAX_ELEMENTS:
            raise ExecutionError(f"{view.tensor.name}: too many elements for the dense executor")
        return out

    def _dma(self, op: SemOp) -> None:
        assert op.source is not None
        source, destination = (
            _aligned(op.source, op.destination, self.axes),
            _aligned(op.destination, op.source, self.axes),
        )
        constraints = destination.constraints() + source.constraints()
        dm_side, other = (source, destination) if destination.tensor.space == "hbm" else (destination, source)
        dims = self._enumerate(dm_side, constraints, cuts_of(other))
        index = grid_index([(d, v) for d, v, _ in dims])
        self.write(destination, index, self.read(source, index), exact_in=source.tensor.dtype)

    def _fill(self, op: SemOp) -> None:
        dims = self._enumerate(op.destination, op.destination.constraints())
        index = grid_index([(d, v) for d, v, _ in dims])
        self.write(op.destination, index, np.full(tuple(len(v) for _, v, _ in dims), op.value, dtype=np.float32))

    def _pass(self, op: SemOp) -> None:
        assert op.source is not None
        source = _aligned(op.source, op.destination, self.axes)
        destination = _aligned(op.destination, op.source, self.axes)
        # The stream's digits are split wherever a stage names a digit (fetch time/packet, reduce, group,
        # sum_time), so each stage reduces or keeps whole array axes.
        dims = self._enumerate(source, source.constraints(), _stage_cuts(op.stages))
        stream = Stream(dims=dims, data=self.read(source, grid_index([(d, v) for d, v, _ in dims])),
                        dtype=source.tensor.dtype, carried=source.tensor.dtype)  # fmt: skip
        spatial = {d for name in ("cluster", "slice") for p in source.tensor.places(name) for d in p.digits}
        for stage in op.stages:
            self._stage(stage, stream, source, spatial)
        out_dims = self._enumerate(destination, destination.constraints())
        index = grid_index([(d, v) for d, v, _ in out_dims])
        values = _stream_at(stream, index)
        if stream.carried in ("f32", "i32") and destination.tensor.dtype in ("bf16", "f8e4m3", "i8"):
            # 0.5.0 lets a missing narrowing cast through (W0410): the commit adapter takes the stream's
            # f32 bytes in stream order as values of the destination's type, as the hardware does.
            values = _reinterpret(stream.data, destination.tensor.dtype)[: values.size].reshape(values.shape)
        self.write(destination, index, values, exact_in=stream.dtype)

    def _stage(self, stage: SemStage, stream: Stream, source: View, spatial: set[Digit]) -> None:
        name = stage.name
        target_word = next((a.word for a in stage.positional() if a.word), None)
        if name in ("decode", "lut", "cast", "widen", "narrow") and target_word:
            stream.carried = target_word
        elif name in ("contract", "reduce_slices", "allreduce_slices", "reduce_clusters"):
            stream.carried = "i32" if stream.carried in ("i8", "i32") else "f32"
        if name == "fetch":
            packet = stage.kwarg("packet")
            stream.packet = [d for p in (packet.places or ()) for d in p.digits] if packet else []
        elif name in ("cast", "narrow"):
            target = next((a.word for a in stage.positional() if a.word), None)
            if target in ("bf16", "f8e4m3", "i8") and not (stream.dtype and _holds_exactly(target, stream.dtype)):
                stream.data = _round(stream.data, target)
                stream.dtype = target
        elif name == "contract":
            self._contract(stage, stream)
            stream.dtype = None
        elif name == "vector":
            stream.dtype = None
            for arg in stage.args:
                if arg.call is not None:
                    self._vector(arg.call, stream, spatial)
        elif name in ("reduce_slices", "allreduce_slices"):
            stream.dtype = None
            group = stage.kwarg("group")
            digits = [d for p in (group.places or ()) for d in p.digits] if group else []
            op_word = next((a.word for a in stage.positional() if a.word), "add")
            stream.reduce([not any(d.within(g) for g in digits) for d, _, _ in stream.dims], op_word or "add")
        elif name == "reduce_clusters":
            stream.dtype = None
            op_word = next((a.word for a in stage.positional() if a.word), "add")
            stream.reduce([f != "cluster" for _, _, f in stream.dims], op_word or "add")
        # fetch order, decode/widen (exact), switch, collect, transpose and the pass end move values only

    def _contract(self, stage: SemStage, stream: Stream) -> None:
        operand = stage.kwarg("trf")
        if operand is None or operand.view is None:
            raise ExecutionError("contract needs a TRF operand")
        trf = self.read(operand.view, stream.index())
        product = stream.data.astype(np.float64) * trf.astype(np.float64)
        reduce = stage.kwarg("reduce")
        named = [d for p in (reduce.places or ()) for d in p.digits] if reduce else []
        # The contraction reduces what the stream carries (time and packet); a reduced axis's digits on
        # slices or clusters stay, as partial sums, until a reducer or a later pass adds them up.
        keep = [f != "elem" or not any(d.within(n) for n in named) for d, _, f in stream.dims]
        axes = tuple(i for i, k in enumerate(keep) if not k)
        stream.data = (product.sum(axis=axes) if axes else product).astype(np.float32)
        stream.dims = [d for d, k in zip(stream.dims, keep, strict=True) if k]
        fold = stage.kwarg("fold")
        if fold is not None and fold.places:
            stream.packet = [d for p in fold.places for d in p.digits]
        else:
            stream.packet = [d for d in stream.packet if not any(d.within(n) for n in named)]

    def _vector(self, call: SemStage, stream: Stream, spatial: set[Digit]) -> None:
        for arg in call.args:
            if arg.name in ("when", "enable") and arg.number is not None and arg.number == 0:
                return
        func = call.name
        operand = None
        for arg in call.args:
            if arg.name == "vrf" and arg.view is not None:
                operand = self.read(arg.view, stream.index())
            elif arg.name is None and arg.number is not None:
                operand = np.float32(arg.number)
            elif arg.name is None and arg.word == "stash":
                operand = stream.stash
        with np.errstate(all="ignore"):  # garbage in (a missing cast) may overflow: NaN/inf are the answer
            self._apply(func, operand, call, stream, spatial)

    def _apply(self, func: str, operand: object, call: SemStage, stream: Stream, spatial: set[Digit]) -> None:
        x = stream.data
        if func in BINARY:
            if operand is None:
                raise ExecutionError(f"vector {func} needs an operand")
            stream.data = BINARY[func](x, operand).astype(np.float32)
        elif func == "stash":
            stream.stash = x.copy()
        elif func == "erf":
            from scipy.special import erf

            stream.data = erf(x.astype(np.float64)).astype(np.float32)
        elif func in TRANSCENDENTAL:
            stream.data = TRANSCENDENTAL[func](x).astype(np.float32)  # type: ignore[misc]
        elif func == "sum_time":
            digits = [d for a in call.args for p in (a.places or ()) for d in p.digits]
            stream.reduce([not any(d.within(g) for g in digits) for d, _, _ in stream.dims])
        elif func == "sum_packet":
            stream.reduce([not any(d.within(g) for g in stream.packet) for d, _, _ in stream.dims])
            stream.packet = []
        elif func in ("sum_all", "max_all"):
            stream.reduce(
                [d in spatial or f != "elem" for d, _, f in stream.dims], "max" if func == "max_all" else "add"
            )
            stream.packet = []
        else:
            raise ExecutionError(f"vector op {func} is not modelled")


def _stage_cuts(stages: tuple[SemStage, ...]) -> dict[str, set[int]]:
    cuts: dict[str, set[int]] = {}

    def visit(stage: SemStage) -> None:
        for arg in stage.args:
            for place in arg.places or ():
                for digit in place.digits:
                    cuts.setdefault(digit.axis, set()).update({digit.stride, digit.limit})
            if arg.call is not None:
                visit(arg.call)

    for stage in stages:
        visit(stage)
    return cuts


def _reinterpret(values: np.ndarray, dtype: str) -> np.ndarray:
    """f32 values' bytes read as `dtype` values, in order (little-endian, as the DM stores them)."""
    raw = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    if dtype == "bf16":
        halves = raw.view(np.uint16).astype(np.uint32) << 16
        return halves.view(np.float32)
    codes = raw.view(np.uint8)
    return F8_VALUES[codes] if dtype == "f8e4m3" else codes.view(np.int8).astype(np.float32)


def _stream_at(stream: Stream, index: Index) -> np.ndarray:
    """The stream's value at these atom indices (its reduced digits are gone, absent atoms read 0)."""
    picks = []
    inside: np.ndarray = np.array(True)
    for digit, values, _ in stream.dims:
        wanted = (index.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
        start = int(values[0])
        if int(values[-1]) - start + 1 == len(values):  # a contiguous range: no search needed
            position = wanted - start
            inside = inside & (position >= 0) & (position < len(values))
            position = np.clip(position, 0, len(values) - 1)
        else:
            position = np.clip(np.searchsorted(values, wanted), 0, len(values) - 1)
            inside = inside & (values[position] == wanted)
        picks.append(position)
    values = stream.data[tuple(picks)] if picks else stream.data
    return np.where(inside, values, np.float32(np.nan))


# Formats whose values another holds exactly: f4 -> f8 -> bf16 -> f32, i8 -> i32.
_WIDER = {"f4e2m1": 0, "f8e4m3": 1, "bf16": 2, "f32": 3}


def _holds_exactly(wide: str, narrow: str) -> bool:
    if wide == narrow:
        return True
    if wide in _WIDER and narrow in _WIDER:
        return _WIDER[wide] >= _WIDER[narrow]
    return (narrow, wide) == ("i8", "i32")


def _round(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16(values)
    if dtype == "f8e4m3":
        return f8(values)
    return values.astype(np.float32)


def _dense(value: Value, dtype: str) -> np.ndarray:
    if isinstance(value, Periodic):
        return value.dense().astype(np.float32)
    if isinstance(value, RopeTable):
        return value.dense()
    return np.asarray(value, dtype=np.float32)


def _shape(value: Value) -> tuple[int, ...]:
    if isinstance(value, Periodic):
        return (value.rows, *value.distinct.shape[1:])
    if isinstance(value, RopeTable):
        return value.shape
    return np.asarray(value).shape


def _axes_of(source: str) -> AxisSystem:
    from simulator.dsl.parser import parse
    from simulator.toolchain.env import axis_system

    return axis_system(parse(source))


def execute(source: str, kernel: str, fixture_set: str, version: str | None = None) -> dict[str, np.ndarray]:
    """The outputs (`&mut` parameters) after running the program on one fixture set."""
    return Executor(source, kernel, fixture_set, version).run()


__all__ = ["ExecutionError", "Executor", "IndexOutOfRange", "execute", "ir"]
