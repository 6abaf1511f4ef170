"""Random placements for generated programs: an axis cut into digits, the digits dealt to a tensor's
cluster, slice and elem fields, and the fetch that streams them (written as Ferrite text)."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from chiplore.simulator.dsl.ir import DTYPE_BYTES

SLICES = 256


@dataclass(frozen=True)
class Digit:
    """Values [0, size) of axis // stride, as a Ferrite term writes them."""

    axis: str
    stride: int
    size: int
    axis_size: int

    def text(self) -> str:
        if self.stride == 1:
            return self.axis if self.size == self.axis_size else f"{self.axis} % {self.size}"
        if self.stride * self.size == self.axis_size:
            return f"{self.axis} / {self.stride}"
        return f"{self.axis} / {self.stride} % {self.size}"

    def restricted(self, extent: int) -> str:
        """The term of a tile's extent of this digit: `A % 8 = 4`."""
        return f"{self.text()} = {extent}" if extent < self.size else self.text()

    def inner(self, size: int) -> Digit:
        """The lowest `size` values of this digit (a packet cut from it)."""
        return Digit(self.axis, self.stride, size, self.axis_size)

    def outer(self, size: int) -> Digit:
        """What is left above the lowest `size` values."""
        return Digit(self.axis, self.stride * size, self.size // size, self.axis_size)


def cut(rng: random.Random, axis: str, size: int, pieces: int) -> list[Digit]:
    """`axis` (a power of two) cut into up to `pieces` digits, outermost first."""
    bits = size.bit_length() - 1
    cuts = sorted(rng.sample(range(1, bits), min(pieces - 1, max(bits - 1, 0)))) if bits > 1 else []
    bounds = [0, *cuts, bits]
    digits = []
    for low, high in itertools.pairwise(bounds):
        digits.append(Digit(axis, 1 << low, 1 << (high - low), size))
    return list(reversed(digits))


Spot = Digit | int  # a digit, or n copies (`rep(n)`)


@dataclass
class Placement:
    """Where a tensor's digits live; an int in `cluster` or `slice` is `rep(n)` (copies)."""

    cluster: list[Spot] = field(default_factory=list)
    slice: list[Spot] = field(default_factory=list)
    elem: list[Digit] = field(default_factory=list)

    def cluster_text(self) -> str:
        if not self.cluster:
            return "[1 # 2]"
        spot = self.cluster[0]
        return f"[rep({spot})]" if isinstance(spot, int) else f"[{spot.text()}]"

    def slice_text(self) -> str:
        terms = [f"rep({s})" if isinstance(s, int) else s.text() for s in self.slice]
        used = 1
        for spot in self.slice:
            used *= spot if isinstance(spot, int) else spot.size
        if used < SLICES:
            terms.append(f"1 # {SLICES // used}")
        return f"[{', '.join(terms)}]"

    def spatial_text(self) -> str:
        return f"cluster: {self.cluster_text()}, slice: {self.slice_text()}"

    def elem_text(self, restrict: dict[Digit, int] | None = None) -> str:
        if not self.elem:
            return "[1 # 8]"
        restrict = restrict or {}
        return "[" + ", ".join(d.restricted(restrict[d]) if d in restrict else d.text() for d in self.elem) + "]"

    def fields(self, restrict: dict[Digit, int] | None = None) -> str:
        return f"{self.spatial_text()}, elem: {self.elem_text(restrict)}"

    def digits(self) -> list[Digit]:
        return [s for s in (*self.cluster, *self.slice, *self.elem) if isinstance(s, Digit)]

    def keeping(self, axes: set[str]) -> Placement:
        """The same places for a tensor over only `axes`: other digits' spatial places become copies
        (every slice of the stream sees the operand), their elem places disappear."""

        def spatial(spots: list[Spot]) -> list[Spot]:
            return [s if isinstance(s, int) or s.axis in axes else s.size for s in spots]

        return Placement(spatial(self.cluster), spatial(self.slice), [d for d in self.elem if d.axis in axes])


def place(rng: random.Random, digits: list[Digit], dtype: str, spread: float = 0.5,
          narrowest: str | None = None) -> Placement | None:  # fmt: skip
    """Deal digits to cluster (one of size 2 at most), slices (at most 256 positions) and elem; the
    innermost elem digit keeps at least 8 bytes so a fetch packet can be cut from it. None when the
    dice left no such digit (the caller draws again)."""
    placement = Placement()
    width = min(DTYPE_BYTES[dtype], DTYPE_BYTES[narrowest or dtype])
    positions = 1
    for digit in digits[:-1]:  # the innermost digit always stays in elem
        roll = rng.random()
        if digit.size == 2 and not placement.cluster and roll < 0.2:
            placement.cluster.append(digit)
        elif roll < spread and positions * digit.size <= SLICES:
            placement.slice.append(digit)
            positions *= digit.size
        else:
            placement.elem.append(digit)
    placement.elem.append(digits[-1])
    if placement.elem[-1].size * width < 8:
        return None
    if rng.random() < 0.15 and len(placement.elem) > 2:  # a transposed elem order
        head = placement.elem[:-1]
        rng.shuffle(head)
        placement.elem = [*head, placement.elem[-1]]
    return placement


def packet_size(rng: random.Random, digit: Digit, dtypes: tuple[str, ...], most: int = 64) -> int:
    """Elements of a packet cut from `digit`: at least 8 bytes in each of `dtypes` (the fetch and the
    commit see whole 8-byte words), at most `most` bytes in the widest."""
    narrow, wide = min(DTYPE_BYTES[d] for d in dtypes), max(DTYPE_BYTES[d] for d in dtypes)
    choices = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= digit.size and n * narrow >= 8 and n * wide <= most]
    return rng.choice(choices) if choices else digit.size


def fetch(placement: Placement, packet: int, restrict: dict[Digit, int] | None = None) -> str:
    """`fetch(time = [...], packet = [...])` over a tensor's elem digits, the packet cut from the
    innermost one; a restricted digit (a tile's extent) is written `d = k`."""
    restrict = restrict or {}
    if not placement.elem:
        return "fetch(time = [1], packet = [1 # 8])"
    *outer, inner = placement.elem
    time = [d.restricted(restrict[d]) if d in restrict else d.text() for d in outer]
    if packet < inner.size:
        time.append(inner.outer(packet).text())
    time_text = ", ".join(time) if time else "1"
    return f"fetch(time = [{time_text}], packet = [{inner.inner(packet).text()}])"
