"""SimRNGD's hardware parameters as chiplore learns them: one key each, with its unit and meaning.

These are chiplore's own names for what the microbenchmarks measure and the docs state (they are not
the simulator's hidden field names). `default` is the order of magnitude a cost model assumes until
the parameter is measured: a DMA-fed NPU's, not this chip's truth.
"""

from __future__ import annotations

from chiplore.core.params import ParamKey, ParamRegistry

EMPTY_KERNEL = ParamKey("kernel.empty_cycles", "cycles", "a launch plus one tiny DMA command")
LAUNCH = ParamKey("kernel.launch_cycles", "cycles", "the fixed cost of a kernel launch", 200.0)
DMA_START = ParamKey("dma.start_cycles", "cycles", "a DMA command's start-up on an idle engine", 400.0)
DMA_QUEUED_START = ParamKey(
    "dma.queued_start_cycles", "cycles", "a DMA command's start-up when it was queued behind another", 400.0
)
ENGINE_RATE_4K = ParamKey("dma.engine_rate_4k_bytes_per_cycle", "B/cycle", "one engine's streaming rate, 4 KB packets")
ENGINE_BW = ParamKey("dma.engine_bytes_per_cycle", "B/cycle", "one DMA engine's raw bandwidth", 256.0)
PACKET_OVERHEAD = ParamKey("dma.packet_overhead_cycles", "cycles", "an engine's cost per packet", 2.0)
DMN_BW = ParamKey("noc.dmn_bytes_per_cycle", "B/cycle", "a stream that stays inside one DMN", 128.0)
CLUSTER_PORT = ParamKey("noc.cluster_port_bytes_per_cycle", "B/cycle", "one cluster's NoC ingress port", 256.0)
CHIP_ROOF = ParamKey("noc.chip_bytes_per_cycle", "B/cycle", "the chip's total weight ingress (every cluster's port)")
HBM_UNIT = ParamKey("hbm.unit_bytes", "B", "the HBM transaction unit", 256.0)
PARTIAL_STORE = ParamKey("hbm.partial_store_factor", "x", "a partial HBM store's cost against a whole unit's")
DM_TO_DM = ParamKey("dma.dm_to_dm_bytes_per_cycle", "B/cycle", "a same-cluster DM -> DM copy by one engine")
CROSS_CLUSTER = ParamKey("dma.cross_cluster_factor", "x", "an engine writing the other cluster's DM, against its own")
DECODE_RATE = ParamKey("decode.bytes_per_cycle", "B/cycle", "f8 table-lookup decode, input bytes per cycle per slice")
DECODE_F4_RATE = ParamKey("decode.f4_bytes_per_cycle", "B/cycle", "f4 table-lookup decode, input bytes per cycle")
FETCH_MAIN = ParamKey("fetch.read_bytes_main", "B/cycle", "the fetch stage's read size on the main context")
FETCH_SUB = ParamKey("fetch.read_bytes_sub", "B/cycle", "the fetch stage's read size on the sub context")
HANDOFF = ParamKey("queue.handoff_cycles", "cycles", "a dependency handed from one queue to another", 32.0)
PASS_FIXED = ParamKey("pass.fixed_cycles", "cycles", "a Tensor-Unit pass's fixed cost", 48.0)
TRANSCENDENTAL = ParamKey(
    "vector.transcendental_cycles_per_flit", "cycles/flit", "a transcendental vector op's cycles per flit"
)
MAX_CHAIN = ParamKey("vector.max_chain_ops", "ops", "the longest vector chain the compiler accepts")
SWITCH_RING_FLIT = ParamKey(
    "switch.cycles_per_ring_flit", "cycles", "switch broadcast: cycles per ring slot and flit", 1.0
)
SWITCH_RING = ParamKey("switch.cycles_per_ring_slice", "cycles", "switch broadcast: latency per ring slot")
REDUCER_SLICE = ParamKey("reducer.cycles_per_slice", "cycles", "inter-slice reducer: latency per slice of the group")
REDUCER_THROUGHPUT = ParamKey(
    "reducer.throughput_factor", "x", "inter-slice reducer: extra cost per flit and slice of the group", 1.0 / 64
)
DM_USABLE = ParamKey("dm.usable_bytes_per_slice", "B", "DM a slice can hold (the compiler's capacity limit)")
INTERFERENCE = ParamKey("dma.interference_factor", "x", "DMA ingress while a Tensor-Unit pass runs in the cluster", 1.0)
BANK_RUN = ParamKey("dm.bank_run_limit", "accesses", "same-bank reads in a row beside a DMA before it objects")
CONTRACT_STEP = ParamKey("contract.bytes_per_step", "B", "the contraction engine's stream bytes per step")
SWITCH_CROSSES = ParamKey("switch.crosses_clusters", "bool", "whether the switch carries data between clusters")
# The chip's shape, found by compiling (MB00); the defaults are what the docs of the first chip state.
CLUSTERS = ParamKey("chip.clusters", "clusters", "the clusters every layout's cluster field spans", 2.0)
SLICES = ParamKey("chip.slices_per_cluster", "slices", "the slices every layout's slice field spans", 256.0)
LANES = ParamKey("contract.lanes", "lanes", "the contraction lanes of a slice (a TRF operand's lane field)", 8.0)
ENGINES_PER_CLUSTER = ParamKey("dma.engines_per_cluster", "engines", "the DMA engines of each cluster", 4.0)
TRF_LANE = ParamKey("trf.lane_bytes", "B", "the largest TRF operand one lane holds", 8192.0)
VRF_SLICE = ParamKey("vrf.slice_bytes", "B", "the largest VRF operand one slice holds", 8192.0)

PARAMS = ParamRegistry(
    (
        EMPTY_KERNEL, LAUNCH, DMA_START, DMA_QUEUED_START, ENGINE_RATE_4K, ENGINE_BW, PACKET_OVERHEAD, DMN_BW,
        CLUSTER_PORT, CHIP_ROOF, HBM_UNIT, PARTIAL_STORE, DM_TO_DM, CROSS_CLUSTER, DECODE_RATE, DECODE_F4_RATE,
        FETCH_MAIN, FETCH_SUB, HANDOFF, PASS_FIXED, TRANSCENDENTAL, MAX_CHAIN, SWITCH_RING_FLIT, SWITCH_RING,
        REDUCER_SLICE, REDUCER_THROUGHPUT, DM_USABLE, INTERFERENCE, BANK_RUN, CONTRACT_STEP, SWITCH_CROSSES,
        CLUSTERS, SLICES, LANES, ENGINES_PER_CLUSTER, TRF_LANE, VRF_SLICE,
    )
)  # fmt: skip
