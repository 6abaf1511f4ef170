"""The graph's own cost model: a design's cycles predicted from its workload and the parameters
chiplore measured (never the target's truth), then scaled by what the device said of the designs
already run (`calibrated`). Its job is ranking and screening, not precision: the device decides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from agents.space.family import Stream, Workload

# What a parameter is taken to be until measured: the order of magnitude of a DMA-fed NPU.
DEFAULTS: dict[str, float] = {
    "kernel.launch_cycles": 200.0,
    "dma.start_cycles": 400.0,
    "dma.queued_start_cycles": 400.0,
    "dma.engine_bytes_per_cycle": 256.0,
    "dma.packet_overhead_cycles": 2.0,
    "noc.dmn_bytes_per_cycle": 128.0,
    "noc.cluster_port_bytes_per_cycle": 256.0,
    "dma.interference_factor": 1.0,
    "hbm.unit_bytes": 256.0,
    "pass.fixed_cycles": 48.0,
    "queue.handoff_cycles": 32.0,
    "switch.cycles_per_ring_flit": 1.0,
    "reducer.throughput_factor": 1.0 / 64,
}
PASS_LATENCY = 40.0  # stage latencies of a short pass beyond its fixed cost (fetch, collect, commit)


def param(facts: dict[str, float], key: str) -> float:
    """A measured parameter, or its order-of-magnitude default until it is measured."""
    return facts.get(key, DEFAULTS[key])


def engine_rate(stream: Stream, facts: dict[str, float]) -> float:
    """Bytes per cycle one engine moves with this stream's packets."""
    unit = param(facts, "hbm.unit_bytes")
    units = math.ceil(stream.packet_bytes / unit) + (0.5 if stream.packet_bytes % unit else 0.0)
    per_packet = units * unit / param(facts, "dma.engine_bytes_per_cycle") + param(facts, "dma.packet_overhead_cycles")
    # consecutive packets of a multi-slice stream alternate DMNs, which doubles the DMN's cap
    return min(stream.packet_bytes / per_packet, 2 * param(facts, "noc.dmn_bytes_per_cycle"))


def predict(work: Workload, facts: dict[str, float]) -> float:
    """Predicted cycles of one kernel run."""
    port = param(facts, "noc.cluster_port_bytes_per_cycle") * param(facts, "dma.interference_factor")
    start, queued = param(facts, "dma.start_cycles"), param(facts, "dma.queued_start_cycles")
    pass_cost = param(facts, "pass.fixed_cycles") + PASS_LATENCY + param(facts, "queue.handoff_cycles")
    total = sum(s.bytes_per_cluster for s in work.streams)
    stream = max(total / port, *(s.bytes_per_cluster / (s.engines * engine_rate(s, facts)) for s in work.streams))
    # every chunk boundary restarts the engines together; a queued command pays the chained start
    restarts = max(work.chunks - 1, 0) * queued
    chunk_time = stream / max(work.chunks, 1)
    ring, flits = work.head_switch
    head = work.head_passes * pass_cost + ring * flits * param(facts, "switch.cycles_per_ring_flit")
    stall = max(0.0, head - work.depth * chunk_time)  # the stream waits once every buffer is full
    slices, reduce_flits = work.tail_reduce
    reduce = 2 * slices + reduce_flits * (1 + slices * param(facts, "reducer.throughput_factor"))
    tail = (work.chunk_compute + work.chunk_passes * pass_cost + work.tail_passes * pass_cost + reduce
            + work.tail_dmas * (start + 64))  # fmt: skip
    return param(facts, "kernel.launch_cycles") + start + stream + restarts + stall + tail


def calibration(pairs: Sequence[tuple[float, float]]) -> float:
    """The device's verdict on the model so far: median of measured / predicted over run designs."""
    ratios = [measured / predicted for predicted, measured in pairs if predicted > 0 and measured > 0]
    return statistics.median(ratios) if ratios else 1.0
