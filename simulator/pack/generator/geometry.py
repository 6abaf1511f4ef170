"""Where a group's rows and reduction columns go: the digit algebra of its layouts.

Each group gets axes of its own: a row axis `R` (a composite of heads x head rows when per-head ops run
on the rows, of units x unit rows when several members share it, else an atom) and a reduction axis
`K` (an atom); every kernel input is renamed onto them, so a cut is legal when it is even on R's atoms.
Rows split over the chip's clusters (`R / Nc`), then into `G` row-groups of `r` rows per cluster, each
row-group over `kg` slices that each hold `w = K / kg` columns: slice `[R / r % G # P, K / w]` with
`P = S / kg` (S slices per cluster, 256 on the documented chip), so the split-K reducer's group
`[K / w]` is the innermost slice digit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip


def even_cut(atoms: tuple[tuple[int, int], ...], stride: int) -> bool:
    """Whether `A / stride` (and `A % stride`) cuts no atom of `atoms` ((stride, size) each) unevenly."""
    for atom_stride, size in atoms:
        top = atom_stride * size
        if stride <= atom_stride:
            if atom_stride % stride:
                return False
        elif stride < top and (stride % atom_stride or top % stride):
            return False
    return True


@dataclass(frozen=True)
class RowAxis:
    """A group's row axis: its name and its atoms ((name, size), outermost first)."""

    name: str
    atoms: tuple[tuple[str, int], ...]

    @functools.cached_property
    def size(self) -> int:  # cached: a space's validity check asks millions of times
        return math.prod(size for _, size in self.atoms)

    def strides(self) -> tuple[tuple[int, int], ...]:
        out, stride = [], 1
        for _, size in reversed(self.atoms):
            out.append((stride, size))
            stride *= size
        return tuple(reversed(out))

    def cuts(self, *strides: int) -> bool:
        return all(even_cut(self.strides(), s) for s in strides if 1 < s < self.size)


STAGE_BYTES = 32 * 1024  # a cluster's stored rows up to this gather onto one slice


def digit(axis: str, stride: int, size: int, total: int) -> str:
    """`axis / stride % size` written as simply as it reads (`axis` alone, `axis % m`, `axis / d`)."""
    text = axis
    if stride > 1:
        text += f" / {stride}"
    if stride * size < total:
        text += f" % {size}"
    return text


@dataclass(frozen=True)
class Geometry:
    """One group's layout choice, resolved to numbers."""

    index: int
    row: RowAxis
    k_axis: str
    k: int
    clusters: int  # the clusters the rows split over evenly, the first of the chip's; 1: cluster 0 holds every row
    rows_per_slice: int  # r
    kgroups: int
    chunk_rows: int
    depth: int
    head_dim: int | None
    tail: int = 0  # the last chunk in pieces after the loop: 1 two halves, 2 a half and two quarters
    chip: Chip = DOCUMENTED_CHIP

    @property
    def tail_rows(self) -> tuple[int, ...]:
        """Rows of the pieces the last chunk is cut into (none: it stays in the loop). Smaller last
        pieces leave less contraction to run after the last weight byte lands."""
        half = self.chunk_rows // 2
        return {0: (), 1: (half, half), 2: (half, half // 2, half // 2)}[self.tail]

    @property
    def uniform_chunks(self) -> int:
        """The chunks of `chunk_rows` rows the loop streams (the rest are the tail's pieces)."""
        return self.chunks - (1 if self.tail else 0)

    @property
    def R(self) -> str:
        return self.row.name

    @property
    def n(self) -> int:
        return self.row.size

    @property
    def per_cluster(self) -> int:
        return self.n // self.clusters

    @property
    def groups(self) -> int:  # row-groups per cluster
        return self.per_cluster // self.rows_per_slice

    @property
    def width(self) -> int:
        return self.k // self.kgroups

    @property
    def pad(self) -> int:
        return self.chip.slices // self.kgroups

    @property
    def split(self) -> bool:
        """Whether the rows are split over the clusters (a chip of one cluster holds them all there)."""
        return self.clusters > 1

    @property
    def chunks(self) -> int:
        return self.rows_per_slice // self.chunk_rows

    # ---- mapping terms ----------------------------------------------------------------------

    def cluster_term(self) -> str:
        if not self.split:
            return f"1 # {self.chip.clusters}"
        term = f"{self.R} / {self.per_cluster}"
        return term if self.clusters == self.chip.clusters else f"{term} # {self.chip.clusters}"

    def group_term(self) -> str:
        """The row-group slice term, padded to its share of the slices."""
        if self.groups == 1:
            return f"1 # {self.pad}"
        inner = digit(self.R, self.rows_per_slice, self.groups, self.n)
        return inner if self.groups == self.pad else f"{inner} # {self.pad}"

    def k_term(self) -> str:
        return f"{self.k_axis} / {self.width}"

    def slices(self, kpart: str) -> str:
        """A slice mapping with `kpart` in the k-group position (omitted when there is one k-group)."""
        return f"[{self.group_term()}, {kpart}]" if self.kgroups > 1 else f"[{self.group_term()}]"

    def rep_groups(self) -> str:
        """Every row-group of the cluster (padding included where the switch fills it)."""
        return f"rep({self.groups}) # {self.pad}" if self.groups < self.pad else f"rep({self.pad})"

    def rows_elem(self, extent: int | None = None) -> str:
        text = digit(self.R, 1, self.rows_per_slice, self.n)
        return f"{text} = {extent}" if extent is not None and extent < self.rows_per_slice else text

    def k_elem(self) -> str:
        return digit(self.k_axis, 1, self.width, self.k)

    def k_digit(self, inner: int) -> str:
        """`K % w / inner`: the columns of one slice in steps of `inner`."""
        if inner >= self.width:
            return "1"
        return f"{self.k_axis} % {self.width} / {inner}" if self.kgroups > 1 else f"{self.k_axis} / {inner}"

    def row_digit(self, inner: int) -> str:
        """`R % r / inner`: a slice's rows in steps of `inner`."""
        if inner >= self.rows_per_slice:
            return "1"
        text = digit(self.R, 1, self.rows_per_slice, self.n)
        return f"{text} / {inner}" if inner > 1 else text

    def row_mod(self, m: int) -> str:
        return digit(self.R, 1, m, self.n)

    def layouts(self) -> dict[str, str]:
        """The group's named layouts: the stream grid, the k-group leaders, the k-leaders that receive
        the input vector, a per-cluster row-group sum, and every leader of both clusters."""
        g = self.index
        cluster = self.cluster_term()
        lead = self.slices(f"1 # {self.kgroups}")
        k_part = f", {self.k_term()}" if self.kgroups > 1 else ""
        out = {
            f"Grid{g}": f"{{ cluster: [{cluster}], slice: {self.slices(self.k_term())} }}",
            f"Lead{g}": f"{{ cluster: [{cluster}], slice: {lead} }}",
            f"KIn{g}": f"{{ cluster: [{self.every_cluster()}], slice: [1 # {self.pad}{k_part}] }}",
            f"XRep{g}": f"{{ cluster: [{self.every_cluster()}], slice: [{self.rep_groups()}{k_part}] }}",
        }
        every = f"[{self.rep_groups()}, 1 # {self.kgroups}]" if self.kgroups > 1 else f"[{self.rep_groups()}]"
        out[f"Sum{g}"] = f"{{ cluster: [{cluster}], slice: {every} }}"
        out[f"Every{g}"] = f"{{ cluster: [{self.every_cluster()}], slice: {every} }}"
        return out

    def every_cluster(self) -> str:
        """A copy in every cluster of the chip."""
        return f"rep({self.chip.clusters})"

    def staging(self, row_bytes: int, unit: int, max_packet: int) -> Staging | None:
        """Where a store of these rows (`row_bytes` each) gathers them into whole HBM units first, or
        None when a slice's rows already fill whole units (or no gather fits): all of a cluster's rows
        on one slice when they are at most `STAGE_BYTES`, else the fewest rows a slice that fill a
        packet in whole units and cut the cluster's rows evenly."""
        r, per = self.rows_per_slice, self.per_cluster
        if r * row_bytes % unit == 0:
            return None
        rows = per
        if per * row_bytes > STAGE_BYTES:
            step = unit // math.gcd(unit, row_bytes)  # rows of one whole unit
            fits = [s for s in range(step, per, step)
                    if per % s == 0 and per // s <= self.chip.slices and s * row_bytes >= max_packet
                    and self.row.cuts(s)]  # fmt: skip
            if not fits:
                return None
            rows = fits[0]
        slices = per // rows
        term = "1" if slices == 1 else digit(self.R, rows, slices, self.n)
        if slices < self.chip.slices:
            term += f" # {self.chip.slices}"
        layout = f"{{ cluster: [{self.cluster_term()}], slice: [{term}] }}"
        return Staging(layout, digit(self.R, 1, rows, self.n), rows)

    def legal(self) -> str | None:
        """Why this geometry cannot be written (None when it can)."""
        r, n = self.rows_per_slice, self.n
        if self.split and n % self.clusters:
            return "rows do not split over the clusters"
        if self.per_cluster % r or self.groups > self.pad or self.chip.slices % self.kgroups or self.k % self.kgroups:
            return "rows or columns do not divide over the slices"
        if r % self.chunk_rows or self.depth > max(self.chunks, 2):
            return "chunks do not divide the rows"
        if not self.row.cuts(self.per_cluster, r, self.chunk_rows):
            return "a row cut splits an atom unevenly"
        pieces = self.tail_rows
        if pieces and (self.chunk_rows % (1 << self.tail) or min(pieces) % 2):
            return f"a chunk of {self.chunk_rows} rows does not cut into pieces of whole lane folds"
        if pieces and not self.row.cuts(*pieces):
            return "a tail piece splits an atom unevenly"
        if self.head_dim is not None and r % self.head_dim:
            return "heads would straddle slices"
        return None


@dataclass(frozen=True)
class Staging:
    """A store's gather into whole HBM units: the layout (clusters and slices), the elements' digit and
    how many rows one staging slice holds."""

    layout: str
    elem: str
    rows: int
