"""Lowering of one Tensor-Unit pass: the stream after every stage and the per-slice work of each
stage (docs/simrngd.md §6.4, §7.3).

The stream is `T` packets of `P` positions of one dtype. Fetch reads each packet in reads of the
largest power of two (<= 32 B on main, <= 8 B on sub) that divides its contiguous DM run; adapters
(decode, widen) change the dtype; the switch, reducers and vector engine work on flits of 32 B; a
contraction turns the stream into folded f32/i32 packets of what it did not reduce.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from chiplore.simulator._truth import chip_shape
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import AxisSystem, Digit, normalise
from chiplore.simulator.toolchain.lowered import PassShape, PassWork
from chiplore.simulator.toolchain.placement import Place, Tensor, View, admitted_values, live_count
from chiplore.simulator.toolchain.streams import positional_dtype

FLIT = 32
READ_CAP = {"main": 32, "sub": 8}
BANK_WIDTH = 8  # bytes per DM bank word
DM_BANKS = 16
MAX_BANK_READS = 1 << 18
TRANSCENDENTAL = {"exp", "erf", "tanh", "rsqrt", "recip"}
REDUCTIONS = {"sum_time", "sum_packet", "sum_all", "max_all"}

_REDUCED_PACKET = 8  # a reduced packet leaves the vector engine as one flit of 8 positions, 1 live
Resolve = Callable[[ir.Expr | None], tuple[Place, ...]]  # a mapping argument -> places
IntOf = Callable[[ir.Expr], int]


@dataclass
class Stream:
    time: int
    packet: int  # positions per packet
    dtype: str
    digits: list[tuple[Digit, int]] = field(default_factory=list)  # live stream digits with their counts

    @property
    def packet_bytes(self) -> float:
        return self.packet * ir.DTYPE_BYTES[self.dtype]

    @property
    def flits_per_packet(self) -> int:
        return max(1, math.ceil(self.packet_bytes / FLIT))

    @property
    def flits(self) -> int:
        return self.time * self.flits_per_packet


@dataclass
class PassPlan:
    work: PassWork
    shape: PassShape
    operands: list[ir.Expr]  # TRF/VRF operand expressions the pass reads
    dtype: str  # of what it commits
    partial: tuple[Digit, ...] = ()  # digits of partly reduced axes its result still carries
    vector_operands: tuple[ir.Expr, ...] = ()  # the VRF operands a vector op combines with the stream


def plan_pass(context: str, source: View, stages: tuple[ir.Method, ...], axes: AxisSystem,
              resolve: Resolve, int_of: IntOf) -> PassPlan:  # fmt: skip
    constraints = source.constraints()
    work: dict[str, float] = {}
    operands: list[ir.Expr] = []
    stream = Stream(time=1, packet=1, dtype=source.tensor.dtype)
    computed = False
    adapted = False
    partial: list[Digit] = list(source.tensor.partial)
    spatial = [d for name in ("cluster", "slice") for p in source.tensor.places(name) for d in p.digits]
    packet_digits: list[Digit] = []  # data digits of the stream's packet (what sum_packet reduces)
    vector_operands: list[ir.Expr] = []
    shape: dict[str, float | bool] = {}

    def count(places: tuple[Place, ...]) -> int:
        return math.prod(p.positions if p.positions != p.size or not p.digits
                         else live_count(p, constraints, axes) for p in places)  # fmt: skip

    def add(name: str, amount: float) -> None:
        work[name] = work.get(name, 0) + amount

    for stage in stages:
        name = stage.name
        adapter = name in ("fetch", "decode", "lut", "widen") or (name == "cast" and not computed)
        if not adapter and not adapted:  # flits are counted once the fetch adapters are done
            add("flits", stream.flits)
            shape["fetch_packet_bytes"] = stream.packet_bytes
            adapted = True
        if name == "fetch":
            time, packet = resolve(stage.kwarg("time")), resolve(stage.kwarg("packet"))
            stream = Stream(count(time), count(packet), source.tensor.dtype, _digits(time + packet, constraints, axes))
            packet_digits = [d for p in packet for d in p.digits]
            loops = normalise([d for d, n in stream.digits if n > 1], axes)
            shape["loop_entries"] = len(loops) + sum(1 for p in time + packet if not p.digits and p.positions > 1)
            live_bytes = math.prod(live_count(p, constraints, axes) for p in packet) * ir.DTYPE_BYTES[stream.dtype]
            run = _contiguous_run(source, packet, constraints, axes)
            read = _read_size(min(run, live_bytes), READ_CAP[context])
            add("fetch_reads", stream.time * math.ceil(live_bytes / read))
            shape["fetch_contiguous"] = run >= live_bytes
            if read <= BANK_WIDTH:
                bank, bank_run = _bank_run(source, time + packet, constraints, axes, min(run, live_bytes), read)
                shape["bank"], shape["bank_run"] = bank, bank_run
        elif name in ("decode", "lut"):
            add("decode_bytes", stream.time * stream.packet_bytes)
            stream.dtype = positional_dtype(stage) or stream.dtype
        elif name in ("cast", "widen", "narrow"):
            stream.dtype = positional_dtype(stage) or stream.dtype
        elif name == "switch":
            ring, places = stage.kwarg("ring"), resolve(stage.kwarg("slice"))
            kind = stage.args[0].value if stage.args else None
            # A stated ring is used as stated, but a broadcast's is never smaller than the slices its
            # copies reach (`ring = 1` must not make a broadcast free).
            floor = _reach(places) if isinstance(kind, ir.Name) and kind.id == "broadcast" else 1
            add("switch_ring", max(int_of(ring), floor) if ring is not None else _span(source, places))
            add("switch_flits", stream.flits)
            if isinstance(kind, ir.Name) and kind.id == "gather" and stage.kwarg("time") is not None:
                stream.time *= count(resolve(stage.kwarg("time")))
        elif name in ("collect", "transpose"):
            if stage.kwarg("time") is not None:
                stream.time = count(resolve(stage.kwarg("time")))
            if stage.kwarg("packet") is not None:
                stream.packet = math.prod(p.positions for p in resolve(stage.kwarg("packet")))
        elif name == "contract":
            operand = stage.kwarg("trf")
            if operand is not None:
                operands.append(operand)
            add("contract_steps", stream.time)
            add("contract_bytes", stream.time * stream.packet_bytes)
            named = [d for place in resolve(stage.kwarg("reduce")) for d in place.digits]
            # `reduce = [H]` reduces the digits of H the stream holds; H's slice digits stay partial.
            reduced = [p for d, _ in stream.digits for p in _split_by(d, named) if any(p.within(n) for n in named)]
            partial += [d for d in _subtract(spatial + [d for d, _ in stream.digits], reduced)
                        if d.axis in {r.axis for r in named} and d not in partial]  # fmt: skip
            left = math.prod(n for d, n in stream.digits if not any(d.within(r) for r in reduced))
            fold = resolve(stage.kwarg("fold")) if stage.kwarg("fold") is not None else ()
            packet_digits = [d for p in fold for d in p.digits] if fold else _subtract(packet_digits, reduced)
            # Without `fold` the output packet is what the reduction left of the input packet.
            left_in_packet = math.prod(d.size for d in packet_digits)
            stream.packet = math.prod(p.positions for p in fold) if fold else max(1, left_in_packet)
            shape["lanes"] = stream.packet
            stream.time = max(1, math.ceil(left / stream.packet))
            stream.dtype = "i32" if stream.dtype == "i8" else "f32"
            stream.digits = [(d, n) for d, n in stream.digits if not any(d.within(r) for r in reduced)]
            computed = True
        elif name == "vector":
            active = [a for a in stage.args if not _dropped(a, int_of)]
            add("vector_flits", stream.flits)
            for arg in active:
                op = arg.value
                if not isinstance(op, ir.Call):
                    continue
                add("transcendentals", 1 if op.func in TRANSCENDENTAL else 0)
                operands += [a.value for a in op.args if a.name == "vrf"]
                vector_operands += [a.value for a in op.args if a.name == "vrf"]
                if op.func == "sum_time":
                    summed = resolve(op.args[0].value if op.args else None)
                    stream.time = max(1, stream.time // max(1, count(summed)))
                    partial = _subtract(partial, [d for p in summed for d in p.digits])
                elif op.func == "sum_packet":
                    partial = _subtract(partial, packet_digits)
                elif op.func in ("sum_all", "max_all"):
                    partial = [d for d in partial if any(d.within(s) for s in spatial)]
                elif op.func == "sum_packet":
                    stream.packet = _REDUCED_PACKET
                if op.func in ("sum_all", "max_all"):
                    stream.time, stream.packet = 1, _REDUCED_PACKET
            computed = True
        elif name in ("reduce_slices", "allreduce_slices"):
            group = resolve(stage.kwarg("group"))
            add("reduce_ring", _span(source, group))
            add("reduce_flits", stream.flits)
            partial = _subtract(partial, [d for p in group for d in p.digits])
        elif name == "reduce_clusters":
            add("cluster_reduce_flits", stream.flits)
            partial = _subtract(partial, [d for p in source.tensor.places("cluster") for d in p.digits])
        elif name in ("commit", "commit_into", "to_trf", "to_vrf"):
            shape["commit_packet_bytes"] = stream.packet_bytes
            if context == "main":
                add("commit_writes", stream.flits)
            else:
                add("commit_writes", stream.time * stream.packet_bytes / 8)
    as_int = {k: v for k, v in work.items() if k not in ("decode_bytes", "commit_writes")}
    return PassPlan(
        work=PassWork(
            **{k: round(v) for k, v in as_int.items()},
            decode_bytes=work.get("decode_bytes", 0.0),
            commit_writes=work.get("commit_writes", 0.0),
        ),
        shape=PassShape(**shape),  # type: ignore[arg-type]
        operands=operands,
        dtype=stream.dtype,
        partial=tuple(partial),
        vector_operands=tuple(vector_operands),
    )


def _digits(places: tuple[Place, ...], constraints: tuple, axes: AxisSystem) -> list[tuple[Digit, int]]:
    out: list[tuple[Digit, int]] = []
    for place in places:
        if len(place.digits) == 1:
            out.append((place.digits[0], live_count(place, constraints, axes)))
        else:
            out += [(d, len(admitted_values(d, constraints, axes))) for d in place.digits]
    return out


def _subtract(digits: list[Digit], removed: list[Digit]) -> list[Digit]:
    """The parts of `digits` outside every digit of `removed` (so `H % 64` less `H % 16` is `H / 16 % 4`)."""
    return [p for d in digits for p in _split_by(d, removed) if not any(p.within(r) for r in removed)]


def _split_by(digit: Digit, others: list[Digit]) -> list[Digit]:
    """`digit` cut where a digit of `others` on its axis starts or ends."""
    cuts = sorted({c for o in others if o.axis == digit.axis for c in (o.stride, o.limit)
                   if digit.stride < c < digit.limit and c % digit.stride == 0})  # fmt: skip
    bounds = [digit.stride, *cuts, digit.limit]
    return [Digit(digit.axis, low, math.ceil(high / low)) for low, high in itertools.pairwise(bounds)]


def _elem_steps(tensor: Tensor) -> list[tuple[float, Digit]]:
    """Byte step of each digit of a DM tensor's elem layout."""
    width = ir.DTYPE_BYTES[tensor.dtype]
    steps: list[tuple[float, Digit]] = []
    places = tensor.places("elem")
    for index, place in enumerate(places):
        inner = math.prod(p.positions for p in places[index + 1 :]) * width
        for k, digit in enumerate(place.digits):
            steps.append((inner * math.prod(d.size for d in place.digits[k + 1 :]), digit))
    return steps


def _step(digit: Digit, steps: list[tuple[float, Digit]]) -> float | None:
    """Bytes between consecutive values of a stream digit in the source, None if elem lacks it."""
    return next((s * (digit.stride // d.stride) for s, d in steps
                 if d.axis == digit.axis and d.stride <= digit.stride < d.limit), None)  # fmt: skip


def _contiguous_run(source: View, packet: tuple[Place, ...], constraints: tuple, axes: AxisSystem) -> float:
    """Bytes of the packet that sit back to back in the source's DM elem layout."""
    steps = _elem_steps(source.tensor)
    run = ir.DTYPE_BYTES[source.tensor.dtype]
    for place in reversed(packet):
        if not place.digits:
            break
        for digit in reversed(place.digits):
            if _step(digit, steps) != run:
                return run
            run *= len(admitted_values(digit, constraints, axes))
    return run


def _bank_run(source: View, places: tuple[Place, ...], constraints: tuple, axes: AxisSystem, run: float,
              read: int) -> tuple[int, int]:  # fmt: skip
    """(bank, longest run of consecutive reads hitting that DM bank) of a fetch sequencer that reads
    `read` <= 8 bytes at a time: one bank per read, bank = address bits 3..6 (docs/simrngd.md §6.4, §7.5)."""
    steps = _elem_steps(source.tensor)
    loops: list[tuple[int, float]] = []  # (count, byte step), outer to inner
    for place in places:
        for digit in place.digits:
            step = _step(digit, steps)
            count = len(admitted_values(digit, constraints, axes))
            if step is not None and count > 1:
                loops.append((count, step))
    covered = float(ir.DTYPE_BYTES[source.tensor.dtype])  # the contiguous run is read in `read`-byte steps
    while loops and loops[-1][1] == covered and covered * loops[-1][0] <= run:
        covered *= loops.pop()[0]
    loops.append((max(1, math.ceil(run / read)), float(read)))
    address = np.zeros(1)
    for count, step in loops:
        if address.size * count > MAX_BANK_READS:  # runs repeat with the outer loops: a prefix shows them
            break
        address = (address[:, None] + np.arange(count) * step).ravel()
    banks = (address.astype(np.int64) >> 3) % DM_BANKS
    edges = np.flatnonzero(np.diff(banks)) + 1
    bounds = np.concatenate(([0], edges, [banks.size]))
    lengths = np.diff(bounds)
    longest = int(np.argmax(lengths))
    return int(banks[bounds[longest]]), int(lengths[longest])


def _read_size(run: float, cap: int) -> int:
    size = cap
    while size > 1 and int(run) % size:
        size //= 2
    return size


def _reach(places: tuple[Place, ...]) -> int:
    """The slices a broadcast's copies of one value span: from its outermost replicated term inward
    (the copies, not the padding: `[rep(16) # 256]` reaches 16 slices, `[rep(16) # 16, K / 64]` 16 x
    the positions of K / 64)."""
    for index, place in enumerate(places):
        if place.is_rep:
            return place.copies * math.prod(p.positions for p in places[index + 1 :])
    return 1


def _span(source: View, places: tuple[Place, ...]) -> int:
    """Slice positions from the outermost slice term a switch or reducer involves, inward."""
    slices = source.tensor.places("slice")
    if not places:
        return 1
    involved = [d for p in places for d in p.digits]
    if any(p.is_rep for p in places) and places[0].is_rep:
        return math.prod(p.positions for p in slices) or chip_shape().slices
    for index, place in enumerate(slices):
        if any(d.within(inv) or inv.within(d) for d in place.digits for inv in involved):
            # the outermost involved term spans its data, not its padding (`[G # 256]` with G = 2 spans 2)
            return place.size * math.prod(p.positions for p in slices[index + 1 :])
    return math.prod(p.positions for p in places)


def _dropped(arg: ir.Arg, int_of: IntOf) -> bool:
    """`op(..., when = 0)` (or `enable = 0`) is removed at compile time and costs nothing."""
    value = arg.value
    if isinstance(value, ir.Call):
        for a in value.args:
            if a.name in ("when", "enable"):
                try:
                    return int_of(a.value) == 0
                except Exception:
                    return False
    return False
