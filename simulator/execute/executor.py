"""The functional executor (docs/simrngd.md §9.3): runs a program's lowered ops on numpy values.

Every value is addressed the way the lowerer addresses it: by atom indices seen through views
(tile shifts, renames, rolls, run-time `.at` selections). A device tensor is stored over the atom
digits its layout holds, so replicated copies are one value, padding holds nothing, and a tensor
of partial sums simply keeps the digit of the axis it did not finish reducing. A stream is the
source view's elements over the same digits; stages transform it, reduce some of its digits, and
the end of the pass writes it into its destination by atom index, rounding to the destination's
dtype. Elements never written read as NaN, which propagates to the outputs.

Weights are row-periodic (docs/simrngd.md §9.2), and the values read from them stay factored by
distinct row (`factored.Rows`) through DMAs, DM tensors and passes for as long as rows and columns
stay apart, so the FFN baseline's 59 M-value DM tensors cost what their distinct rows (509 in the harness) cost.
Whatever mixes them falls back to dense arrays; a dense value beyond 20 M elements is an
`ExecutionError`, not an out-of-memory.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.dsl import ir
from chiplore.simulator.execute.factored import Array, ExecutionError, dense, from_table, lift_value, unary
from chiplore.simulator.execute.fixtures import fixture
from chiplore.simulator.execute.number_formats import holds_exactly, reinterpret_f32, round_to
from chiplore.simulator.execute.pass_stages import PassStages
from chiplore.simulator.execute.pass_stream import Stream, stage_cuts, stream_at
from chiplore.simulator.execute.process_memory import keep_freed_memory, without_huge_pages
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.execute.stored_tensor import Index, Stored, grid_index
from chiplore.simulator.execute.values import (
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
from chiplore.simulator.execute.values import dense as dense_input
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.lower import lower_semantics
from chiplore.simulator.toolchain.lower_dma import _aligned, cuts_of, dm_dims
from chiplore.simulator.toolchain.op_semantics import SemOp
from chiplore.simulator.toolchain.placement import Tensor, View

without_huge_pages()
keep_freed_memory()


class IndexOutOfRange(RuntimeError):
    """A run-time `.at(A = p)` index outside its axis: on the device the DMA never completes (HANG)."""


# ---- the machine ------------------------------------------------------------------------------


class Executor(PassStages):
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
        if exact_in is None or not holds_exactly(tensor.dtype, exact_in):
            values = unary(lambda v: round_to(v.astype(np.float32, copy=False), tensor.dtype), values)
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
        if any(values.size == 0 for _, values, _ in dims):
            # the views share no element (a loop step's tile of rows where one member has none): nothing moves
            return
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
        dims = self._enumerate(source, source.constraints(), stage_cuts(op.stages))
        stream = Stream(dims=dims, data=self.read(source, grid_index([(d, v) for d, v, _ in dims])),
                        dtype=source.tensor.dtype, carried=source.tensor.dtype, source=op.source,
                        frame=source)  # fmt: skip
        spatial = {d for name in ("cluster", "slice") for p in source.tensor.places(name) for d in p.digits}
        for stage in op.stages:
            self._stage(stage, stream, source, spatial)
        out_dims = self._enumerate(destination, destination.constraints())
        index = grid_index([(d, v) for d, v, _ in out_dims])
        values, inside = stream_at(stream, index)
        if stream.carried in ("f32", "i32") and destination.tensor.dtype in ("bf16", "f8e4m3", "i8"):
            # 0.5.0 lets a missing narrowing cast through (W0410): the commit adapter takes the stream's
            # f32 bytes in stream order as values of the destination's type, as the hardware does.
            values = reinterpret_f32(dense(stream.data), destination.tensor.dtype)[: values.size].reshape(values.shape)
        # The commit writes the stream's elements where they belong; positions of the destination view
        # the stream does not reach keep what they held.
        self.write(destination, index, values, exact_in=stream.dtype, mask=None if bool(np.all(inside)) else inside)


def _axes_of(source: str) -> AxisSystem:
    from chiplore.simulator.dsl.parser import parse
    from chiplore.simulator.toolchain.env import axis_system

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
