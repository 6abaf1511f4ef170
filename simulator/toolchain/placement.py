"""Resolved placements: mapping terms turned into atom digits, and views of tensors.

The lowerer works on *atom* digits (composite axes split into their atoms), so `[Qs]` and
`[Ns, Gs, Ds]` place the same data the same way. A view (`tile`, `at`, `rename`, `roll`) never
copies: it shifts atom indices, restricts digits to ranges and renames axes, and every count the
lowerer makes (live slices, packets, bytes) is taken under those restrictions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from chiplore.simulator.toolchain.digits import AxisSystem, Digit


class LoweringError(ValueError):
    """A construct the lowerer cannot place (the checker reports most of these as diagnostics). `rule`
    names the legality rule it breaks, where one does: values the IR rules cannot see (a digit's
    operand that a fn's int parameter supplies) are only known once lowering binds them."""

    def __init__(self, message: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class Restriction:
    """Atom-level predicate lo <= ((root - offset) // stride) % size < hi on a root atom index;
    `offset` is the shift in force when the view that made it was taken."""

    atom: str
    stride: int
    size: int
    lo: int
    hi: int
    offset: int = 0

    def admits(self, root: np.ndarray) -> np.ndarray:
        local = root - self.offset
        value = (local // self.stride) % self.size
        return (local >= 0) & (value >= self.lo) & (value < self.hi)


@dataclass(frozen=True)
class Place:
    """One mapping term after resolution: `positions` slots, holding the data of `digits` (atom
    digits, most significant first), or `copies` copies of it (rep), or nothing but position `at`."""

    positions: int
    digits: tuple[Digit, ...] = ()
    restrict: int | None = None  # `= k`: only the first k values of the digits
    written: Digit | None = None  # the digit as written (possibly on a composite axis)
    copies: int = 1  # rep(n)
    at: int = 0  # unit / at(k, n): the position that holds the data

    @property
    def is_rep(self) -> bool:
        return self.copies > 1

    @property
    def size(self) -> int:
        """Values of the digits (before restrictions)."""
        return math.prod(d.size for d in self.digits)


@dataclass(frozen=True)
class View:
    """A tensor seen through views: atom index shifts (tile starts, rename offsets), restrictions in
    view coordinates, renamed axes, runtime-selected atoms (`at`) and rolled digits."""

    tensor: Tensor
    shifts: tuple[tuple[str, int], ...] = ()  # view index + shift = root index, per atom
    restrictions: tuple[Restriction, ...] = ()
    renames: tuple[tuple[str, str, int], ...] = ()  # (from axis, to axis, offset)
    gathers: tuple[str, ...] = ()  # atoms picked at run time by `.at(A = p)`
    rolls: tuple[tuple[Digit, int], ...] = ()
    selectors: tuple[tuple[str, str], ...] = ()  # (axis, the i32 parameter holding its index) per `.at`

    @property
    def whole(self) -> bool:
        return not (self.restrictions or self.shifts or self.gathers)

    def shift(self, atom: str) -> int:
        return dict(self.shifts).get(atom, 0)

    def constraints(self) -> tuple[tuple[Restriction, int], ...]:
        """Each restriction with the shift that turns a view index of its atom into a root index."""
        return tuple((r, self.shift(r.atom)) for r in self.restrictions)


@dataclass
class Tensor:
    """One logical tensor: a kernel parameter in HBM or a device tensor with resolved places."""

    id: str
    name: str
    space: str  # hbm | dm | trf | vrf
    dtype: str
    hbm: tuple[Digit, ...] = ()  # HBM parameters: row-major atom digits
    fields: dict[str, tuple[Place, ...]] = field(default_factory=dict)  # cluster, slice, lane, elem
    buffer: str = ""
    mutable: bool = False
    line: int | None = None
    # Digits of a partly reduced axis that the data still carries: a tensor of partial sums (E0710).
    partial: tuple[Digit, ...] = ()

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and other.id == self.id

    def places(self, name: str) -> tuple[Place, ...]:
        return self.fields.get(name, ())


def range_restrictions(
    digit: Digit, lo: int, hi: int, axes: AxisSystem, shifts: dict[str, int], move: bool
) -> list[Restriction]:
    """Restrict a (possibly composite) digit to [lo, hi), in the frame given by `shifts`.

    With `move` (a tile), the range's start becomes index 0 of the new frame and `shifts` is
    updated in place; without it (a rename's range) the frame stays where it is."""
    if not 0 <= lo < hi <= digit.size:
        raise LoweringError(f"range [{lo}, {hi}) outside {digit} of size {digit.size}", rule="0207")
    atoms = axes.to_atoms(digit)
    if len(atoms) == 1 and atoms[0].axis in axes.composites:
        raise LoweringError(f"{digit} does not align with the atoms of {digit.axis}", rule="0204")
    inner = 1
    index = len(atoms) - 1
    # Inner atom digits the range covers whole stay free.
    while index >= 0 and lo % (inner * atoms[index].size) == 0 and (hi - lo) % (inner * atoms[index].size) == 0:
        inner *= atoms[index].size
        index -= 1
    if index < 0:
        return []
    if (hi - lo) % inner or lo % inner:
        raise LoweringError(f"range [{lo}, {hi}) of {digit} cuts an atom digit", rule="0204")
    first, count = (lo // inner) % atoms[index].size, (hi - lo) // inner
    if first + count > atoms[index].size:
        raise LoweringError(f"range [{lo}, {hi}) of {digit} wraps an atom digit", rule="0204")
    pieces = [(atoms[index], first, count)]
    carry = lo // (inner * atoms[index].size)
    for outer in reversed(atoms[:index]):
        pieces.append((outer, carry % outer.size, 1))
        carry //= outer.size
    restrictions: list[Restriction] = []
    for atom_digit, start, n in pieces:
        offset = shifts.get(atom_digit.axis, 0)
        restrictions.append(Restriction(atom_digit.axis, atom_digit.stride, atom_digit.size, start, start + n, offset))
        if move and start:
            shifts[atom_digit.axis] = offset + start * atom_digit.stride
    return restrictions


Constraint = tuple[Restriction, int]  # a restriction and the shift from view index to root index


def admitted_values(digit: Digit, constraints: tuple[Constraint, ...], axes: AxisSystem) -> tuple[int, ...]:
    """The values of a digit (in view coordinates) that some admitted index takes."""
    relevant = tuple(c for c in constraints if c[0].atom == digit.axis)
    if not relevant:
        return _every_value(digit.size)
    return _admitted(digit, relevant, axes.size(digit.axis))


@lru_cache(maxsize=1024)
def _every_value(size: int) -> tuple[int, ...]:
    return tuple(range(size))  # shared: large axes are asked for again and again


@lru_cache(maxsize=8192)
def _admitted(digit: Digit, constraints: tuple[Constraint, ...], atom_size: int) -> tuple[int, ...]:
    values = np.flatnonzero(admitted_mask(constraints, atom_size))
    return tuple(int(v) for v in np.unique((values // digit.stride) % digit.size))


@lru_cache(maxsize=4096)
def admitted_mask(constraints: tuple[Constraint, ...], atom_size: int) -> np.ndarray:
    """Which view indices of an atom pass every constraint (each constraint of that atom), as a
    read-only mask: a loop's iterations address the same few tiles, so most masks recur."""
    index = np.arange(atom_size, dtype=np.int64)
    mask = np.ones(atom_size, dtype=bool)
    for restriction, shift in constraints:
        root = index + shift
        mask &= (root < atom_size) & restriction.admits(root)
    mask.setflags(write=False)
    return mask


def live_count(place: Place, constraints: tuple[Constraint, ...], axes: AxisSystem) -> int:
    """How many positions of a place hold data under the constraints (rep copies count each)."""
    if place.is_rep:
        return place.copies
    if not place.digits:
        return 1
    count = math.prod(len(admitted_values(d, constraints, axes)) for d in place.digits)
    return min(count, place.restrict) if place.restrict is not None else count


def live_positions(places: tuple[Place, ...], constraints: tuple[Constraint, ...], axes: AxisSystem) -> int:
    return math.prod(live_count(p, constraints, axes) for p in places)
