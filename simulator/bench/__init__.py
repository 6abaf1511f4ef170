"""The starting microbenchmarks (docs/simrngd.md §10), as Ferrite templates with a sweep.

Each probe is a tiny kernel whose cycle count, swept over one knob, isolates one or two hidden
parameters. What a probe measures is said in words here (agent-visible); what it should find is
the answer key the simulator's own tests hold, never shipped to agents.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from chiplore.core.target import ProbeTemplate
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip

HERE = Path(__file__).resolve().parent


# MB00's point where every knob but the searched one stays: the documented shape, the smallest operands.
SHAPE_START = {"CLUSTERS": "2", "SLICES": "256", "LANES": "1", "ENGINE": "0", "TRF": "16", "VRF": "16"}


def knobs(shape: Chip) -> dict[str, str]:
    """What every template is written in: the layouts' sizes and the engines it names."""
    return {
        "CLUSTERS": str(shape.clusters), "SLICES": str(shape.slices), "SLICES_8": str(shape.slices // 8),
        # an order's stride that alternates DMNs: half a cluster apart, two slices share a DMN only where a
        # cluster is one DMN (the docs' stride of 32 kept a DMN of 64 two packets in a row, capping the
        # engine and port probes at 1.5 x the DMN's rate: a user's 1 x 1,024 chip learnt both ~20 % low)
        "DMN": str(shape.slices // 2),
        # the sink: cluster 0's last engine, beside the streams of engine 0 where it has another
        "SINK": str(shape.engines_per_cluster - 1), "AUX": str(min(1, shape.engines - 1)),
        # MB07's stores: cluster 0's second engine, else its only one (on a chip of one engine a cluster,
        # engine 1 wrote cluster 0's rows across clusters, slower: the partial-store factor learnt twice over)
        "STORER": str(min(1, shape.engines_per_cluster - 1)),
        "LOCAL_ENGINES": str(shape.local(0)), "ALL_ENGINES": str(list(range(shape.engines))),
        # MB16's DMA into the cluster: 64 KB a slice, or a quarter of a small DM (a power of two)
        "WRITTEN": str(min(65536, 1 << (shape.dm_usable_per_slice // 4).bit_length() - 1)),
    }  # fmt: skip


def rows_within(shape: Chip, rows: int, share: float, row_bytes: int = 4096) -> int:
    """At most `rows` rows of `row_bytes`, and no more than fill `share` of a slice's usable DM (a chip
    with a small DM gets shorter streams, not a probe the compiler refuses, E0301)."""
    return max(1, min(rows, int(shape.dm_usable_per_slice * share) // row_bytes))


def _template(name: str, shape: Chip) -> str:
    return Template((HERE / name).read_text()).safe_substitute(knobs(shape))


def _mb02_points(shape: Chip) -> tuple[dict[str, str], ...]:
    points = []
    for size in (256, 4096, 65536, min(1 << 20, 4096 * shape.slices)):  # a 4 KB packet per slice at most
        packets = max(1, size // 4096)
        points.append({"BYTES": str(size), "PACKETS": str(packets), "PACKET_BYTES": str(size // packets)})
    return tuple(points)


def _mb04_points(shape: Chip) -> tuple[dict[str, str], ...]:
    # every point moves the same bytes (the fit reads the engine off the packet count alone): 4 MiB where
    # half of DM holds it, else whole 4 KB rows of what half of DM holds (rows of each point's size
    # clipped one by one moved different amounts on a 64 KB DM under 0.7.0, and the fit refused them)
    per_slice = max(4096, min((4 << 20) // shape.slices, shape.dm_usable_per_slice // 2) // 4096 * 4096)
    points = []
    for packet in (256, 512, 1024, 2048, 4096):
        row = max(packet, 1024)  # a packet never spans two rows of the destination
        points.append({"PACKET": str(packet), "ROW_BYTES": str(row), "ROWS": str(per_slice // row)})
    return tuple(points)


# MB06's engine sets: one engine, two, a whole cluster's; then one, two and all of every cluster's
ENGINE_SETS = ("one", "two", "cluster", "one-each", "two-each", "all")


def _mb06_points(shape: Chip) -> tuple[dict[str, str], ...]:
    every = range(shape.clusters)
    sets = {"one": shape.local(0, 1), "two": shape.local(0, 2), "cluster": shape.local(0),
            "one-each": [e for c in every for e in shape.local(c, 1)],
            "two-each": [e for c in every for e in shape.local(c, 2)], "all": list(range(shape.engines))}  # fmt: skip
    points, seen = [], set()
    for name in ENGINE_SETS:
        engines = sets[name]
        if tuple(engines) in seen:  # one engine or one cluster: some sets are the same
            continue
        seen.add(tuple(engines))
        clusters = len({e // shape.engines_per_cluster for e in engines})
        sink = next((e for e in range(shape.engines - 1, -1, -1) if e not in engines), shape.engines - 1)
        rows = rows_within(shape, max(1, (16 << 20) // (clusters * shape.slices * 4096)), 1 / 2)
        points.append({"SET": name, "ENGINES": str(engines), "USED_CLUSTERS": str(clusters),
                       "ROWS": str(rows), "SINK_ENGINE": str(sink),
                       "SINK_CLUSTER": str(sink // shape.engines_per_cluster)})  # fmt: skip
    return tuple(points)


def microbenchmarks(shape: Chip = DOCUMENTED_CHIP) -> list[ProbeTemplate]:
    """The probes written for a chip of `shape` (the documented one by default; MB00 finds the
    true one, and every other probe is written for what it found)."""
    return sorted(_catalogue(shape), key=lambda probe: probe.id)


def _catalogue(shape: Chip) -> list[ProbeTemplate]:
    dmn = knobs(shape)["DMN"]
    rows_16 = str(rows_within(shape, 16, 1 / 2))  # MB05's stream: 16 rows of 4 KB a slice where DM holds them
    # MB08: the rows and their copy on one slice, rows of 1 KB a slice where DM holds fewer than four of 4 KB
    copy_row = 4096 if rows_within(shape, 16, 1 / 3) >= 4 else 1024
    copied = str(rows_within(shape, 16, 1 / 3, copy_row))
    rows_8mib, busy = _mb15_sizes(shape)
    return [
        ProbeTemplate(
            id="MB00", name="chip shape probe", kernel="mb00", template=(HERE / "mb00_shape.fe").read_text(),
            measures="compile only: the cluster and slice counts a layout must have, the lanes a TRF operand may "
            "span, the DMA engines, and the largest TRF operand of a lane and VRF operand of a slice",
            knob="SLICES", points=(SHAPE_START,), repeats=1,
        ),
        ProbeTemplate(
            id="MB01", name="empty kernel and noise", kernel="mb01", template=_template("mb01_empty.fe", shape),
            measures="the fixed cost of a kernel launch plus one DMA command; repeated, the run-to-run noise, "
            "its outliers and its drift over time",
            knob="RUN", points=tuple({"RUN": str(i)} for i in range(1)), repeats=60,
        ),
        ProbeTemplate(
            id="MB02", name="DMA size sweep", kernel="mb02", template=_template("mb02_dma_size.fe", shape),
            measures="a DMA command's start-up (intercept) and one engine's streaming rate (slope), 4 KB packets",
            knob="BYTES", points=_mb02_points(shape), repeats=30,
        ),
        ProbeTemplate(
            id="MB03", name="back-to-back commands", kernel="mb03", template=_template("mb03_commands.fe", shape),
            measures="what a DMA command that is already queued pays to start once its engine frees up",
            knob="COMMANDS", points=tuple({"COMMANDS": str(k)} for k in (1, 4, 8, 16, 32)), repeats=30,
        ),
        ProbeTemplate(
            id="MB04", name="packet sweep", kernel="mb04", template=_template("mb04_packet.fe", shape),
            measures="one engine's raw bandwidth and its per-packet overhead (time per packet against packet size)",
            knob="PACKET", points=_mb04_points(shape), repeats=60,
        ),
        ProbeTemplate(
            id="MB05", name="DMA order and DMNs", kernel="mb05", template=_template("mb05_order.fe", shape),
            measures="the rate of a stream that stays in one DMN against one that alternates DMNs",
            knob="ORDER", points=({"ORDER": "[S, A]", "ROWS": rows_16}, {"ORDER": f"[A, S % {dmn}, S / {dmn}]",
                                  "ROWS": rows_16}), repeats=30,
        ),
        ProbeTemplate(
            id="MB06", name="engines and clusters", kernel="mb06", template=_template("mb06_engines.fe", shape),
            measures="where adding engines stops helping: the per-cluster ingress and the chip's total",
            knob="ENGINES", points=_mb06_points(shape), repeats=30,
        ),
        ProbeTemplate(
            id="MB07", name="HBM alignment and stores", kernel="mb07", template=_template("mb07_alignment.fe", shape),
            measures="the read rate against the offset of each packet in HBM, and the time of stores whose rows "
            "do or do not fill whole HBM transaction units",
            knob="OFFSET", points=_mb07_points(), repeats=30,
        ),
        ProbeTemplate(
            id="MB08", name="DM to DM", kernel="mb08", template=_template("mb08_dm_to_dm.fe", shape),
            measures="the rate of a DM -> DM copy by one engine, within a cluster and across clusters",
            knob="TO_CLUSTER",
            points=tuple({"TO_CLUSTER": str(c), "COPY_ROWS": r, "ROWS": copied, "ROW_BYTES": str(copy_row)}
                         for r in (copied, "1")
                         for c in range(min(2, shape.clusters))),
            repeats=120,
        ),
        ProbeTemplate(
            id="MB10", name="pass anatomy", kernel="mb10", template=_template("mb10_pass.fe", shape),
            measures="a Tensor-Unit pass's fixed cost and read size on main and sub, and the hand-off between "
            "passes on different queues",
            knob="FLITS",
            points=_mb10_points(shape),
            repeats=300,
        ),
        ProbeTemplate(
            id="MB09", name="decode throughput", kernel="mb09", template=_template("mb09_decode.fe", shape),
            measures="how many input bytes per cycle and slice the fetch adapter's table lookup decodes "
            "(f8 -> bf16, and f4 -> f8 with two codes per byte)",
            knob="BYTES", points=_mb09_points(), repeats=60,
        ),
        ProbeTemplate(
            id="MB11", name="vector engine", kernel="mb11", template=_template("mb11_vector.fe", shape),
            measures="cycles per flit of a vector chain: plain arithmetic against transcendental functions",
            knob="CHAIN", points=tuple({"CHAIN": chain} for chain in _mb11_chains()), repeats=15,
        ),
        ProbeTemplate(
            id="MB12", name="switch", kernel="mb12", template=_template("mb12_switch.fe", shape),
            measures="the cost of a broadcast over the switch ring against ring size and flits",
            knob="RING", points=tuple({"RING": str(r), "FLITS": str(f), "ELEMENTS": str(8 * f)}
                                      for r in (2, 8, 32, 128, 256) if r <= shape.slices for f in (1, 16, 64, 256)),
            repeats=30,
        ),
        ProbeTemplate(
            id="MB13", name="inter-slice reducer", kernel="mb13", template=_template("mb13_reducer.fe", shape),
            measures="the cost of reduce_slices against group size and flits",
            knob="GROUP", points=tuple({"GROUP": str(g), "FLITS": str(f), "ELEMENTS": str(8 * f),
                                        "REPS": str(REDUCER_REPS)}
                                       for g in (2, 4, 16, 64, 128, 256) if g <= shape.slices
                                       for f in flits_within(shape, (1, 8, 64, 256, 512))),
            repeats=30,
        ),
        ProbeTemplate(
            id="MB14", name="DM capacity probe", kernel="mb14", template=_template("mb14_capacity.fe", shape),
            measures="compile only: the largest per-slice buffer the compiler accepts (bisect on BYTES)",
            knob="BYTES", points=tuple({"BYTES": str(b)} for b in (256 * 1024, 384 * 1024, 448 * 1024)), repeats=1,
        ),
        ProbeTemplate(
            id="MB15", name="overlap interference", kernel="mb15", template=_template("mb15_interference.fe", shape),
            measures="how much a Tensor-Unit pass running in a cluster slows DMA into that cluster",
            knob="N",
            # 8 MiB into every cluster (8 rows of 4 KB per slice on the documented chip): longer than the passes
            points=({"N": "8", "WORK": "add(0.0)", "PASSES": "without", "ROWS": rows_8mib, "BYTES": "4096"},
                    {"N": busy, "WORK": "exp(), exp()", "PASSES": "with", "ROWS": rows_8mib, "BYTES": "4096"},
                    {"N": busy, "WORK": "exp(), exp()", "PASSES": "only", "ROWS": "1", "BYTES": "8"}),
            repeats=120,
        ),
        ProbeTemplate(
            id="MB17", name="dependent commands", kernel="mb17", template=_template("mb17_dependent.fe", shape),
            measures="a DMA command's start-up on an idle engine: chains of small copies, each waiting for the one "
            "before, on two engines in turn",
            knob="PAIRS", points=tuple({"PAIRS": str(k)} for k in (1, 2, 4, 8, 16)), repeats=30,
        ),
        ProbeTemplate(
            id="MB16", name="bank-run probe", kernel="mb16", template=_template("mb16_bank_run.fe", shape),
            measures="what happens when a pass keeps reading one DM bank while DMA writes its cluster: "
            "diagnostics, slowdown or faults, against the length of the run",
            knob="RUN", points=tuple({"RUN": str(span // 128), "SPAN": str(span)} for span in (4096, 8192, 16384)),
        ),
    ]  # fmt: skip


def _mb15_sizes(shape: Chip) -> tuple[str, str]:
    """MB15's stream rows (8 MiB into every cluster) and its pass's f32 elements (20,480), both cut by one
    factor where they would fill more than half a slice's DM: the pass stays somewhat shorter than the DMA."""
    rows, elements = max(1, (8 << 20) // (4096 * shape.slices)), 20480
    cut = min(1.0, shape.dm_usable_per_slice / 2 / (rows * 4096 + elements * 4))
    return str(max(1, int(rows * cut))), str(max(8, int(elements * cut) // 8 * 8))


# MB13 runs this many reductions a point: a reduction of a few flits stays visible above a slow launch
REDUCER_REPS = 16

# MB10's flit sweep runs this many pairs a point: passes of a few hundred flits stay visible above a
# slow launch (a pass running beside the launch's DMA command is hidden by it)
FLIT_SWEEP_PAIRS = 4


def flits_within(shape: Chip, flits: tuple[int, ...]) -> tuple[int, ...]:
    """The flit counts whose two 32-byte-a-flit buffers (MB10's and MB13's input and result) fill at most half
    a slice's DM (a chip of 16 KB a slice drew E0301 at 512)."""
    return tuple(f for f in flits if 64 * f <= shape.dm_usable_per_slice // 2) or flits[:1]


def _mb10_points(shape: Chip) -> tuple[dict[str, str], ...]:
    contexts = (("main", "main"), ("sub", "main"))
    flits = tuple({"SWEEP": "flits", "CONTEXT": c, "NEXT": n, "FLITS": str(f), "ELEMENTS": str(16 * f),
                   "PAIRS": str(FLIT_SWEEP_PAIRS)}
                  for c, n in contexts for f in flits_within(shape, (1, 8, 64, 128, 256, 512)))  # fmt: skip
    pairs = tuple({"SWEEP": "pairs", "CONTEXT": c, "NEXT": n, "FLITS": "1", "ELEMENTS": "16", "PAIRS": str(k)}
                  for c, n in contexts for k in (4, 8, 16, 32, 64, 128))  # fmt: skip
    return flits + pairs


def _mb07_points() -> tuple[dict[str, str], ...]:
    reads = tuple({"OFFSET": str(o), "ROWS": "16", "STORE": "256", "STORES": "1"} for o in (0, 8, 64, 192))
    stores = tuple({"OFFSET": "0", "ROWS": "1", "STORE": str(w), "STORES": "16"} for w in (256, 240))
    return reads + stores


def _mb09_points() -> tuple[dict[str, str], ...]:
    points = []
    for source, target, decode, per_byte in (("f8e4m3", "bf16", "decode", 1), ("f4e2m1", "f8e4m3", "decode", 2)):
        for size in (1024, 4096, 8192):
            points.append({"FROM": source, "TO": target, "DECODE": decode, "BYTES": str(size),
                           "ELEMENTS": str(size * per_byte), "PACKET": str(32 * per_byte)})  # fmt: skip
    return tuple(points)


def _mb11_chains() -> tuple[str, ...]:
    adds = tuple(", ".join(["add(1.0)"] * k) for k in (1, 2, 4, 6))
    exps = tuple(", ".join(["exp()"] * k) for k in (1, 2, 4, 6))
    return adds + exps
