"""What one DMA flow may do on its own (its cap) and which shared resources it draws on, and
at what weight per payload byte (docs/simrngd.md §7.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from chiplore.simulator._truth import ChipTruth
from chiplore.simulator.toolchain.lowered import DmaOp, Flow

HBM_READS = ("h2d", "gather")
HBM_WRITES = ("d2h", "scatter")
DM_TO_DM = ("d2d", "d2d_x")

Resource = tuple[str, int]  # ("in", cluster) | ("out", cluster) | ("hbm", 0)


@dataclass(frozen=True)
class FlowModel:
    cap: float  # B/cycle the flow reaches alone
    bound: str  # what sets the cap: engine | dmn | dm2dm
    uses: dict[Resource, float]  # resource -> bytes of it per payload byte


def model_flow(op: DmaOp, flow: Flow, truth: ChipTruth) -> FlowModel:
    packet = flow.bytes / max(flow.packets, 1)
    unit = truth.hbm_unit
    touched, partial = flow.in_units(unit)  # in the chip's unit, not the 256 B the compiler reports
    if op.dma_kind in HBM_WRITES:
        units = (touched - partial + truth.rmw_factor * partial) / max(flow.packets, 1)
    elif op.dma_kind in HBM_READS:
        units = touched / max(flow.packets, 1)
    else:
        units = math.ceil(packet / unit)
    caps = {
        "engine": packet / (units * unit / truth.engine_bw + truth.pkt_overhead),
        # A lone packet is not a stream: no pair of packets shares a DMN port, so it counts as alternating.
        "dmn": truth.dmn_bw * (1 + (flow.alt_fraction if flow.packets > 1 else 1.0)),
    }
    if op.dma_kind in DM_TO_DM:
        caps["dm2dm"] = truth.dm2dm_phase_bw / 2  # the read and the write phase serialise
    bound = min(caps, key=caps.__getitem__)
    cap = caps[bound]
    if flow.cross_cluster:
        cap *= truth.xcluster_factor
    uses: dict[Resource, float] = {}
    if op.dma_kind in HBM_WRITES:
        uses[("out", flow.cluster)] = 1.0
    else:
        uses[("in", flow.cluster)] = 1.0
    if op.dma_kind in DM_TO_DM:
        source = flow.source_cluster if op.dma_kind == "d2d_x" and flow.source_cluster is not None else flow.cluster
        uses[("out", source)] = 1.0
    if op.dma_kind in HBM_READS + HBM_WRITES:
        uses[("hbm", 0)] = units * unit / packet if packet else 1.0
    return FlowModel(cap=cap, bound=bound, uses=uses)
