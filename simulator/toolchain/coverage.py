"""E0205, the part that needs the lowered ops: a device tensor is read only where an earlier op wrote it,
once anything wrote it (N0206, a note, says a tensor is read before anything writes it: its first
contents are undefined, as a timing probe may intend).

`dm::empty()` holds nothing; a loop that writes a tensor tile by tile may miss tiles, and a pass
that streams a tile writes only that tile. Reading what nothing wrote returns whatever the DM held
(the executor reads NaN). Each op's footprint on a tensor is a product over the atoms it holds of
the cells it touches (a cell: one value of each digit of that atom the tensor holds; digits it does
not hold are broadcast). Cells that every footprint treats alike are merged, so a 15,360-row tensor
written in 15 tiles is a grid of 15 cells, and the writes and reads are replayed in program order.

Views the analysis does not follow (`rename`, `roll`, `at`) leave their tensor unchecked: the rule
never reports a hole it cannot prove.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.lower_dma import _aligned
from chiplore.simulator.toolchain.lowered import LoweredProgram
from chiplore.simulator.toolchain.op_semantics import SemOp
from chiplore.simulator.toolchain.placement import Tensor, View, admitted_mask
from chiplore.simulator.toolchain.rules import emit

MAX_GRID = 1 << 20  # merged cells per tensor beyond which it is left unchecked
REDUCERS = {"contract", "reduce_slices", "allreduce_slices", "reduce_clusters", "vector"}
Footprint = dict[str, np.ndarray]  # atom -> the root values (a mask over the atom) an op touches


@dataclass
class _Layout:
    """How a device tensor stores each atom it holds: its held digits and how many values of each."""

    digits: dict[str, list[tuple[Digit, int]]]

    @classmethod
    def of(cls, tensor: Tensor) -> _Layout:
        digits: dict[str, list[tuple[Digit, int]]] = {}
        for name in ("cluster", "slice", "lane", "elem"):
            for place in tensor.places(name):
                if place.is_rep or not place.digits:
                    continue
                inner = 1
                held: list[tuple[Digit, int]] = []
                for digit in reversed(place.digits):
                    size = digit.size
                    if place.restrict is not None:
                        size = min(size, max(1, math.ceil(place.restrict / inner)))
                    held.append((digit, size))
                    inner *= digit.size
                for digit, size in reversed(held):
                    digits.setdefault(digit.axis, []).append((digit, size))
        return cls(digits)

    def cells(self, atom: str, roots: np.ndarray) -> tuple[np.ndarray, bool]:
        """The cells the root values of `atom` a mask names land in, and whether any falls outside
        what is held."""
        cell, inside = _cell_map(tuple(self.digits[atom]), len(roots))
        marks = np.zeros(self.size(atom), dtype=bool)
        marks[cell[roots & inside]] = True
        return np.flatnonzero(marks), bool(np.any(roots & ~inside))

    def size(self, atom: str) -> int:
        return math.prod(held for _, held in self.digits[atom])


@functools.lru_cache(maxsize=1024)
def _cell_map(digits: tuple[tuple[Digit, int], ...], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per root value of an atom of `size` values: its cell in a layout holding `digits`, and whether
    the layout holds it. The same few layouts serve every op of a program (and its sibling designs),
    so the digit arithmetic is done once per layout, not once per access."""
    roots = np.arange(size, dtype=np.int64)
    index = np.zeros(size, dtype=np.int64)
    inside = np.ones(size, dtype=bool)
    for digit, held in digits:
        value = (roots // digit.stride) % digit.size
        inside &= value < held
        index = index * held + np.minimum(value, held - 1)
    index.setflags(write=False)
    inside.setflags(write=False)
    return index, inside


@dataclass
class _Event:
    write: bool
    cells: dict[str, np.ndarray]  # atom -> cells
    op: str
    outside: bool = False


@dataclass
class _History:
    tensor: Tensor
    layout: _Layout
    events: list[_Event] = field(default_factory=list)
    followed: bool = True


def check_reads_written(program: LoweredProgram, trace: tuple[SemOp, ...], axes: AxisSystem) -> list[Diagnostic]:
    """E0205 for the first read of each device tensor that reaches cells nothing wrote before it."""
    histories: dict[str, _History] = {}
    for op in trace:
        for view, write, roots in _accesses(op, axes):
            tensor = view.tensor
            if tensor.space == "hbm":
                continue
            history = histories.get(tensor.id)
            if history is None:
                history = histories[tensor.id] = _History(tensor, _Layout.of(tensor))
            if roots is None:
                history.followed = False
                continue
            cells, outside = {}, False
            for atom in history.layout.digits:
                cells[atom], out = history.layout.cells(atom, roots[atom])
                outside |= out
            history.events.append(_Event(write, cells, op.op_id, outside and not write))
    lines = {op.id: op.line for op in program.ops}
    out: list[Diagnostic] = []
    for history in histories.values():
        if history.followed:
            out += _replay(history, program.version, lines)
    return out


def _accesses(op: SemOp, axes: AxisSystem) -> list[tuple[View, bool, Footprint | None]]:
    """(view, is a write, its footprint or None when not followed) of every tensor the op touches."""
    if op.kind == "fill":
        return [(op.destination, True, _roots(op.destination, axes))]
    assert op.source is not None
    source, destination = op.source, op.destination
    accesses: list[tuple[View, bool, Footprint | None]] = [(source, False, _roots(source, axes))]
    for stage in op.stages:
        for arg in (*stage.args, *(a for s in stage.args if s.call is not None for a in s.call.args)):
            if arg.view is not None:
                accesses.append((arg.view, False, _roots(arg.view, axes)))
    contracted = [a for s in op.stages if s.name == "contract" for a in s.args if a.name == "reduce"]
    reduced = {d.axis for a in contracted for p in a.places or () for d in p.digits}
    if any(s.name in REDUCERS - {"vector", "contract"} for s in op.stages) or any(
        c.name.startswith(("sum_", "max_")) for s in op.stages for a in s.args if (c := a.call) is not None
    ):
        reduced |= set(axes.atoms)  # what a reducer leaves is not followed element by element
    accesses.append((destination, True, _written(source, destination, reduced, axes)))
    return accesses


def _roots(view: View, axes: AxisSystem) -> Footprint | None:
    """Per atom the view's tensor holds, the root values the view addresses (None for views the rule
    does not follow)."""
    if view.renames or view.gathers or view.rolls or view.selectors:
        return None
    return {atom: _admitted(view, atom, axes.atoms[atom], view.shift(atom)) for atom in _held(view.tensor)}


def _held(tensor: Tensor) -> set[str]:
    return {d.axis for places in tensor.fields.values() for p in places if not p.is_rep for d in p.digits}


def _admitted(view: View, atom: str, size: int, shift: int) -> np.ndarray:
    """A mask over the atom's root values: the view's indices that pass its restrictions, shifted
    (read-only when unshifted: it is shared)."""
    mask = admitted_mask(tuple(c for c in view.constraints() if c[0].atom == atom), size)
    if shift == 0:
        return mask
    roots = np.zeros(size, dtype=bool)
    shifted = np.flatnonzero(mask) + shift
    roots[shifted[(shifted >= 0) & (shifted < size)]] = True
    return roots


def _written(source: View, destination: View, reduced: set[str], axes: AxisSystem) -> Footprint | None:
    """What a DMA or a pass writes: the destination's positions the source's elements reach (matched
    in the frames `lower_dma._aligned` gives both, as the executor matches them)."""
    if destination.renames or destination.gathers or destination.rolls or destination.selectors:
        return None
    if source.renames or source.gathers or source.rolls or source.selectors:
        return None
    source_frame, destination_frame = _aligned(source, destination, axes), _aligned(destination, source, axes)
    held = {d.axis for d in source.tensor.hbm} | {
        d.axis for places in source.tensor.fields.values() for p in places for d in p.digits
    }
    footprint: Footprint = {}
    for atom in _held(destination.tensor):
        size = axes.atoms[atom]
        index = _admitted(destination_frame, atom, size, 0)
        if atom in held and atom not in reduced:
            index = index & _admitted(source_frame, atom, size, 0)
        roots = np.zeros(size, dtype=bool)
        shifted = np.flatnonzero(index) + destination_frame.shift(atom)
        roots[shifted[(shifted >= 0) & (shifted < size)]] = True
        footprint[atom] = roots
    return footprint


def _replay(history: _History, version: str, lines: dict[str, int | None]) -> list[Diagnostic]:
    atoms = list(history.layout.digits)
    classes: dict[str, np.ndarray] = {}
    counts: list[int] = []
    for atom in atoms:  # merge the cells every footprint treats alike
        size = history.layout.size(atom)
        member = np.zeros((size, len(history.events)), dtype=bool)
        for column, event in enumerate(history.events):
            member[event.cells[atom], column] = True
        packed = np.ascontiguousarray(np.packbits(member, axis=1))  # one row of bytes per cell
        signature = packed.view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
        _, inverse = np.unique(signature, return_inverse=True)
        classes[atom] = inverse.reshape(-1)
        counts.append(int(inverse.max()) + 1 if size else 1)
    if math.prod(counts) > MAX_GRID:
        return []
    written = np.zeros(counts, dtype=bool)
    noted: list[Diagnostic] = []
    for event in history.events:
        chosen = [np.unique(classes[atom][event.cells[atom]]) for atom in atoms]
        picks = np.ix_(*chosen) if atoms else ()
        if event.write:
            written[picks] = True
            continue
        if any(len(c) == 0 for c in chosen):
            continue
        missing = ~written[picks] if atoms else np.array(not written)
        if not bool(np.any(written)):  # nothing written yet: its first contents are undefined (a probe's own)
            if not noted:
                line = lines.get(event.op)
                where = ir.Span(line=line, column=1, end_line=line, end_column=1) if line else None
                noted = emit("0206", version, f"{history.tensor.name} is read by {event.op} before anything writes "
                             "it: its contents are undefined", where)  # fmt: skip
            continue
        if bool(np.any(missing)) or event.outside:
            return _hole(history, event, atoms, classes, picks, missing, version, lines.get(event.op))
    return noted


def _hole(
    history: _History, event: _Event, atoms: list[str], classes: dict[str, np.ndarray], picks: tuple,
    missing: np.ndarray, version: str, line: int | None,
) -> list[Diagnostic]:  # fmt: skip
    name = history.tensor.name
    where = ir.Span(line=line, column=1, end_line=line, end_column=1) if line else None
    if event.outside and not bool(np.any(missing)):
        return emit("0205", version, f"{name} is read by {event.op} past the extent it holds", where)
    first = np.argwhere(missing)[0] if atoms else []
    described = []
    for atom, position, chosen in zip(atoms, first, picks, strict=False):
        cls = int(np.asarray(chosen).reshape(-1)[int(position)])
        cell = int(np.flatnonzero(classes[atom] == cls)[0])
        described.append(_cell_text(history.layout, atom, cell))
    at = ", ".join(d for d in described if d)
    return emit("0205", version, f"{name} is read by {event.op} where nothing wrote it before"
                f"{f' ({at})' if at else ''}: write all of it first, or read only what was written", where)  # fmt: skip


def _cell_text(layout: _Layout, atom: str, cell: int) -> str:
    parts = []
    for digit, held in reversed(layout.digits[atom]):
        parts.append(f"{digit} = {cell % held}")
        cell //= held
    return ", ".join(reversed(parts))
