"""Rules checked on the lowered program (docs/simrngd.md §5.1): the DM, TRF and VRF liveness peaks per
slice (E0301, E0302, E0303), sequencer depth (E0310), fetch packets (E0312), partial HBM writes (W0322),
contraction lanes (E0401), the commit-adapter trim (E0413), DM bank runs (E0520), partial sums
that reach HBM or meet a stream without their digit (E0710) and outputs written only in part (E0801).

They need inlining, unrolling and stream inference, so they run only on programs that pass every
IR-level rule: lowering an erroneous program would only repeat its errors.
"""

from __future__ import annotations

from collections import defaultdict

from chiplore.simulator._truth import chip_shape
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.capacity import dm_limit, trf_limit, vrf_limit
from chiplore.simulator.toolchain.lowered import DmaOp, LoweredProgram, PartialDigit, PassOp
from chiplore.simulator.toolchain.ordering import Ordering
from chiplore.simulator.toolchain.rules import emit

MAX_LOOP_ENTRIES = 8
BANK_RUN_LIMIT = 63  # consecutive same-bank reads a pass may make while DMA writes its cluster
FETCH_WORD = 8  # the fetch adapter hands the stream on in 8-byte words
VALID_TRIMS = (8, 16, 24, 32)


def check_lowered(program: LoweredProgram) -> list[Diagnostic]:
    version = program.version
    out: list[Diagnostic] = []
    for op in program.ops:
        where = _span(op.line)
        if isinstance(op, DmaOp):
            if op.dma_kind == "d2h":
                out += _partial_sums(op.partial, "storing it to HBM", version, where)
            partial = sum(f.partial_packets for f in op.flows)
            if partial:
                out += emit("0322", version, f"{partial} packets of {op.label} end in partial 256-byte HBM units "
                            "(read-modify-write)", where)  # fmt: skip
            continue
        if op.shape.loop_entries > MAX_LOOP_ENTRIES:
            out += emit("0310", version, f"sequencer of {op.label} needs {op.shape.loop_entries} loop entries after "
                        f"merging (max {MAX_LOOP_ENTRIES})", where)  # fmt: skip
        out += _fetch_packet(op, version, where)
        out += _partial_sums(op.mixes_partial, f"combining it with the stream of {op.label}", version, where)
        if op.shape.lanes > chip_shape().lanes:
            out += emit("0401", version, f"contraction uses {op.shape.lanes} lanes (max {chip_shape().lanes})", where)
        trim = op.shape.commit_packet_bytes % 32 or (32 if op.shape.commit_packet_bytes else 0)
        if trim and trim not in VALID_TRIMS:
            out += emit("0413", version, f"commit writes {trim:g} valid bytes per flit; must be 8, 16, 24 or 32", where)
    for output in program.outputs:
        if output.written and not output.complete:  # nothing written at all is the IR rule's report
            out += emit("0801", version, f"output {output.param} is not fully written: {output.written:,} of "
                        f"{output.elements:,} elements, the first missing at {output.first_missing}")  # fmt: skip
    out += _bank_runs(program, version)
    out += _liveness(program, "dm", dm_limit(version), "0301")
    out += _liveness(program, "trf", trf_limit(), "0302")
    out += _liveness(program, "vrf", vrf_limit(), "0303")
    return out


def _fetch_packet(op: PassOp, version: str, where: ir.Span | None) -> list[Diagnostic]:
    """A fetch packet is one contiguous DM run, and leaves the adapters (decode/widen) as whole 8-B
    words; the packet is measured there, so 60 f8 scales widened to f32 (240 B) are fine."""
    shape = op.shape
    if shape.fetch_contiguous and shape.fetch_packet_bytes % FETCH_WORD == 0:
        return []
    return emit("0312", version, f"fetch packet of {shape.fetch_packet_bytes:g} B of {op.label} is not contiguous or "
                "not a multiple of 8 B", where)  # fmt: skip


def _partial_sums(digits: tuple[PartialDigit, ...], use: str, version: str, where: ir.Span | None) -> list[Diagnostic]:
    if not digits:
        return []
    first = digits[0]
    return emit("0710", version, f"{first.tensor} still carries digit {first.digit} of reduced axis {first.axis}; "
                f"reduce it before {use}", where)  # fmt: skip


def _bank_runs(program: LoweredProgram, version: str) -> list[Diagnostic]:
    runs = [op for op in program.passes if op.shape.bank_run > BANK_RUN_LIMIT]
    if not runs:
        return []
    ordering = Ordering(program)
    out: list[Diagnostic] = []
    for op in runs:
        for dma, cluster in ordering.concurrent_dmas_into(op)[:1]:
            message = (f"{op.label} hits DM bank {op.shape.bank} {op.shape.bank_run} times in a row while {dma.label} "
                       f"may write cluster {cluster} (limit {BANK_RUN_LIMIT})")  # fmt: skip
            out += emit("0520", version, message, _span(op.line))
    return out


def _liveness(program: LoweredProgram, space: str, limit: int, number: str) -> list[Diagnostic]:
    """Peak bytes per slice of the buffers alive at each op: from their first write to last read."""
    buffers = {b.id: b for b in program.buffers if b.space == space}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, op in enumerate(program.ops):
        for buffer in op.writes:
            first.setdefault(buffer, index)
            last[buffer] = max(last.get(buffer, index), index)
        for buffer in op.reads:
            last[buffer] = index
    starts: dict[int, list[str]] = defaultdict(list)
    ends: dict[int, list[str]] = defaultdict(list)
    for buffer in buffers:
        if buffer in first:
            starts[first[buffer]].append(buffer)
            ends[last[buffer]].append(buffer)
    use: dict[int, float] = defaultdict(float)
    for index, op in enumerate(program.ops):
        for buffer in starts[index]:
            for slice_id in buffers[buffer].slices:
                use[slice_id] += buffers[buffer].bytes_per_slice
        worst = max(use, key=use.__getitem__, default=None)
        if worst is not None and use[worst] > limit:
            return _over(number, program.version, space, worst, use[worst], limit, op)
        for buffer in ends[index]:
            for slice_id in buffers[buffer].slices:
                use[slice_id] -= buffers[buffer].bytes_per_slice
    return []


def _over(number: str, version: str, space: str, slice_id: int, peak: float, limit: int,
          op: DmaOp | PassOp) -> list[Diagnostic]:  # fmt: skip
    slices = chip_shape().slices
    where = f"slice {slice_id % slices} of cluster {slice_id // slices}"
    if space == "dm":
        message = f"DM use of {where} peaks at {peak:,.0f} B (> {limit:,} B usable) at {op.label}"
    elif space == "trf":
        message = f"TRF use {peak:,.0f} B per slice exceeds {limit:,} B at {op.label} ({where})"
    else:
        message = f"VRF live set {peak:,.0f} B exceeds {limit:,} B at {op.label} ({where})"
    return emit(number, version, message, _span(op.line))


def _span(line: int | None) -> ir.Span | None:
    return ir.Span(line=line, column=1, end_line=line, end_column=1) if line else None
