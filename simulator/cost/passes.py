"""Duration of one Tensor-Unit pass (docs/simrngd.md §7.3): fixed cost, stage latencies, and the
slowest stage of the busiest slice (every live slice runs the same sequencer)."""

from __future__ import annotations

from chiplore.simulator._truth import ChipTruth
from chiplore.simulator.toolchain.lowered import PassWork


def pass_cycles(work: PassWork, truth: ChipTruth) -> tuple[float, str]:
    """(cycles, the stage that bounds it)."""
    stages = {
        "fetch": float(work.fetch_reads),
        "decode": work.decode_bytes / truth.lut_bpc,
        "flit": float(work.flits),
        "switch": float(work.switch_ring * work.switch_flits),
        "contract": max(float(work.contract_steps), work.contract_bytes / truth.contract_bytes_per_step),
        "vector": work.vector_flits * (truth.ve_trans_cycles * work.transcendentals if work.transcendentals else 1.0),
        "reduce": work.reduce_flits * (1 + work.reduce_ring / 64) if work.reduce_ring else 0.0,
        "commit": float(work.commit_writes),
    }
    latency = truth.latency_fetch + truth.latency_collect + truth.latency_commit
    latency += truth.latency_decode if work.decode_bytes else 0
    latency += truth.latency_contract if work.contract_bytes or work.contract_steps else 0
    latency += truth.latency_vector if work.vector_flits else 0
    latency += work.switch_ring + 2 * work.reduce_ring
    bound = max(stages, key=stages.__getitem__)
    cycles = truth.pass_fixed + latency + stages[bound]
    if work.cluster_reduce_flits:  # the cluster bridge (0.7.0) runs after the slice reducers
        cycles += truth.cluster_bridge_cycles + truth.cluster_bridge_per_flit * work.cluster_reduce_flits
    return cycles, bound
