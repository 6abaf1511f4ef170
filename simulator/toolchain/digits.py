"""The digit algebra of Ferrite mappings (docs/simrngd.md §3.2).

A mapping term denotes a *digit* of an axis: index i contributes floor(i / stride) mod size. Terms
normalise to Digit(axis, stride, size) over atom axes (a composite axis is the row-major flattening
of its atoms), adjacent digits merge (`[H / 64 % 30, H % 64]` is `[H % 1920]`), two decompositions
are compatible when they have a common refinement (E0204 otherwise), and a set of digits covers an
axis when it tiles the axis's mixed-radix decomposition exactly once (E0205 names a missing digit).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Digit:
    axis: str
    stride: int
    size: int

    @property
    def limit(self) -> int:
        """The place value just above this digit: stride * size."""
        return self.stride * self.size

    def value(self, index: int) -> int:
        return (index // self.stride) % self.size

    def within(self, outer: Digit) -> bool:
        """Is this digit a part of `outer` (same axis, inside its stride..limit range)?"""
        return self.axis == outer.axis and outer.stride <= self.stride and self.limit <= outer.limit

    def __str__(self) -> str:
        if self.stride == 1:
            return f"{self.axis} % {self.size}"
        return f"{self.axis} / {self.stride} % {self.size}"


class NoCommonRefinement(ValueError):
    """Two decompositions of an axis cut it at incompatible places (E0204)."""

    def __init__(self, axis: str, first: Digit, second: Digit) -> None:
        why = ""
        if first.stride == second.stride and first.size != second.size:
            # `K / 24` then `K % 24` of K = 2,999 merge into K % 3000: name the spans, not only the digits
            long, short = (first, second) if first.size > second.size else (second, first)
            why = (f" ({long} spans {long.size:,} positions where {short} spans {short.size:,}: a cut `/ d` by a d "
                   f"that does not divide {axis}'s size rounds up past its end)")  # fmt: skip
        super().__init__(f"digits of {axis} in {first} and {second} have no common refinement{why}")
        self.axis, self.first, self.second = axis, first, second


@dataclass(frozen=True)
class AxisSystem:
    """Atom axes with their sizes and composite axes as row-major tuples of atoms."""

    atoms: Mapping[str, int]
    composites: Mapping[str, tuple[str, ...]]

    def size(self, axis: str) -> int:
        if axis in self.atoms:
            return self.atoms[axis]
        return math.prod(self.size(part) for part in self.composites[axis])

    def digit(self, axis: str, ops: Sequence[tuple[str, int]]) -> Digit:
        """The digit a term `axis op operand ...` denotes, on that axis."""
        stride, size = 1, self.size(axis)
        for op, operand in ops:
            if operand <= 0:
                raise ValueError(f"{axis} {op} {operand}: operands must be positive")
            if op == "/":
                stride, size = stride * operand, math.ceil(size / operand)
            else:
                size = min(size, operand)
        return Digit(axis, stride, size)

    def to_atoms(self, digit: Digit) -> list[Digit]:
        """The digit over atom axes, most significant first; unchanged when it does not align."""
        if digit.axis in self.atoms:
            return [digit]
        places: list[tuple[str, int, int]] = []  # (atom, place value, size), least significant first
        place = 1
        for part in reversed(self.composites[digit.axis]):
            for atom, atom_place, atom_size in reversed(self.atoms_of(part)):
                places.append((atom, place * atom_place, atom_size))
            place *= self.size(part)
        pieces: list[Digit] = []
        for atom, atom_place, atom_size in places:
            low, high = max(digit.stride, atom_place), min(digit.limit, atom_place * atom_size)
            if low >= high:
                continue
            if low % atom_place or low % digit.stride or high % low:
                return [digit]  # cuts an atom off its boundaries: stays on the composite axis
            pieces.append(Digit(atom, low // atom_place, high // low))
        covered = math.prod(p.size for p in pieces)
        return list(reversed(pieces)) if covered == digit.size else [digit]

    def atoms_of(self, axis: str) -> list[tuple[str, int, int]]:
        """(atom, place value within axis, size), most significant first."""
        if axis in self.atoms:
            return [(axis, 1, self.atoms[axis])]
        result: list[tuple[str, int, int]] = []
        place = 1
        for part in reversed(self.composites[axis]):
            for atom, atom_place, atom_size in reversed(self.atoms_of(part)):
                result.append((atom, place * atom_place, atom_size))
            place *= self.size(part)
        return list(reversed(result))


def normalise(digits: Iterable[Digit], axes: AxisSystem) -> list[Digit]:
    """Atom digits in order, size-1 digits dropped, adjacent digits of one axis merged."""
    atoms = [piece for digit in digits for piece in axes.to_atoms(digit) if piece.size > 1]
    return merge(atoms)


def merge(digits: Sequence[Digit]) -> list[Digit]:
    """Merge each digit into the one before it when that one sits right above it on the same axis."""
    merged: list[Digit] = []
    for digit in digits:
        if merged and merged[-1].axis == digit.axis and merged[-1].stride == digit.limit:
            outer = merged.pop()
            merged.append(Digit(digit.axis, digit.stride, outer.size * digit.size))
        else:
            merged.append(digit)
    return merged


def overlapping(digits: Iterable[Digit]) -> tuple[Digit, Digit] | None:
    """Two digits that use the same part of one axis (a digit used twice), if any."""
    by_axis: dict[str, list[Digit]] = defaultdict(list)
    for digit in digits:
        by_axis[digit.axis].append(digit)
    for group in by_axis.values():
        ordered = sorted(group)
        for lower, upper in itertools.pairwise(ordered):
            if upper.stride < lower.limit:
                return lower, upper
    return None


def refine(first: Sequence[Digit], second: Sequence[Digit]) -> tuple[list[Digit], list[Digit]]:
    """Split both decompositions at each other's boundaries; raises NoCommonRefinement."""
    cuts: dict[str, set[int]] = defaultdict(set)
    for digit in (*first, *second):
        cuts[digit.axis] |= {digit.stride, digit.limit}
    return _split_all(first, cuts, second), _split_all(second, cuts, first)


def _split_all(digits: Sequence[Digit], cuts: Mapping[str, set[int]], other: Sequence[Digit]) -> list[Digit]:
    result: list[Digit] = []
    for digit in digits:
        inner = sorted(c for c in cuts[digit.axis] if digit.stride < c < digit.limit)
        bounds = [digit.stride, *inner, digit.limit]
        pieces = []
        for low, high in itertools.pairwise(bounds):
            if low % digit.stride or high % low:
                culprit = next((o for o in other if o.axis == digit.axis and low in (o.stride, o.limit)), digit)
                raise NoCommonRefinement(digit.axis, digit, culprit)
            pieces.append(Digit(digit.axis, low, high // low))
        result.extend(reversed(pieces))  # most significant first, like the digit they replace
    return result


def missing(axis: str, size: int, digits: Iterable[Digit]) -> list[Digit]:
    """The digits of `axis` that no digit covers (empty: covered). Overlaps are `overlapping`'s job."""
    place = 1
    gaps: list[Digit] = []
    for digit in sorted(d for d in digits if d.axis == axis):
        if digit.stride > place:
            gaps.append(Digit(axis, place, math.ceil(digit.stride / place)))
        place = max(place, digit.limit)
    if place < size:
        gaps.append(Digit(axis, place, math.ceil(size / place)))
    return gaps
