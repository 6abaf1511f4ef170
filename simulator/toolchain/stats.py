"""analyze(source, version) -> ProgramStats: ferc's schedule dump, counted from the LoweredProgram.

What a compiler knows of a program it lowered, and nothing it could only learn by running it: per
op its kind, the queues it occupies (a DMA's flow on each engine, a pass on its context), the shared
resources each part draws on (a cluster's ingress or egress port, HBM, a cluster's Tensor Unit),
the ops it waits for, and its counters; program totals, per-resource totals and peaks. No timing and
no hidden chip value is in it: the pack's cost model turns it into cycles with learnt parameters.

A program that does not compile gives stats with `compiled = False` and check's diagnostics (data,
not an exception); an unknown explicit version is the caller's error (ValueError, as for check).

Counters (docs/simrngd.md §6): a DMA part has `bytes`, `packets`, `cluster` (destination cluster; the
source's for a store), `cross_cluster` (0/1), `dmn_alternation` (fraction of consecutive packets
that change DMN), `hbm_units` (256-B units touched), `partial_units` and `partial_packets` (partly
written units of a store). A pass's counters are per live slice (every slice runs the same
sequencer): `fetch_reads`, `decode_bytes`, `flits`, `contract_steps`, `contract_bytes`,
`vector_flits`, `transcendentals`, `switch_ring`, `switch_flits`, `reduce_ring`, `reduce_flits`,
`cluster_reduce_flits`, `commit_writes`, `lanes`, `bank_run` (longest same-bank read run) and
`concurrent_dma_writes` (DMAs that may write its clusters meanwhile, counted where `bank_run` >= 2),
plus `live_slices` per cluster and `clusters`. A counter that is 0 is left out.
"""

from __future__ import annotations

import functools
import hashlib
from collections import defaultdict

import numpy as np

from chiplore.core.stats import Counters, OpPart, OpStats, ProgramStats
from chiplore.simulator import NAME
from chiplore.simulator._truth import chip_shape
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.toolchain.budget import source_over_budget
from chiplore.simulator.toolchain.check import check, checked_chip
from chiplore.simulator.toolchain.lower import lower
from chiplore.simulator.toolchain.lowered import BufferInfo, DmaOp, Flow, LoweredProgram, PassOp
from chiplore.simulator.toolchain.ordering import Ordering
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION, spec

HBM_READS = ("h2d", "gather")
HBM_WRITES = ("d2h", "scatter")
DM_TO_DM = ("d2d", "d2d_x")
PASS_WORK = (
    "fetch_reads", "decode_bytes", "flits", "contract_steps", "contract_bytes", "vector_flits", "transcendentals",
    "switch_ring", "switch_flits", "reduce_ring", "reduce_flits", "cluster_reduce_flits", "commit_writes",
)  # fmt: skip


def analyze(source: str, version: str | None = None) -> ProgramStats:
    """The program's lowering statistics under `version` (else its header, else the default).
    Cached by (source digest, version, chip): the stats do not change, and check decides compiling
    against the chip's compile-time limits."""
    if version is not None:
        spec(version)  # an unknown explicit version is the caller's error
    digest = hashlib.sha256(source.encode("utf-8", errors="surrogatepass")).hexdigest()
    return _analyze(digest, version, checked_chip(), source)


@functools.lru_cache(maxsize=128)  # a large program's stats take about 1 MB
def _analyze(digest: str, version: str | None, chip: str | None, source: str) -> ProgramStats:
    checked = check(source, version)
    if not checked.ok:
        return ProgramStats(target=NAME, kernel=_kernel_name(source), version=checked.version, compiled=False,
                            diagnostics=checked.diagnostics)  # fmt: skip
    return program_stats(lower(source, checked.version), checked.diagnostics)


def program_stats(program: LoweredProgram, diagnostics: tuple[Diagnostic, ...] = ()) -> ProgramStats:
    """The stats of a lowered program (warnings and notes of its check carried along)."""
    ops = tuple(_op_stats(program))
    return ProgramStats(
        target=NAME,
        kernel=program.kernel,
        version=program.version,
        diagnostics=diagnostics,
        ops=ops,
        totals=_totals(program),
        by_resource=_by_resource(program),
        peaks=_peaks(program),
    )


def _kernel_name(source: str) -> str:
    if source_over_budget(source, DEFAULT_VERSION):
        return ""  # check refused it unread (E0104): a 10 MB file is not parsed for its kernel's name
    try:
        kernels = parse(source).kernels
    except FerriteSyntaxError:
        return ""
    return kernels[0].name if len(kernels) == 1 else ""


# ---- ops ---------------------------------------------------------------------------------------


def _op_stats(program: LoweredProgram) -> list[OpStats]:
    ids = {op.id for op in program.ops}
    readers: dict[str, list[str]] = {}  # buffer -> ops that read it since it was last written
    beside = _bank_neighbours(program)
    out: list[OpStats] = []
    for op in program.ops:
        after = {r for buffer in op.writes for r in readers.get(buffer, ()) if r != op.id}
        deps = tuple(dict.fromkeys(d for d in op.deps if d in ids and d != op.id))
        for buffer in op.reads:
            readers.setdefault(buffer, []).append(op.id)
        for buffer in op.writes:
            readers[buffer] = []
        common = {"id": op.id, "label": op.label, "line": op.line, "deps": deps,
                  "after": tuple(sorted(after - set(deps)))}  # fmt: skip
        if isinstance(op, DmaOp):
            out.append(OpStats(kind=f"dma.{op.dma_kind}", counters=_dma_counters(op),
                               parts=tuple(_flow_part(op, flow) for flow in op.flows), **common))  # fmt: skip
        else:
            part = OpPart(queue=op.context, resources=tuple(f"cluster{c}.tu" for c in op.clusters))
            counters = _pass_counters(op, beside.get(op.id, 0))
            out.append(OpStats(kind=f"pass.{op.context}", counters=counters, parts=(part,), **common))
    return out


def _bank_neighbours(program: LoweredProgram) -> dict[str, int]:
    """For each pass that reads one DM bank twice or more in a row: how many DMAs may write one of its
    clusters while it runs (what the bank-run rule weighs, docs/simrngd.md §7.5)."""
    risky = [op for op in program.passes if op.shape.bank_run >= 2]
    if not risky:
        return {}
    ordering = Ordering(program)
    return {op.id: len(ordering.concurrent_dmas_into(op)) for op in risky}


def _nonzero(counters: Counters) -> Counters:
    """A counter that is 0 is left out: readers take a missing counter as 0."""
    return {name: value for name, value in counters.items() if value}


def _dma_counters(op: DmaOp) -> Counters:
    return _nonzero(
        {
            "bytes": float(op.bytes),
            "packets": float(op.packets),
            "packet_bytes": float(op.packet_bytes),
            "commands": float(len(op.flows)),
            "engines": float(len(op.engines)),
            "cross_cluster_bytes": float(sum(f.bytes for f in op.flows if f.cross_cluster)),
            "hbm_units": float(sum(f.hbm_units for f in op.flows)),
            "partial_units": float(sum(f.partial_units for f in op.flows)),
        }
    )


def _flow_part(op: DmaOp, flow: Flow) -> OpPart:
    """One engine's share, and the ports it draws on: writes into DM take the destination cluster's
    ingress, reads out of DM the source cluster's egress, HBM transfers HBM (docs/simrngd.md §7.2)."""
    resources: list[str] = []
    if op.dma_kind in HBM_WRITES:
        resources.append(f"cluster{flow.cluster}.egress")
    else:
        resources.append(f"cluster{flow.cluster}.ingress")
    if op.dma_kind in DM_TO_DM:
        source = flow.source_cluster if op.dma_kind == "d2d_x" and flow.source_cluster is not None else flow.cluster
        resources.append(f"cluster{source}.egress")
    if op.dma_kind in HBM_READS + HBM_WRITES:
        resources.append("hbm")
    counters = {
        "bytes": float(flow.bytes),
        "packets": float(flow.packets),
        "cluster": float(flow.cluster),
        "cross_cluster": float(flow.cross_cluster),
        "dmn_alternation": flow.alt_fraction,
        "hbm_units": flow.hbm_units,
        "partial_units": float(flow.partial_units),
        "partial_packets": float(flow.partial_packets),
    }
    return OpPart(queue=f"e{flow.engine}", resources=tuple(resources), counters=_nonzero(counters))


def _pass_counters(op: PassOp, concurrent_dma_writes: int) -> Counters:
    counters = {name: float(getattr(op.work, name)) for name in PASS_WORK}
    counters |= {"live_slices": float(op.live_slices), "clusters": float(len(op.clusters)),
                 "lanes": float(op.shape.lanes), "bank_run": float(op.shape.bank_run),
                 "concurrent_dma_writes": float(concurrent_dma_writes)}  # fmt: skip
    return _nonzero(counters)


# ---- totals, resources, peaks ----------------------------------------------------------------


def _totals(program: LoweredProgram) -> Counters:
    totals: Counters = defaultdict(float)
    for op in program.dmas:
        totals["dma.ops"] += 1
        totals["dma.commands"] += len(op.flows)
        totals["dma.bytes"] += op.bytes
        totals["dma.packets"] += op.packets
        totals[f"dma.{op.dma_kind}.bytes"] += op.bytes
        totals["dma.cross_cluster_bytes"] += sum(f.bytes for f in op.flows if f.cross_cluster)
        if op.dma_kind in HBM_READS:
            totals["hbm.read_bytes"] += op.bytes
        elif op.dma_kind in HBM_WRITES:
            totals["hbm.write_bytes"] += op.bytes
            totals["hbm.partial_units"] += sum(f.partial_units for f in op.flows)
        totals["hbm.units"] += sum(f.hbm_units for f in op.flows)
    for op in program.passes:
        work = op.work
        totals["pass.count"] += 1
        totals[f"pass.{op.context}.count"] += 1
        for name in PASS_WORK:  # per-slice work, summed over passes: what the busiest sequencer does
            totals[f"pass.{name}"] += getattr(work, name)
        totals["switch.ring_flits"] += work.switch_ring * work.switch_flits
        totals["reduce.ring_flits"] += work.reduce_ring * work.reduce_flits
    return dict(sorted(totals.items()))


def _by_resource(program: LoweredProgram) -> dict[str, Counters]:
    """Per engine queue (`e0`..`e7`), context (`main`, `sub`), cluster (`cluster0`, `cluster1`),
    HBM input read (`input.<param>`) and output written (`output.<param>`)."""
    groups: dict[str, Counters] = defaultdict(lambda: defaultdict(float))
    for op in program.dmas:
        for flow in op.flows:
            engine = groups[f"e{flow.engine}"]
            engine["commands"] += 1
            engine["bytes"] += flow.bytes
            engine["packets"] += flow.packets
            port = "egress" if op.dma_kind in HBM_WRITES else "ingress"
            groups[f"cluster{flow.cluster}"][f"{port}_bytes"] += flow.bytes
        if op.dma_kind in HBM_READS:
            groups[f"input.{op.source}"]["bytes"] += op.bytes
        elif op.dma_kind in HBM_WRITES:
            groups[f"output.{op.destination}"]["bytes"] += op.bytes
    for op in program.passes:
        queue = groups[op.context]
        queue["passes"] += 1
        for name in PASS_WORK:
            queue[name] += getattr(op.work, name)
        for cluster in op.clusters:
            groups[f"cluster{cluster}"]["passes"] += 1
    for coverage in program.outputs:
        output = groups[f"output.{coverage.param}"]
        output["elements"] = coverage.elements
        output["written"] = coverage.written
    return {name: dict(counters) for name, counters in sorted(groups.items())}


def _peaks(program: LoweredProgram) -> Counters:
    """Per space, the most bytes one slice holds: `<space>.bytes_per_slice` with each buffer live from
    the first op that touches it to the last (program order), `<space>.allocated_bytes_per_slice` with
    every buffer held for the whole program; and the largest DMA packet and pass flits."""
    peaks: Counters = {}
    steps = len(program.ops) + 1
    span = _buffer_spans(program)
    for space in ("dm", "trf", "vrf"):
        buffers = [b for b in program.buffers if b.space == space]
        live = np.zeros((steps, _chip_slices()))
        held = np.zeros(_chip_slices())
        for buffer in buffers:
            slices = _slices(buffer)
            first, last = span.get(buffer.id, (0, steps - 2))
            live[first, slices] += buffer.bytes_per_slice
            live[last + 1, slices] -= buffer.bytes_per_slice
            held[slices] += buffer.bytes_per_slice
        peaks[f"{space}.bytes_per_slice"] = float(np.cumsum(live, axis=0).max(initial=0.0))
        peaks[f"{space}.allocated_bytes_per_slice"] = float(held.max(initial=0.0))
    dmas, passes = program.dmas, program.passes
    peaks["dma.packet_bytes"] = float(max((op.packet_bytes for op in dmas), default=0))
    peaks["dma.bytes"] = float(max((op.bytes for op in dmas), default=0))
    peaks["pass.flits"] = float(max((op.work.flits for op in passes), default=0))
    return peaks


def _buffer_spans(program: LoweredProgram) -> dict[str, tuple[int, int]]:
    """Each buffer's live range in program order: from the first op that touches it to the last."""
    spans: dict[str, tuple[int, int]] = {}
    for index, op in enumerate(program.ops):
        for buffer in (*op.writes, *op.reads):
            first, _ = spans.get(buffer, (index, index))
            spans[buffer] = (first, index)
    return spans


def _slices(buffer: BufferInfo) -> np.ndarray:
    if buffer.slices:
        return np.asarray(buffer.slices, dtype=np.int64)
    return np.arange(min(buffer.live_slices, _chip_slices()), dtype=np.int64)  # where unknown: the first


def _chip_slices() -> int:
    shape = chip_shape()
    return shape.clusters * shape.slices
