"""The structure of SimRNGD's cost as chiplore models it: a design's cycles predicted from its
workload and the parameters chiplore measured (never the simulator's truth). Its job is ranking
and screening, not precision: the generic loop calibrates it against the device, and the device
decides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from chiplore.core.pack import Facts, Params
from chiplore.core.params import ParamKey
from simulator.pack import params as P
from simulator.pack.workload import Stream, Workload

if TYPE_CHECKING:  # the families price themselves with this module's functions
    from simulator.pack.space.family import Family

# The parameters the model reads (each with the order-of-magnitude default it assumes until measured).
COST_PARAMS = (
    P.LAUNCH, P.DMA_START, P.DMA_QUEUED_START, P.ENGINE_BW, P.PACKET_OVERHEAD, P.DMN_BW, P.CLUSTER_PORT,
    P.INTERFERENCE, P.HBM_UNIT, P.PASS_FIXED, P.HANDOFF, P.SWITCH_RING_FLIT, P.REDUCER_THROUGHPUT,
)  # fmt: skip
PASS_LATENCY = 40.0  # stage latencies of a short pass beyond its fixed cost (fetch, collect, commit)


def param(facts: Facts, key: ParamKey) -> float:
    """A measured parameter, or its order-of-magnitude default until it is measured."""
    value = facts.get(key.key, key.default)
    if value is None:
        raise KeyError(f"{key.key} is not measured and has no default")
    return value


def engine_rate(stream: Stream, facts: Facts) -> float:
    """Bytes per cycle one engine moves with this stream's packets."""
    unit = param(facts, P.HBM_UNIT)
    units = math.ceil(stream.packet_bytes / unit) + (0.5 if stream.packet_bytes % unit else 0.0)
    per_packet = units * unit / param(facts, P.ENGINE_BW) + param(facts, P.PACKET_OVERHEAD)
    # consecutive packets of a multi-slice stream alternate DMNs, which doubles the DMN's cap
    return min(stream.packet_bytes / per_packet, 2 * param(facts, P.DMN_BW))


def predict_workload(work: Workload, facts: Facts) -> float:
    """Predicted cycles of one kernel run."""
    port = param(facts, P.CLUSTER_PORT) * param(facts, P.INTERFERENCE)
    start, queued = param(facts, P.DMA_START), param(facts, P.DMA_QUEUED_START)
    pass_cost = param(facts, P.PASS_FIXED) + PASS_LATENCY + param(facts, P.HANDOFF)
    total = sum(s.bytes_per_cluster for s in work.streams)
    stream = max(total / port, *(s.bytes_per_cluster / (s.engines * engine_rate(s, facts)) for s in work.streams))
    # every chunk boundary restarts the engines together; a queued command pays the chained start
    restarts = max(work.chunks - 1, 0) * queued
    chunk_time = stream / max(work.chunks, 1)
    ring, flits = work.head_switch
    head = work.head_passes * pass_cost + ring * flits * param(facts, P.SWITCH_RING_FLIT)
    stall = max(0.0, head - work.depth * chunk_time)  # the stream waits once every buffer is full
    slices, reduce_flits = work.tail_reduce
    reduce = 2 * slices + reduce_flits * (1 + slices * param(facts, P.REDUCER_THROUGHPUT))
    tail = (work.chunk_compute + work.chunk_passes * pass_cost + work.tail_passes * pass_cost + reduce
            + work.tail_dmas * (start + 64))  # fmt: skip
    return param(facts, P.LAUNCH) + start + stream + restarts + stall + tail


class WorkloadCostModel:
    """Prices the designs of SimRNGD's design families from their knobs (a program written by
    anyone else has no knobs, and no price)."""

    def __init__(self, spaces: Mapping[str, Family]) -> None:
        self.spaces = spaces

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        space = self.spaces.get(kernel)
        if params is None or space is None:
            return None
        return predict_workload(space.workload(params, facts), facts)
