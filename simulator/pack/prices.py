"""What SimRNGD's stats-based cost model reads of chiplore's knowledge (`Prices`, each learnt value
or what is assumed until it is measured) and what one op costs on its own: a pass's cycles, a DMA
flow's rate alone (docs/simrngd.md §7.2, §7.3, with learnt numbers; never the chip's truth)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from chiplore.core.pack import Facts
from chiplore.core.params import ParamKey
from chiplore.core.stats import Counters
from chiplore.simulator.pack import params as P

# What the model assumes for a parameter that is not measured yet and whose key declares no default:
# the vendor docs' statement where they make one (a switch costs ring x flits x T + ring; a reducer
# about r cycles; 64 B of stream per contraction step; stores of partial units about 50 times slower;
# the bank-run limit of 64), else a DMA-fed NPU's order of magnitude.
ASSUMED: dict[str, float] = {
    P.DM_TO_DM.key: 128.0,
    P.CROSS_CLUSTER.key: 1.0,
    P.PARTIAL_STORE.key: 50.0,
    P.DECODE_RATE.key: 2.0,
    P.TRANSCENDENTAL.key: 2.0,
    P.SWITCH_RING.key: 1.0,
    P.REDUCER_SLICE.key: 1.0,
    P.CONTRACT_STEP.key: 64.0,
    P.BANK_RUN.key: 64.0,
}
STAGE_LATENCY = 10.0  # each optional stage's latency (decode, contract, vector): not measured, a guess
# reduce_clusters over the cluster bridge, as the 0.7.0 docs state it (no probe measures it)
BRIDGE_CYCLES, BRIDGE_PER_FLIT = 160.0, 2.0
# The reducer's throughput term is learnt as the coefficient of flits x group / 64 (fits.fit_reducer).
REDUCER_GROUP_SCALE = 64.0


def _value(facts: Facts, key: ParamKey) -> float:
    value = facts.get(key.key, key.default)
    return float(value if value is not None else ASSUMED[key.key])


@dataclass(frozen=True)
class Prices:
    """The learnt parameters the model reads, each the measured value or what is assumed until then."""

    launch: float
    dma_start: float
    dma_queued_start: float
    engine_bw: float
    packet_overhead: float
    dmn_bw: float
    cluster_port: float
    interference: float
    hbm_unit: float
    partial_store: float
    dm_to_dm: float
    cross_cluster: float
    decode_rate: float
    transcendental: float
    pass_fixed: float
    handoff: float
    switch_ring_flit: float
    switch_ring: float
    reducer_slice: float
    reducer_throughput: float
    contract_step: float
    bank_run: float
    # the chip's measured roof where it is below the ports' sum (HBM's side binds): every load shares it
    roof: float | None = None

    @classmethod
    def of(cls, facts: Facts) -> Prices:
        keys = {
            "launch": P.LAUNCH, "dma_start": P.DMA_START, "dma_queued_start": P.DMA_QUEUED_START,
            "engine_bw": P.ENGINE_BW, "packet_overhead": P.PACKET_OVERHEAD, "dmn_bw": P.DMN_BW,
            "cluster_port": P.CLUSTER_PORT, "interference": P.INTERFERENCE, "hbm_unit": P.HBM_UNIT,
            "partial_store": P.PARTIAL_STORE, "dm_to_dm": P.DM_TO_DM, "cross_cluster": P.CROSS_CLUSTER,
            "decode_rate": P.DECODE_RATE, "transcendental": P.TRANSCENDENTAL, "pass_fixed": P.PASS_FIXED,
            "handoff": P.HANDOFF, "switch_ring_flit": P.SWITCH_RING_FLIT, "switch_ring": P.SWITCH_RING,
            "reducer_slice": P.REDUCER_SLICE, "reducer_throughput": P.REDUCER_THROUGHPUT,
            "contract_step": P.CONTRACT_STEP, "bank_run": P.BANK_RUN,
        }  # fmt: skip
        values = {name: _value(facts, key) for name, key in keys.items()}
        roof, clusters = facts.get(P.CHIP_ROOF.key), facts.get(P.CLUSTERS.key, P.CLUSTERS.default or 2.0)
        below = roof is not None and roof < ROOF_BELOW_PORTS * clusters * values["cluster_port"]
        return cls(**values, roof=roof if below else None)


ROOF_BELOW_PORTS = 0.95  # a measured roof under this share of the ports' sum is another resource's, not theirs

# The parameter keys the model reads: a design priced by it consults them.
STATS_COST_PARAMS: tuple[ParamKey, ...] = (
    P.LAUNCH, P.DMA_START, P.DMA_QUEUED_START, P.ENGINE_BW, P.PACKET_OVERHEAD, P.DMN_BW, P.CLUSTER_PORT,
    P.INTERFERENCE, P.HBM_UNIT, P.PARTIAL_STORE, P.DM_TO_DM, P.CROSS_CLUSTER, P.DECODE_RATE, P.TRANSCENDENTAL,
    P.PASS_FIXED, P.HANDOFF, P.SWITCH_RING_FLIT, P.SWITCH_RING, P.REDUCER_SLICE, P.REDUCER_THROUGHPUT,
    P.CONTRACT_STEP, P.BANK_RUN,
)  # fmt: skip
# Not among them: the chip's roof, which the model reads only where it is below the ports' sum (an
# HBM-bound chip). A design consulting it everywhere moved it up the upgrade's re-measurement order
# (by how many designs consulted each fact) on chips where it never priced anything.


# ---- one op on its own -----------------------------------------------------------------------


def pass_cycles(c: Counters, p: Prices) -> float:
    """One pass: fixed cost, stage latencies and the slowest stage of a slice (all slices run alike)."""
    g = c.get
    transcendentals = g("transcendentals", 0.0)
    reduce_ring = g("reduce_ring", 0.0)
    stages = (
        g("fetch_reads", 0.0),
        g("decode_bytes", 0.0) / p.decode_rate,
        g("flits", 0.0),
        g("switch_ring", 0.0) * g("switch_flits", 0.0) * p.switch_ring_flit,
        max(g("contract_steps", 0.0), g("contract_bytes", 0.0) / p.contract_step),
        g("vector_flits", 0.0) * (p.transcendental * transcendentals if transcendentals else 1.0),
        g("reduce_flits", 0.0) * (1 + p.reducer_throughput * reduce_ring / REDUCER_GROUP_SCALE) if reduce_ring else 0,
        g("commit_writes", 0.0),
    )
    optional = sum(1 for name in ("decode_bytes", "contract_steps", "vector_flits") if g(name))
    latency = p.pass_fixed + optional * STAGE_LATENCY + g("switch_ring", 0.0) * p.switch_ring
    latency += p.reducer_slice * reduce_ring
    cycles = latency + max(stages)
    if g("cluster_reduce_flits"):
        cycles += BRIDGE_CYCLES + BRIDGE_PER_FLIT * g("cluster_reduce_flits", 0.0)
    return cycles


COMPILER_UNIT = 256.0  # the HBM unit ferc's stats count in (docs/simrngd.md §6)


def start_granule(packet: float, touched: float) -> float:
    """Every how many bytes a flow's packets start in HBM, from the 256-B units they touch on average
    (`touched` bytes): a count above the packet's own says they start off 256-B bounds, that often; a
    flow aligned to 256 B is taken to start on its packets' own power of two (rows of 256 B every 256 B,
    4 KB ones every 4 KB)."""
    granule = packet + COMPILER_UNIT - touched
    if granule < COMPILER_UNIT - 1e-9:
        return max(granule, 1.0)
    if packet == int(packet) and packet >= 1:
        return float(int(packet) & -int(packet))
    # an average of sizes (whole packets and a last, shorter one): their starts keep the whole ones' scale
    return float(max(COMPILER_UNIT, 2 ** math.floor(math.log2(packet))))


def unit_bytes(packet: float, touched: float, granule: float, unit: float) -> float:
    """The HBM bytes a packet of `packet` bytes moves in `unit`-byte units, from the 256-B units it
    touches (`touched` bytes, on average over the flow's packets): packets starting every `granule`
    bytes touch `packet + unit - granule` on average where that is under a unit, and the packet's whole
    units otherwise."""
    if unit == COMPILER_UNIT or not touched or not packet:
        return touched
    if granule < unit:
        return packet + unit - granule
    return math.ceil(packet / unit - 1e-9) * unit


def partial_units(packet: float, granule: float, partial: float, units: float, unit: float) -> float:
    """The partly written `unit`-byte units of a store's packet, from the compiler's count of partial
    256-B ones (`partial`): the same where the unit is 256 B; packets that start on the unit's bounds cut
    one where they end off one; starting every `granule` < `unit` bytes, each end is off a bound
    `1 - granule / unit` of the time."""
    if unit == COMPILER_UNIT:
        return partial
    if granule >= unit:
        return min(units, 1.0 if packet % unit else 0.0)
    return min(units, 2.0 * (1.0 - granule / unit))


def flow_cap(kind: str, c: Counters, p: Prices) -> float:
    """Bytes per cycle one engine's flow reaches alone."""
    packets = max(c.get("packets", 0.0), 1.0)
    packet = c.get("bytes", 0.0) / packets
    if kind in ("d2h", "scatter", "h2d", "gather"):
        # HBM bytes a packet moves: the compiler counts 256-B units; in the chip's (learnt) unit
        touched = c.get("hbm_units", 0.0) / packets * COMPILER_UNIT
        granule = start_granule(packet, touched)
        moved = unit_bytes(packet, touched, granule, p.hbm_unit)
        if kind in ("d2h", "scatter"):  # and a write's partly written units cost `partial_store` whole ones
            partial = partial_units(packet, granule, c.get("partial_units", 0.0) / packets, moved / p.hbm_unit,
                                    p.hbm_unit)  # fmt: skip
            moved += (p.partial_store - 1.0) * partial * p.hbm_unit
    else:
        moved = math.ceil(packet / p.hbm_unit) * p.hbm_unit if packet else 0.0
    engine = packet / (moved / p.engine_bw + p.packet_overhead) if packet else 0.0
    # consecutive packets in different DMNs raise the DMN's cap up to double; a lone packet is not a stream
    alternation = c.get("dmn_alternation", 0.0) if packets > 1 else 1.0
    cap = min(engine, p.dmn_bw * (1 + alternation))
    if kind in ("d2d", "d2d_x"):
        cap = min(cap, p.dm_to_dm)
    if c.get("cross_cluster"):
        cap *= p.cross_cluster
    return cap
