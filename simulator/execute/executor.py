"""The functional executor (docs/simrngd.md §9.3): runs a program's lowered ops on numpy values.

Every value is addressed the way the lowerer addresses it: by atom indices seen through views
(tile shifts, renames, rolls, run-time `.at` selections). A device tensor is stored over the atom
digits its layout holds, so replicated copies are one value, padding holds nothing, and a tensor
of partial sums simply keeps the digit of the axis it did not finish reducing. A stream is the
source view's elements over the same digits; stages transform it, reduce some of its digits, and
the end of the pass writes it into its destination by atom index, rounding to the destination's
dtype. Elements never written read as NaN, which propagates to the outputs.

Weights are row-periodic (6.3), and the values read from them stay factored by distinct row
(`factored.Rows`) through DMAs, DM tensors and passes for as long as rows and columns stay apart, so
the FFN baseline's 59 M-value DM tensors cost what their distinct rows (509 in the harness) cost.
Whatever mixes them falls back to dense arrays; a dense value beyond 20 M elements is an
`ExecutionError`, not an out-of-memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from simulator.dsl import ir
from simulator.execute.factored import (
    MAX_ELEMENTS,
    Array,
    ExecutionError,
    Rows,
    apply,
    as_slices,
    dense,
    extents,
    from_table,
    key_dims,
    lift,
    lift_value,
    pool_dims,
    reduce_over,
    renumber,
    take,
    unary,
)
from simulator.execute.fixtures import fixture
from simulator.execute.numerics import F8_VALUES, bf16, f8
from simulator.execute.signature import kernel_signature
from simulator.execute.values import (
    InputError,
    Inputs,
    InputValue,
    Outputs,
    Periodic,
    RopeTable,
    check_inputs,
    decode,
    param_shape,
)
from simulator.execute.values import dense as dense_input
from simulator.toolchain.digits import AxisSystem, Digit
from simulator.toolchain.lower import SemOp, SemStage, lower_semantics
from simulator.toolchain.lower_dma import _aligned, cuts_of, dm_dims
from simulator.toolchain.placement import Tensor, View

TRANSCENDENTAL = {
    "exp": np.exp, "erf": None, "tanh": np.tanh, "rsqrt": lambda x: 1.0 / np.sqrt(x), "recip": lambda x: 1.0 / x,
    "square": np.square, "neg": np.negative,
}  # fmt: skip
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum}

Index = dict[str, np.ndarray]


class IndexOutOfRange(RuntimeError):
    """A run-time `.at(A = p)` index outside its axis: on the device the DMA never completes (HANG)."""


# ---- stored device tensors ------------------------------------------------------------------


@dataclass
class Stored:
    """A DM/TRF/VRF tensor: one array axis per atom digit its layout holds (`held` values of it).

    Nothing is allocated until the first write; a tensor written from a periodic weight stays
    factored by distinct row (`Rows`) as long as every write keeps rows and columns apart."""

    name: str
    digits: list[Digit]
    held: list[int]
    value: Array | None = None  # None: never written (reads NaN)

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
        return cls(tensor.name, digits, held)

    def coords(self, root: Index) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Each digit's coordinate, and where they all fall inside what the tensor holds."""
        coords = []
        inside: np.ndarray = np.array(True)
        for digit, held in zip(self.digits, self.held, strict=True):
            value = (root.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
            if held < digit.size and not bool(np.all(value < held)):  # a restricted place: mask, clamp
                inside = inside & (value < held)
                value = np.minimum(value, held - 1)
            coords.append(value)
        return tuple(coords), inside

    def read(self, root: Index) -> Array:
        coords, inside = self.coords(root)
        if self.value is None:
            return np.full(np.broadcast_shapes(*(np.shape(c) for c in coords)), np.nan, dtype=np.float32)
        values = take(self.value, coords)
        return values if bool(np.all(inside)) else np.where(inside, dense(values), np.float32(np.nan))

    def write(self, root: Index, values: Array, mask: np.ndarray | None = None) -> None:
        coords, inside = self.coords(root)
        if mask is not None:
            inside = inside & mask
            if not bool(np.any(inside)):
                return
        if not self.digits:  # a scalar per slice (`elem: [1 # 8]`): every position holds the one value
            self.value = np.asarray(dense(values), dtype=np.float32).reshape(-1)[-1:].reshape(())
            return
        everywhere = bool(np.all(inside))
        if everywhere and not isinstance(self.value, np.ndarray):
            rows = values if isinstance(values, Rows) else self._as_rows(values, coords)
            if rows is not None and self._write_rows(coords, rows):
                return
        data = self._dense()
        values = dense(values)
        if everywhere:  # the usual case: no masking, numpy broadcasts the index arrays
            data[coords] = values
            return
        shape = np.broadcast_shapes(values.shape, inside.shape, *(c.shape for c in coords))
        where = np.broadcast_to(inside, shape)
        picked = tuple(np.broadcast_to(c, shape)[where] for c in coords)
        data[picked] = np.broadcast_to(values, shape)[where]

    def _dense(self) -> np.ndarray:
        if isinstance(self.value, np.ndarray):
            return self.value
        count = math.prod(self.held)
        if count > MAX_ELEMENTS:
            raise ExecutionError(
                f"{self.name} holds {count:,} values that do not factor by row; the dense executor stops at"
                f" {MAX_ELEMENTS:,}"
            )
        data = np.full(self.held, np.nan, dtype=np.float32) if self.value is None else self.value.dense()
        self.value = np.ascontiguousarray(data, dtype=np.float32)
        return self.value

    def _as_rows(self, values: np.ndarray, coords: tuple[np.ndarray, ...]) -> Rows | None:
        """Dense values to write factored: into a factored tensor, or when the write copies them along
        dims they do not vary on (a TRF replicated on every slice holds one copy)."""
        n = max([np.ndim(values), *(np.ndim(c) for c in coords)])
        values = lift(np.asarray(values), n)
        copied = set().union(*(extents(lift(c, n)) for c in coords)) - extents(values)
        if self.value is None and not copied:
            return None
        return Rows(np.zeros((1,) * n, dtype=np.int64), values[None])

    def _write_rows(self, coords: tuple[np.ndarray, ...], values: Rows) -> bool:
        """Write factored values, keeping this tensor factored; False when the write mixes the two
        kinds of dims (the caller then writes densely)."""
        n = values.ndim
        coords = tuple(lift(c, n) for c in coords)
        value_keys, value_pools = key_dims(values), pool_dims(values)
        if self.value is None:
            keyed = []
            for c in coords:
                if extents(c) & value_keys and extents(c) & value_pools:
                    return False
                # Digits the value is copied along hold one row of copies: key digits too.
                keyed.append(bool(extents(c) & value_keys) or bool(extents(c) and not extents(c) & value_pools))
            self.value = Rows(
                np.zeros([h if k else 1 for h, k in zip(self.held, keyed, strict=True)], dtype=np.int64),
                np.full((1, *(1 if k else h for h, k in zip(self.held, keyed, strict=True))), np.nan, np.float32),
            )
        stored = self.value
        assert isinstance(stored, Rows)
        keyed_digits = key_dims(stored)
        key_side = value_keys.union(*(extents(coords[j]) for j in keyed_digits))
        pool_side = value_pools.union(*(extents(c) for j, c in enumerate(coords) if j not in keyed_digits))
        if key_side & pool_side:
            return False
        zero = np.zeros((1,) * n, dtype=np.int64)
        at_key = [c if j in keyed_digits else zero for j, c in enumerate(coords)]
        at_pool = [zero if j in keyed_digits else c for j, c in enumerate(coords)]
        key_shape = np.broadcast_shapes(values.key.shape, *(c.shape for c in at_key))
        at_key_b = tuple(np.broadcast_to(c, key_shape) for c in at_key)
        pool_shape = np.broadcast_shapes(values.pool.shape[1:], *(c.shape for c in at_pool))
        slices = as_slices(tuple(at_pool)) if len(at_pool) == n else None
        at_pool_b = slices if slices is not None else tuple(np.broadcast_to(c, pool_shape) for c in at_pool)
        whole_rows = _covers(at_pool_b, stored.pool.shape[1:])
        if whole_rows and _covers(at_key_b, stored.key.shape):  # the tensor is overwritten: start afresh
            used, key = renumber(np.broadcast_to(values.key, key_shape), values.pool.shape[0])
            fresh = np.full((len(used), *stored.pool.shape[1:]), np.nan, dtype=np.float32)
            fresh[(slice(None), *at_pool_b)] = values.pool[used]
            new_key = np.zeros(stored.key.shape, dtype=np.int64)
            new_key[at_key_b] = key
            self.value = Rows(new_key, fresh)
            return True
        # Each stored row becomes (what it held, what lands on it): rows written from the same distinct
        # value over the same old contents stay one pool row.
        width = values.pool.shape[0]
        old, new = stored.key[at_key_b], np.broadcast_to(values.key, key_shape)
        pairs, inverse = np.unique(old * width + new, return_inverse=True)
        if whole_rows:  # nothing of the old rows survives: no need to copy them
            rows = np.empty((len(pairs), *stored.pool.shape[1:]), dtype=np.float32)
        else:
            rows = stored.pool[pairs // width]
        rows[(slice(None), *at_pool_b)] = values.pool[pairs % width]
        stored.key[at_key_b] = stored.pool.shape[0] + inverse.reshape(key_shape)
        stored.pool = np.concatenate([stored.pool, rows])
        if stored.pool.shape[0] > 2 * stored.key.size + 64:
            compacted = stored.compact()
            self.value = Rows(np.ascontiguousarray(compacted.key), compacted.pool)
        return True


@dataclass
class Stream:
    """The values a pass carries: one array axis per enumerated digit of its source view."""

    dims: list[tuple[Digit, np.ndarray, str]]  # digit, its values (view coordinates), field
    data: Array
    packet: list[Digit] = field(default_factory=list)  # digits in the packet (what sum_packet reduces)
    stash: Array | None = None
    dtype: str | None = None  # the format the values are exactly in; None once computed in f32
    carried: str = "f32"  # the dtype the stream carries (what a commit without a cast reinterprets)
    source: View | None = None  # the pass's source view as written, and as its stream is indexed
    frame: View | None = None

    def index(self) -> Index:
        return grid_index([(d, v) for d, v, _ in self.dims])

    def reduce(self, keep: list[bool], op: str = "add") -> None:
        axes = tuple(i for i, k in enumerate(keep) if not k)
        if axes:
            self.data = reduce_over(self.data, axes, np.max if op == "max" else np.sum)
            if self.stash is not None and self.stash.ndim == len(keep):
                self.stash = None
            self.dims = [d for d, k in zip(self.dims, keep, strict=True) if k]


def _covers(index: tuple[np.ndarray, ...] | tuple[slice, ...], shape: tuple[int, ...]) -> bool:
    """Whether the index (broadcast arrays, or slices) names every position of an array of this shape."""
    count = math.prod(shape)
    if all(isinstance(i, slice) for i in index):
        return all(i.indices(size)[:2] == (0, size) for i, size in zip(index, shape, strict=True))  # type: ignore[union-attr]
    index = tuple(i for i in index if not isinstance(i, slice))
    if math.prod(np.broadcast_shapes(*(i.shape for i in index))) < count:
        return False
    flat = np.ravel_multi_index(index, shape) if index else np.zeros(1, dtype=np.int64)
    return bool(np.all(np.bincount(flat.reshape(-1), minlength=count)))


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
    """One run of a program on given inputs (see `values` for the containers and how their codes are read)."""

    def __init__(self, source: str, inputs: Inputs, version: str | None = None) -> None:
        _, self.ops = lower_semantics(source, version)
        self.axes: AxisSystem = _axes_of(source)
        self.signature = kernel_signature(source)
        check_inputs(self.signature.params, inputs)
        self.inputs: dict[str, InputValue] = {p.name: decode(inputs[p.name], p) for p in self.signature.params}
        self.outputs: dict[str, np.ndarray] = {}
        self.stored: dict[str, Stored] = {}

    def run(self) -> Outputs:
        """Every `&mut` parameter after the run (what the program did not write keeps its input)."""
        for op in self.ops:
            if op.kind == "dma":
                self._dma(op)
            elif op.kind == "fill":
                self._fill(op)
            else:
                self._pass(op)
        return {
            p.name: self.outputs.get(p.name, dense_input(self.inputs[p.name]).reshape(-1)).reshape(param_shape(p))
            for p in self.signature.outputs
        }

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
            chosen = int(dense_input(self.inputs[holder]).reshape(-1)[0])
            if not 0 <= chosen < self.axes.size(axis):
                raise IndexOutOfRange(f"{holder} = {chosen} selects outside {axis} (size {self.axes.size(axis)})")
            for atom, place, size in self.axes.atoms_of(axis):
                root[atom] = root[atom] + (chosen // place) % size
        return root

    def read(self, view: View, index: Index) -> Array:
        tensor = view.tensor
        root = self._root(view, index)
        ndim = max((np.ndim(v) for v in index.values()), default=0)
        if tensor.space == "hbm":
            return lift_value(self._read_hbm(tensor, root), ndim)
        return lift_value(self._stored(tensor).read(root), ndim)

    def write(
        self, view: View, index: Index, values: Array, exact_in: str | None = None, mask: np.ndarray | None = None
    ) -> None:
        """Store values (only where `mask` holds, when given); `exact_in` names a dtype the values
        already are, so rounding to a format that holds it exactly (f4 in f8, f8 in bf16, ...) is skipped."""
        tensor = view.tensor
        root = self._root(view, index)
        if exact_in is None or not _holds_exactly(tensor.dtype, exact_in):
            values = unary(lambda v: _round(v.astype(np.float32), tensor.dtype), values)
        if tensor.space == "hbm":
            flat = self._flat(tensor, root)
            out = self._output(tensor)
            flat, data, where = np.broadcast_arrays(flat, dense(values), True if mask is None else mask)
            out[flat[where]] = data[where]
            return
        self._stored(tensor).write(root, values, mask)

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
            self.outputs[tensor.name] = np.array(dense_input(self.inputs[tensor.name]), dtype=np.float32).reshape(-1)
        return self.outputs[tensor.name]

    def _read_hbm(self, tensor: Tensor, root: Index) -> Array:
        value = self.inputs[tensor.name]
        if isinstance(value, Periodic) and tensor.name not in self.outputs:
            table = value.distinct.reshape(value.period, -1)  # decoded rows
            row, col = self._row_col(tensor, root, table.shape[1])
            return from_table(table, row % table.shape[0], col)
        flat = self._flat(tensor, root)
        if tensor.name in self.outputs:  # an output read back after the kernel wrote it
            return self.outputs[tensor.name][flat]
        if isinstance(value, RopeTable):
            row, col = flat // value.width, flat % value.width
            wanted = np.unique(row)
            table = value.rows(wanted)
            return table[np.searchsorted(wanted, row), col]
        return np.asarray(value).reshape(-1)[flat]

    def _row_col(self, tensor: Tensor, root: Index, per_row: int) -> tuple[np.ndarray, np.ndarray]:
        """The row and the element within the row an HBM index addresses, each varying only along
        the dims its own digits do (so a plain view of a weight reads factored)."""
        row: np.ndarray = np.int64(0)  # type: ignore[assignment]
        col: np.ndarray = np.int64(0)  # type: ignore[assignment]
        place = 1
        for digit in reversed(tensor.hbm):
            coordinate = (root.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
            if place % per_row == 0:
                row = row + coordinate * (place // per_row)
            elif place * digit.size <= per_row:
                col = col + coordinate * place
            else:  # a digit across the row boundary: split the flat index
                flat = self._flat(tensor, root)
                return flat // per_row, flat % per_row
            place *= digit.size
        return np.asarray(row), np.asarray(col)

    # ---- ops ---------------------------------------------------------------------------------------

    def _enumerate(
        self, view: View, constraints: tuple, cuts: dict | None = None
    ) -> list[tuple[Digit, np.ndarray, str]]:
        dims = dm_dims(view, constraints, self.axes, with_copies=False, cuts=cuts)
        return [(d.digit, np.asarray(d.values, dtype=np.int64), d.field) for d in dims if d.digit is not None]

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
                        dtype=source.tensor.dtype, carried=source.tensor.dtype, source=op.source,
                        frame=source)  # fmt: skip
        spatial = {d for name in ("cluster", "slice") for p in source.tensor.places(name) for d in p.digits}
        for stage in op.stages:
            self._stage(stage, stream, source, spatial)
        out_dims = self._enumerate(destination, destination.constraints())
        index = grid_index([(d, v) for d, v, _ in out_dims])
        values, inside = _stream_at(stream, index)
        if stream.carried in ("f32", "i32") and destination.tensor.dtype in ("bf16", "f8e4m3", "i8"):
            # 0.5.0 lets a missing narrowing cast through (W0410): the commit adapter takes the stream's
            # f32 bytes in stream order as values of the destination's type, as the hardware does.
            values = _reinterpret(dense(stream.data), destination.tensor.dtype)[: values.size].reshape(values.shape)
        # The commit writes the stream's elements where they belong; positions of the destination view
        # the stream does not reach keep what they held.
        self.write(destination, index, values, exact_in=stream.dtype, mask=None if bool(np.all(inside)) else inside)

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
                stream.data = unary(lambda v, t=target: _round(v, t), stream.data)
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

    def _operand(self, view: View, stream: Stream) -> Array:
        """A register operand's values at the stream's elements. Operands meet the pass's source the
        way a destination does (`lower_dma._aligned`): an operand that holds only a tile's extent of
        a digit (`A % 8 = 4`) is read by position within the source's tile, one that holds the whole
        digit at the same absolute index, whatever frame the destination gave the stream."""
        index = stream.index()
        if stream.source is None or stream.frame is None:
            return self.read(view, index)
        against = _aligned(stream.source, view, self.axes)
        moved = {atom: stream.frame.shift(atom) - against.shift(atom) for atom in self.axes.atoms}
        atoms = set(index) | {atom for atom, amount in moved.items() if amount}
        index = {atom: index.get(atom, np.int64(0)) + moved[atom] for atom in atoms}
        return self.read(_aligned(view, stream.source, self.axes), index)

    def _contract(self, stage: SemStage, stream: Stream) -> None:
        operand = stage.kwarg("trf")
        if operand is None or operand.view is None:
            raise ExecutionError("contract needs a TRF operand")
        trf = self._operand(operand.view, stream)
        product = apply(lambda a, b: a.astype(np.float64) * b.astype(np.float64), stream.data, trf)
        reduce = stage.kwarg("reduce")
        named = [d for p in (reduce.places or ()) for d in p.digits] if reduce else []
        # The contraction reduces what the stream carries (time and packet); a reduced axis's digits on
        # slices or clusters stay, as partial sums, until a reducer or a later pass adds them up.
        keep = [f != "elem" or not any(d.within(n) for n in named) for d, _, f in stream.dims]
        axes = tuple(i for i, k in enumerate(keep) if not k)
        stream.data = reduce_over(product, axes, np.sum) if axes else unary(lambda v: v.astype(np.float32), product)
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
        operand: Array | np.float32 | None = None
        for arg in call.args:
            if arg.name == "vrf" and arg.view is not None:
                operand = self._operand(arg.view, stream)
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
            binary = BINARY[func]
            stream.data = apply(lambda a, b: binary(a, b).astype(np.float32), x, operand)  # type: ignore[arg-type]
        elif func == "stash":
            stream.stash = x  # values are never changed in place
        elif func == "erf":
            from scipy.special import erf

            stream.data = unary(lambda v: erf(v.astype(np.float64)).astype(np.float32), x)
        elif func in TRANSCENDENTAL:
            transcendental = TRANSCENDENTAL[func]
            stream.data = unary(lambda v: transcendental(v).astype(np.float32), x)  # type: ignore[misc]
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


def _stream_at(stream: Stream, index: Index) -> tuple[Array, np.ndarray]:
    """The stream's value at these atom indices (its reduced digits are gone, absent atoms read 0),
    and where the stream has one at all."""
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
    values = take(stream.data, tuple(picks)) if picks else stream.data
    return values, inside


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


def _axes_of(source: str) -> AxisSystem:
    from simulator.dsl.parser import parse
    from simulator.toolchain.env import axis_system

    return axis_system(parse(source))


def execute_program(source: str, inputs: Inputs, version: str | None = None) -> Outputs:
    """Run a program on the inputs given (one per HBM parameter of its kernel, any container of
    `values`) under `version` (else its header, else the default); the `&mut` parameters after it.

    Raises InputError for inputs that do not fit the signature, IndexOutOfRange for a run-time index
    outside its axis (the device hangs), ExecutionError or LoweringError for a program the executor
    cannot run. Check the program first: the executor runs what the lowerer can place, legal or not."""
    return Executor(source, inputs, version).run()


def execute(source: str, kernel: str, fixture_set: str, version: str | None = None) -> Outputs:
    """The outputs after running the program on one fixture set of a harness kernel."""
    return execute_program(source, fixture(kernel, fixture_set), version)


__all__ = ["ExecutionError", "Executor", "IndexOutOfRange", "InputError", "execute", "execute_program", "ir"]
