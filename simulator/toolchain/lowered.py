"""The LoweredProgram (docs/simrngd.md §6.1): what the cost model and the executor consume.

Every op is in program order after inlining and unrolling. Work counts of a pass are per slice
(every live slice runs the same sequencer; the busiest one sets the time). A DMA op is split into
one flow per engine; byte counts include replicated copies (each copy is written).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

DmaKind = Literal["h2d", "d2h", "d2d", "d2d_x", "gather", "scatter"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Flow(Frozen):
    """The share of one DMA op that one engine moves."""

    engine: int
    cluster: int  # destination cluster (source cluster for DM -> HBM)
    cross_cluster: bool  # the engine or the data's source sits in the other cluster
    bytes: int
    packets: int
    alt_fraction: float  # consecutive packets landing in a different DMN (DMN = slice / dmn_slices)
    hbm_units: float  # 256-byte HBM units touched, summed over packets (0 when no HBM side)
    partial_units: int  # HBM units only partly written (read-modify-write)
    partial_packets: int = 0  # packets that write at least one partial unit
    # (unit bytes, units touched, units partly written) for each unit a chip may have (32 B to 2 KB):
    # the compiler reports 256-B units; the chip's cost is in its own
    at_units: tuple[tuple[int, float, int], ...] = ()
    # A cross-cluster DM -> DM flow's other cluster (where its data or its engine sits); None otherwise.
    source_cluster: int | None = None

    def in_units(self, unit: int) -> tuple[float, int]:
        """The HBM units of `unit` bytes the flow touches, and those it writes only partly."""
        for size, units, partial in self.at_units:
            if size == unit:
                return units, partial
        if not self.hbm_units:  # no HBM side
            return 0.0, 0
        raise ValueError(f"no count of {unit}-byte HBM units for this flow (counted: {[u for u, *_ in self.at_units]})")


class PartialDigit(Frozen):
    """A digit of a partly reduced axis that a tensor of partial sums still carries (E0710)."""

    tensor: str  # name as written
    digit: str
    axis: str


class DmaOp(Frozen):
    kind: Literal["dma"] = "dma"
    id: str
    label: str
    line: int | None = None
    dma_kind: DmaKind
    bytes: int
    packet_bytes: int
    packets: int
    engines: tuple[int, ...]
    flows: tuple[Flow, ...]
    clusters: tuple[int, ...]  # destination clusters
    source: str  # tensor ids
    destination: str
    deps: tuple[str, ...] = ()  # producers of what it reads
    reads: tuple[str, ...] = ()  # buffer identities (write-after-read)
    writes: tuple[str, ...] = ()
    partial: tuple[PartialDigit, ...] = ()  # the source is a tensor of partial sums in these digits

    @property
    def queues(self) -> tuple[str, ...]:
        return tuple(f"e{engine}" for engine in self.engines)


class PassWork(Frozen):
    """Per-slice work of one Tensor-Unit pass, one field per stage of docs/simrngd.md §7.3."""

    fetch_reads: int = 0
    decode_bytes: float = 0.0
    flits: int = 0
    contract_steps: int = 0
    contract_bytes: int = 0
    vector_flits: int = 0
    transcendentals: int = 0
    switch_ring: int = 0
    switch_flits: int = 0
    reduce_ring: int = 0
    reduce_flits: int = 0
    cluster_reduce_flits: int = 0  # reduce_clusters (0.7.0)
    commit_writes: float = 0.0


class PassShape(Frozen):
    """Facts of a pass's stream that legality rules and the scheduler read (E0310, E0312, E0401, E0413,
    E0520)."""

    loop_entries: int = 0  # fetch sequencer loops after merging adjacent digits
    lanes: int = 0  # contraction output packet (fold) positions
    commit_packet_bytes: float = 0.0  # bytes per packet reaching the commit adapter
    fetch_contiguous: bool = True  # every fetch packet is one contiguous DM run (E0312)
    fetch_packet_bytes: float = 0.0  # packet bytes leaving the fetch adapters (E0312)
    bank: int = 0  # DM bank of the longest same-bank run of the fetch sequencer
    bank_run: int = 0  # its length in consecutive reads (E0520 at >= 64)


class PassOp(Frozen):
    kind: Literal["pass"] = "pass"
    id: str
    label: str
    line: int | None = None
    context: Literal["main", "sub"]
    clusters: tuple[int, ...]
    live_slices: int  # per cluster
    work: PassWork
    shape: PassShape = PassShape()
    sources: tuple[str, ...]  # tensor ids read (stream source, TRF/VRF operands)
    destination: str | None
    deps: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # VRF operands of partial sums combined with a stream that lacks their partial digit (E0710)
    mixes_partial: tuple[PartialDigit, ...] = ()

    @property
    def queues(self) -> tuple[str, ...]:
        return (self.context,)


LoweredOp = Annotated[DmaOp | PassOp, Field(discriminator="kind")]


class BufferInfo(Frozen):
    """A DM/TRF/VRF buffer: how many bytes it takes in each slice it lives in."""

    id: str
    space: Literal["dm", "trf", "vrf"]
    bytes_per_slice: float
    live_slices: int
    slices: tuple[int, ...] = ()  # global slice ids (cluster * slices per cluster + slice) it occupies


class OutputCoverage(Frozen):
    """How much of a `&mut` HBM parameter the program writes. Digits selected at run time by
    `.at(A = p)` count as written: a cache update writes the row the harness asks for."""

    param: str
    elements: int  # with run-time selected digits counted once
    written: int
    first_missing: str | None = None  # index of the first element never written, as `A=i, B=j`

    @property
    def complete(self) -> bool:
        return self.written >= self.elements


class LoweredProgram(Frozen):
    kernel: str
    version: str
    ops: tuple[LoweredOp, ...]
    buffers: tuple[BufferInfo, ...] = ()
    outputs: tuple[OutputCoverage, ...] = ()

    @property
    def dmas(self) -> list[DmaOp]:
        return [op for op in self.ops if isinstance(op, DmaOp)]

    @property
    def passes(self) -> list[PassOp]:
        return [op for op in self.ops if isinstance(op, PassOp)]

    def op(self, label: str) -> DmaOp | PassOp:
        """The op with this label (labels are unique)."""
        for op in self.ops:
            if op.label == label:
                return op
        raise KeyError(label)

    def bytes_moved(self, *kinds: str) -> int:
        return sum(op.bytes for op in self.dmas if not kinds or op.dma_kind in kinds)
