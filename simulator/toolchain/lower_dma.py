"""Lowering of one DMA statement: which elements move, in which packets, on which engines.

The element set is the DM side's live positions (the destination's, replicated copies included;
the source's for DM -> HBM) under both views' restrictions. The packet is the largest run that is
contiguous on both sides (<= 4,096 B, a multiple of 8 when HBM is involved) unless `packet =` says
otherwise. Packets are enumerated in loop order (destination-major by default, or `order =`) and
split over the engines, each engine taking whole packets of its own cluster first; per-flow DMN
alternation and HBM units come from the enumerated addresses, so nothing here is a guess.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np

from chiplore.simulator._truth import MAX_PACKET, chip_shape
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.lowered import DmaKind, Flow
from chiplore.simulator.toolchain.placement import Constraint, LoweringError, View, admitted_values

HBM_UNIT = 256
UNIT_SIZES = tuple(1 << k for k in range(5, 12))  # the HBM units a chip may have: 32 B to 2 KB
MAX_PACKETS = 4_000_000  # enumeration guard: far above any real kernel


@dataclass(frozen=True)
class Dim:
    """One loop of the DM side: a digit (or the copies of a rep) and where a step moves."""

    values: tuple[int, ...]
    digit: Digit | None  # None: replicated copies
    field: str  # cluster | slice | elem
    step: float  # positions of its field per value (elem: bytes)
    positions: int  # positions of the place it belongs to


@dataclass(frozen=True)
class DmaPlan:
    kind: DmaKind
    bytes: int
    packet_bytes: int
    packets: int
    engines: tuple[int, ...]
    flows: tuple[Flow, ...]
    clusters: tuple[int, ...]
    written: tuple[tuple[int, int], ...] = ()  # merged [start, end) byte ranges of an HBM destination


def dm_dims(
    view: View, constraints: tuple[Constraint, ...], axes: AxisSystem, with_copies: bool, cuts: Cuts | None = None
) -> list[Dim]:
    """The loops over a device tensor's live positions, outer to inner (cluster, slice, elem).

    Digits are split where the other side of the copy cuts the same atom (`cuts`), so that every
    loop is linear on both sides."""
    tensor = view.tensor
    width = ir.DTYPE_BYTES[tensor.dtype]
    dims: list[Dim] = []
    for name in ("cluster", "slice", "elem"):
        places = tensor.places(name)
        for index, place in enumerate(places):
            inner = math.prod(p.positions for p in places[index + 1 :]) * (width if name == "elem" else 1)
            if place.is_rep:
                if with_copies:
                    dims.append(Dim(tuple(range(place.copies)), None, name, inner, place.positions))
                continue
            for k, digit in enumerate(place.digits):
                local = math.prod(d.size for d in place.digits[k + 1 :])
                pieces = _split(digit, (cuts or {}).get(digit.axis, set()))
                for j, piece in enumerate(pieces):
                    below = piece.stride // digit.stride
                    values = admitted_values(piece, constraints, axes)
                    # Padding or a restriction ends a contiguous run after the place's top digit.
                    span = place.positions // (local * below) if k == 0 and j == 0 else piece.size
                    dims.append(Dim(values, piece, name, inner * local * below, span))
    return dims


Cuts = dict[str, set[int]]


def cuts_of(view: View) -> Cuts:
    """Place values where the view's tensor starts or ends a digit, per atom."""
    tensor = view.tensor
    digits = list(tensor.hbm) + [d for places in tensor.fields.values() for p in places for d in p.digits]
    cuts: Cuts = {}
    for digit in digits:
        cuts.setdefault(digit.axis, set()).update({digit.stride, digit.limit})
    return cuts


def _split(digit: Digit, cuts: set[int]) -> list[Digit]:
    inner = sorted(c for c in cuts if digit.stride < c < digit.limit and c % digit.stride == 0)
    bounds = [digit.stride]
    for c in inner:
        if c % bounds[-1] == 0:
            bounds.append(c)
    if digit.limit % bounds[-1]:
        return [digit]
    bounds.append(digit.limit)
    pieces = [Digit(digit.axis, lo, hi // lo) for lo, hi in itertools.pairwise(bounds)]
    return list(reversed(pieces))


def dm_base(view: View) -> dict[str, float]:
    """Positions of the unit/at terms (data at a fixed position) per field."""
    tensor = view.tensor
    width = ir.DTYPE_BYTES[tensor.dtype]
    base = {"cluster": 0.0, "slice": 0.0, "elem": 0.0}
    for name in base:
        places = tensor.places(name)
        for index, place in enumerate(places):
            if not place.digits and not place.is_rep:
                inner = math.prod(p.positions for p in places[index + 1 :]) * (width if name == "elem" else 1)
                base[name] += place.at * inner
    return base


def locate(view: View, index: dict[str, np.ndarray], axes: AxisSystem, n: int) -> dict[str, np.ndarray]:
    """Where elements with these view indices sit in the view's tensor: HBM byte offset, or DM
    cluster, slice and elem byte offset (copy 0 of replicated data)."""
    root = {atom: index.get(atom, np.zeros(n, dtype=np.int64)) + view.shift(atom) for atom in axes.atoms}
    for source, target, offset in reversed(view.renames):
        flat = sum(root[atom] * place for atom, place, _ in axes.atoms_of(target))
        flat = flat - offset
        for atom, place, _ in axes.atoms_of(source):
            root[atom] = (flat // place) % axes.atoms[atom]
    tensor = view.tensor
    width = ir.DTYPE_BYTES[tensor.dtype]
    if tensor.space == "hbm":
        offset = np.zeros(n, dtype=np.float64)
        row = 1
        for digit in reversed(tensor.hbm):
            offset += ((root[digit.axis] // digit.stride) % digit.size) * row
            row *= digit.size
        return {"hbm": offset * width}
    out: dict[str, np.ndarray] = {}
    for name in ("cluster", "slice", "elem"):
        position = np.zeros(n, dtype=np.float64)
        places = tensor.places(name)
        for place_index, place in enumerate(places):
            inner = math.prod(p.positions for p in places[place_index + 1 :])
            if place.is_rep:
                continue
            if not place.digits:
                position += place.at * inner
                continue
            local = 1
            value = np.zeros(n, dtype=np.int64)
            for digit in reversed(place.digits):
                value += ((root[digit.axis] // digit.stride) % digit.size) * local
                local *= digit.size
            position += value * inner
        out[name] = position * (width if name == "elem" else 1)
    return out


def plan_dma(
    source: View,
    destination: View,
    axes: AxisSystem,
    engines: tuple[int, ...] | None,
    packet: int | None,
    order: list[Digit] | None,
    auto_engines_per_cluster: int,
) -> DmaPlan:
    """Everything the cost model needs about one DMA statement."""
    hbm_source, hbm_destination = source.tensor.space == "hbm", destination.tensor.space == "hbm"
    if hbm_source and hbm_destination:
        raise LoweringError(f"a DMA moves data between HBM and DM: it cannot copy HBM ({source.tensor.name}) to HBM "
                            f"({destination.tensor.name})", rule="0325")  # fmt: skip
    if source.tensor.space not in ("hbm", "dm") or destination.tensor.space not in ("hbm", "dm"):
        src, dst = source.tensor, destination.tensor
        raise LoweringError(f"a DMA moves data between HBM and DM: it cannot copy {src.space.upper()} ({src.name}) to "
                            f"{dst.space.upper()} ({dst.name}); register files are loaded by passes",
                            rule="0325")  # fmt: skip
    source, destination = _aligned(source, destination, axes), _aligned(destination, source, axes)
    constraints = destination.constraints() + source.constraints()
    dm_side = source if hbm_destination else destination
    other = destination if hbm_destination else source
    cuts = cuts_of(other)
    for digit in order or ():  # an `order` may split a digit into loops of its own
        for atom in axes.to_atoms(digit):
            cuts.setdefault(atom.axis, set()).update({atom.stride, atom.limit})
    dims = dm_dims(dm_side, constraints, axes, with_copies=not hbm_destination, cuts=cuts)
    if any(not d.values for d in dims):
        return _empty(hbm_source, hbm_destination, engines, auto_engines_per_cluster)
    width = ir.DTYPE_BYTES[dm_side.tensor.dtype]
    run_dims = _run(dims, other, axes, width)
    run_bytes = math.prod(len(d.values) for d in run_dims) * width
    involves_hbm = hbm_source or hbm_destination
    size = _packet_size(run_bytes, packet, involves_hbm)
    if size <= 0:  # a run shorter than a byte: f4 data the IR rules refuse to place this way (E0324)
        raise LoweringError(f"the DMA cannot be compiled as written: a run of {run_bytes:g} bytes cannot be cut into "
                            "packets", rule="0107")  # fmt: skip
    per_run = math.ceil(run_bytes / size)
    outer = [d for d in dims if d not in run_dims]
    outer = _ordered(outer, order)
    count = math.prod(len(d.values) for d in outer) * per_run
    if count > MAX_PACKETS:
        raise LoweringError(f"a DMA of {count:,} packets is past the compiler's limit of {MAX_PACKETS:,} packets",
                            rule="0105")  # fmt: skip
    grids = _grid([d.values for d in outer])
    n_outer = len(grids[0]) if grids else 1
    index: dict[str, np.ndarray] = {}
    dm_position = {k: np.full(n_outer, v) for k, v in dm_base(dm_side).items()}
    zero = np.zeros(n_outer, dtype=np.int64)
    for dim, values in zip(outer, grids, strict=True):
        dm_position[dim.field] = dm_position[dim.field] + values * dim.step
        if dim.digit is not None:
            index[dim.digit.axis] = index.get(dim.digit.axis, zero) + values * dim.digit.stride
    for dim in run_dims:  # a run starts at the first value of each of its dims
        if dim.digit is not None and dim.values[0]:
            index[dim.digit.axis] = index.get(dim.digit.axis, zero) + dim.values[0] * dim.digit.stride
            dm_position["elem"] = dm_position["elem"] + dim.values[0] * dim.step
    far = locate(other, index, axes, n_outer)
    # Packets of one run follow each other on both sides.
    within = np.arange(per_run, dtype=np.float64) * size
    sizes = np.full(per_run, float(size))
    sizes[-1] = run_bytes - size * (per_run - 1)
    dm_cluster = np.repeat(dm_position["cluster"], per_run).astype(np.int64)
    dm_slice = np.repeat(dm_position["slice"], per_run).astype(np.int64)
    packet_sizes = np.tile(sizes, n_outer)
    hbm = (np.repeat(far["hbm"], per_run) + np.tile(within, n_outer)) if involves_hbm else None
    if hbm_source or hbm_destination:
        cluster = dm_cluster
        kind: DmaKind = (
            ("gather" if source.gathers else "h2d") if hbm_source else ("scatter" if destination.gathers else "d2h")
        )
        crossing = np.zeros(len(cluster), dtype=bool)
    else:
        source_cluster = np.repeat(far["cluster"], per_run).astype(np.int64)
        if _in_every_cluster(other):  # data every cluster holds a copy of is read from the destination's own
            source_cluster = dm_cluster
        cluster = dm_cluster
        crossing = source_cluster != dm_cluster
        kind = "d2d_x" if crossing.any() else "d2d"
    chosen = engines if engines is not None else _auto_engines(cluster, auto_engines_per_cluster)
    extent = _hbm_bytes(destination) if hbm_destination else math.inf
    flows = _flows(chosen, cluster, dm_slice, packet_sizes, hbm, hbm_destination, crossing, extent,
                   None if involves_hbm else source_cluster)  # fmt: skip
    total = round(float(packet_sizes.sum()))
    return DmaPlan(
        kind=kind,
        bytes=total,
        packet_bytes=int(size),
        packets=len(packet_sizes),
        engines=tuple(f.engine for f in flows),
        flows=flows,
        clusters=tuple(sorted({int(c) for c in np.unique(cluster)})),
        written=_intervals(hbm, packet_sizes) if hbm_destination and hbm is not None else (),
    )


def _in_every_cluster(view: View) -> bool:
    """Whether a DM tensor is replicated over every cluster of the chip (`cluster: [rep(n)]`)."""
    places = view.tensor.places("cluster")
    return len(places) == 1 and places[0].is_rep and places[0].copies == chip_shape().clusters > 1


def _other_cluster(engine: int, home: int, picked: np.ndarray, sources: np.ndarray, crossing: np.ndarray,
                   cluster: np.ndarray) -> int:  # fmt: skip
    """The cluster a cross-cluster copy's flow draws egress from: where most of its packets that
    cross into its home cluster come from, else (none does) the cluster of its remote engine. On two
    clusters that is always the other one."""
    away = sources[picked][crossing[picked] & (cluster[picked] == home)]
    return int(np.bincount(away).argmax()) if away.size else chip_shape().engine_cluster(engine)


def _intervals(starts: np.ndarray, sizes: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The byte ranges the packets cover, merged."""
    order = np.argsort(starts, kind="stable")
    merged: list[list[int]] = []
    for start, size in zip(starts[order].astype(np.int64), sizes[order].astype(np.int64), strict=True):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], int(start + size))
        else:
            merged.append([int(start), int(start + size)])
    return tuple((a, b) for a, b in merged)


def _aligned(view: View, other: View, axes: AxisSystem) -> View:
    """A tile is positional against a tensor that holds only a tile's extent of that digit
    (`A % 60 = 4`), or one that does not hold the digit at all, keeps its start as an offset.
    Against a tensor that holds the whole digit it keeps absolute indices, so `out.tile(Hd, 16, 8)`
    meets `k_cache.rename(Ps, Rall, 4096)` at heads 16..23."""
    relative: dict[str, set[tuple[int, int]]] = {}  # atom -> (stride, size) of its digits held as a tile's extent
    for places in other.tensor.fields.values():
        for place in places:
            if place.restrict is not None and place.written is not None:
                for atom in axes.to_atoms(place.written):
                    relative.setdefault(atom.axis, set()).add((atom.stride, atom.size))
    placed = {
        atom.axis
        for places in other.tensor.fields.values()
        for place in places
        for digit in place.digits
        for atom in axes.to_atoms(digit)
    }
    if other.tensor.space == "hbm":
        placed |= {atom.axis for digit in other.tensor.hbm for atom in axes.to_atoms(digit)}
    for renamed in other.renames:  # a renamed view is indexed by its new axis
        placed |= {atom for axis in renamed[:2] for atom, _, _ in axes.atoms_of(axis)}
    # A digit the other side does not hold at all has no index there: the tile's start is its row. An
    # atom's shift may add up tiles of several of its digits (`R / 12288` and `R % 512` of R = (Hh, Dh)
    # both move Hh): only the part on digits the other side holds as a tile's extent stays relative.
    kept: list[tuple[str, int]] = []
    for atom, shift in view.shifts:
        if atom not in placed:
            kept.append((atom, shift))
        elif atom in relative:
            part = sum((shift // stride) % size * stride for stride, size in relative[atom])
            if part:
                kept.append((atom, part))
    shifts = tuple(kept)
    return dataclasses.replace(view, shifts=shifts) if shifts != view.shifts else view


def _hbm_bytes(view: View) -> float:
    return math.prod(d.size for d in view.tensor.hbm) * ir.DTYPE_BYTES[view.tensor.dtype]


def _empty(hbm_source: bool, hbm_destination: bool, engines: tuple[int, ...] | None, per_cluster: int) -> DmaPlan:
    kind: DmaKind = "h2d" if hbm_source else "d2h" if hbm_destination else "d2d"
    chosen = engines if engines is not None else tuple(range(per_cluster))
    return DmaPlan(kind, 0, 0, 0, chosen, (), ())


def _run(dims: list[Dim], other: View, axes: AxisSystem, width: float) -> list[Dim]:
    """The innermost dims that stay contiguous on both sides (the longest possible packet)."""
    run: list[Dim] = []
    run_bytes = width
    for dim in reversed(dims):
        if dim.field != "elem" or dim.digit is None or dim.step != run_bytes:
            break
        values = dim.values
        if values != tuple(range(values[0], values[0] + len(values))):
            break
        if len(values) > 1 and not _contiguous_on(other, dim.digit, values, run_bytes, axes):
            break
        run.append(dim)
        run_bytes *= len(values)
        if len(values) < dim.positions:
            break
    return list(reversed(run))


def _contiguous_on(view: View, digit: Digit, values: tuple[int, ...], run_bytes: float, axes: AxisSystem) -> bool:
    """Does stepping `digit` move `run_bytes` per value on the other side, within one slice?"""
    first, last = values[0], values[-1]
    points = np.array([first, first + 1, last], dtype=np.int64) * digit.stride
    where = locate(view, {digit.axis: points}, axes, 3)
    expected = np.array([0.0, run_bytes, (last - first) * run_bytes])
    if "hbm" in where:
        return bool(np.array_equal(where["hbm"] - where["hbm"][0], expected))
    same_slice = len(set(where["cluster"])) == 1 and len(set(where["slice"])) == 1
    return bool(same_slice and np.array_equal(where["elem"] - where["elem"][0], expected))


def _packet_size(run_bytes: float, packet: int | None, involves_hbm: bool) -> int:
    run = int(run_bytes)
    if packet is not None:
        return max(1, min(packet, run))
    step = 8 if involves_hbm and run % 8 == 0 else 1
    for size in range(min(MAX_PACKET, run) // step * step, 0, -step):
        if run % size == 0:
            return size
    return run


def _ordered(dims: list[Dim], order: list[Digit] | None) -> list[Dim]:
    if not order:
        return dims
    listed: list[Dim] = []
    for digit in order:
        listed += [d for d in dims if d.digit is not None and d.digit.axis == digit.axis
                   and digit.stride <= d.digit.stride < digit.limit and d not in listed]  # fmt: skip
    return listed + [d for d in dims if d not in listed]


def _grid(value_lists: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Row-major cartesian product: the first list is the outermost loop."""
    if not value_lists:
        return []
    arrays = [np.asarray(v, dtype=np.int64) for v in value_lists]
    mesh = np.meshgrid(*arrays, indexing="ij")
    return [m.reshape(-1) for m in mesh]


def _auto_engines(cluster: np.ndarray, per_cluster: int) -> tuple[int, ...]:
    """`engines = auto`: the first `per_cluster` engines of every destination cluster."""
    clusters = sorted({int(c) for c in np.unique(cluster)}) or [0]
    local = chip_shape().engines_per_cluster
    return tuple(c * local + e for c in clusters for e in range(min(per_cluster, local)))


def _flows(engines: tuple[int, ...], cluster: np.ndarray, dm_slice: np.ndarray, sizes: np.ndarray,
           hbm: np.ndarray | None, hbm_write: bool, crossing: np.ndarray,
           hbm_extent: float = math.inf, sources: np.ndarray | None = None) -> tuple[Flow, ...]:  # fmt: skip
    """Split the packet sequence: equal quotas, each engine filled from its own cluster first."""
    shape = chip_shape()
    n = len(sizes)
    quota = {e: n // len(engines) + (1 if i < n % len(engines) else 0) for i, e in enumerate(engines)}
    taken: dict[int, list[np.ndarray]] = {e: [] for e in engines}
    leftovers: list[np.ndarray] = []
    for c in sorted({int(x) for x in np.unique(cluster)}):
        mine = np.flatnonzero(cluster == c)
        own = [e for e in engines if shape.engine_cluster(e) == c]
        position = 0
        for e in own:
            share = min(quota[e], len(mine) - position)
            taken[e].append(mine[position : position + share])
            quota[e] -= share
            position += share
        leftovers.append(mine[position:])
    rest = np.concatenate(leftovers) if leftovers else np.array([], dtype=np.int64)
    position = 0
    for e in engines:
        share = min(quota[e], len(rest) - position)
        if share > 0:
            taken[e].append(rest[position : position + share])
            position += share
    flows: list[Flow] = []
    for e in engines:
        picked = np.concatenate(taken[e]) if taken[e] else np.array([], dtype=np.int64)
        if picked.size == 0:
            continue
        dmn = dm_slice[picked] // shape.dmn_slices + cluster[picked] * shape.slices  # a DMN id, chip-wide
        alt = float(np.mean(dmn[1:] != dmn[:-1])) if picked.size > 1 else 0.0
        units, partial, partial_packets = 0.0, 0, 0
        at_units: tuple[tuple[int, float, int], ...] = ()
        if hbm is not None:
            start = hbm[picked]
            end = start + sizes[picked]
            units, partial, partial_packets = _touched(start, end, HBM_UNIT, hbm_write, hbm_extent)
            # the chip's own unit may be another power of two: its cost model reads the count in it
            at_units = tuple((unit, *_touched(start, end, unit, hbm_write, hbm_extent)[:2]) for unit in UNIT_SIZES)
        home = int(np.bincount(cluster[picked]).argmax())
        cross = home != shape.engine_cluster(e) or bool(crossing[picked].mean() > 0.5)
        flows.append(
            Flow(
                engine=e,
                cluster=home,
                cross_cluster=cross,
                bytes=round(float(sizes[picked].sum())),
                packets=int(picked.size),
                alt_fraction=alt,
                hbm_units=units,
                partial_units=partial,
                partial_packets=partial_packets,
                at_units=at_units,
                source_cluster=_other_cluster(e, home, picked, sources, crossing, cluster)
                if cross and sources is not None
                else None,
            )
        )
    return tuple(flows)


def _touched(start: np.ndarray, end: np.ndarray, unit: int, write: bool, extent: int) -> tuple[float, int, int]:
    """Packets [start, end) in HBM units of `unit` bytes: the units they touch, and of a write's, those
    only partly written and the packets that write one."""
    touched, partial = packet_units(start, end, unit, extent if write else None)
    return float(touched.sum()), int(partial.sum()), int(np.count_nonzero(partial))


def packet_units(start: np.ndarray, end: np.ndarray, unit: int, extent: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per packet [start, end): the `unit`-byte HBM units it touches, and, for a write into a tensor of
    `extent` bytes (None: a read), those it writes only partly: a unit cut at either end, unless the
    cut is the tensor's end (HBM tensors are allocated in whole units: no read-modify-write there)."""
    touched = -np.floor_divide(-end, unit) - np.floor_divide(start, unit)
    if extent is None:
        return touched, np.zeros_like(touched)
    head = (start % unit) != 0
    tail = ((end % unit) != 0) & (end < extent)
    return touched, np.where(touched == 1, head | tail, head.astype(int) + tail.astype(int))
