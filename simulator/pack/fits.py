"""SimRNGD's microbenchmark fits: how each probe's sweep (simulator/bench) becomes parameters.

Each model sees the sweep's points and each point's median cycles, as an agent does, plus the
values earlier fits found (`given`, by local name); each search finds an exact limit by compiling
(or running) programs. The generic learner (chiplore.ingest.measure) runs the sweeps, the bootstrap and the
recording; this module is the chip-specific part: which cycles isolate which parameter.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np

from chiplore.core.probes import Bench, ProbeFit, largest_accepted
from chiplore.core.target import DeviceJob, ProbeTemplate
from chiplore.simulator.bench import SHAPE_START
from chiplore.simulator.pack import params as P
from chiplore.simulator.toolchain.lower_dma import packet_units

MIB = 1 << 20


def _above(
    points: list[dict[str, str]],
    medians: np.ndarray,
    given: dict[str, float],
    keep: Callable[[dict[str, str]], bool] = lambda p: True,
) -> tuple[list[dict[str, str]], np.ndarray]:
    """The points whose time rises clearly above the kernel's floor (launch and one DMA command,
    which run beside a short pass and hide it)."""
    floor = 1.15 * given["empty_kernel_cycles"]
    chosen = [i for i, p in enumerate(points) if medians[i] > floor and keep(p)]
    return [points[i] for i in chosen], medians[chosen]


def _power_of_two(value: float) -> float:
    return float(2 ** round(np.log2(max(value, 1e-9))))


def _least_squares(columns: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Coefficients of y ~ columns, weighted for noise proportional to the value."""
    design = np.column_stack(columns) / y[:, None]
    coefficients, *_ = np.linalg.lstsq(design, np.ones_like(y), rcond=None)
    return coefficients


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Intercept and slope, weighted for noise proportional to the value (relative errors)."""
    weights = 1.0 / np.maximum(y, 1.0)
    slope, intercept = np.polyfit(x, y, 1, w=weights)
    return float(intercept), float(slope)


def fit_empty_kernel(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    return {"empty_kernel_cycles": float(medians[0])}


def fit_dma_transfer(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    sizes = np.array([float(p["BYTES"]) for p in points])
    intercept, slope = _line(sizes, medians)
    return {"engine_rate_4k": 1.0 / slope, "dma_intercept": intercept}


def fit_queued_start(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # each extra one-packet command adds its 4 KB transfer and the start of a command that waited
    commands = np.array([float(p["COMMANDS"]) for p in points])
    _, slope = _line(commands, medians)
    return _costs("MB03", {"dma_chain_startup": slope - 4096 / given["engine_rate_4k"]}, points, "dma_chain_startup")


def fit_packet_size(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # cycles = c + bytes / bw + packets * overhead, packets = bytes / P (4 MiB at every point where
    # the slices divide it: ROWS rows of ROW_BYTES per slice)
    moved = {float(p["ROWS"]) * _slices(given) * float(p["ROW_BYTES"]) for p in points}
    if len(moved) != 1:
        raise ValueError(f"MB04: the points move different amounts ({sorted(moved)})")
    total = moved.pop()
    sizes = np.array([float(p["PACKET"]) for p in points])
    packets = total / sizes
    empty = given["empty_kernel_cycles"]

    def fitted(unit: float) -> tuple[float, float, float]:
        # a packet moves whole HBM units: on a chip of units above the smallest packet, the small packets
        # move more than their bytes (a 2 KB unit: a 256-B packet costs 2 KB), so the time is the units'
        # bytes at the engine's rate plus each packet's overhead; with no such unit, the line it always was
        units = packets * np.ceil(sizes / unit) * unit
        if not (units > total).any():
            intercept, slope = _line(packets, medians)
            bw, predicted = total / (intercept - empty), intercept + slope * packets
        else:
            per_byte, slope = _least_squares([units, packets], medians - empty)
            bw, predicted = 1.0 / per_byte, empty + per_byte * units + slope * packets
        if not bw > 0:
            return math.inf, math.nan, math.nan
        return float(np.sum((predicted / medians - 1.0) ** 2)), bw, slope

    # units up to the smallest packet cost what their bytes do: the fit tells the larger ones apart only
    candidates = [float(u) for u in (1 << k for k in range(5, 12)) if u >= sizes.min()]
    residual, bw, overhead = min((fitted(u) for u in candidates), key=lambda f: f[0])
    if not math.isfinite(residual):
        raise ValueError("MB04: no packet cost fits the times (the stream is no faster than the empty kernel)")
    return {"engine_bw": bw, "pkt_overhead": overhead}


def _slices(given: dict[str, float]) -> float:
    """The slices per cluster the probes were written for (MB00's, else the documented 256)."""
    return given.get("slices", 256.0)


def _clusters(given: dict[str, float]) -> float:
    """The clusters the probes were written for (MB00's, else the documented 2)."""
    return given.get("clusters", 2.0)


def _engines_per_cluster(given: dict[str, float]) -> float:
    """The DMA engines of a cluster (MB00's, else the documented 4)."""
    return given.get("engines_per_cluster", 4.0)


def _rate(nbytes: float, cycles: float, given: dict[str, float]) -> float:
    return nbytes / (cycles - given["empty_kernel_cycles"])


def fit_dmn_order(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    one_dmn = next(i for i, p in enumerate(points) if p["ORDER"] == "[S, A]")
    moved = float(points[one_dmn]["ROWS"]) * _slices(given) * 4096  # rows of 4 KB on every slice of a cluster
    return {"dmn_bw": _rate(moved, float(medians[one_dmn]), given)}


def fit_engine_count(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    def moved(p: dict[str, str]) -> float:  # 16 MiB where the slices divide it
        return float(p["USED_CLUSTERS"]) * float(p["ROWS"]) * _slices(given) * 4096

    def sink_after(p: dict[str, str]) -> float:  # where every engine streams, the sink's command queues behind one
        shared = int(p["SINK_ENGINE"]) in json.loads(p["ENGINES"])
        return given.get("dma_chain_startup", 0.0) + given.get("pkt_overhead", 0.0) if shared else 0.0

    rates = {p["SET"]: _rate(moved(p), float(m) - sink_after(p), given) for p, m in zip(points, medians, strict=True)}
    # The most any set of engines moves into one cluster is its port's limit, or all its engines' where they
    # cannot fill the port (slow engines, few of them); the most any set moves into the chip is its roof.
    # Two engines fill a port only where each moves more than half of it, so neither is read off two alone.
    one_cluster = max(rates[s] for s in ("one", "two", "cluster") if s in rates)
    return {"cluster_ingress": one_cluster, "roof": max(rates.values())}


def fit_dm_to_dm(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # The same kernel with a 4 MiB and a 256 KB copy: the load, the launch and the start-ups cancel,
    # and so does whatever the device's operating point does to them.
    by = {(p["TO_CLUSTER"], int(p["COPY_ROWS"])): float(m) for p, m in zip(points, medians, strict=True)}
    rows = sorted({r for _, r in by})
    if len(rows) < 2:
        raise ValueError(f"MB08: the long and the short copy are both {rows[0]} row(s): DM holds no longer copy")
    row_bytes = 64 * float(points[0].get("ROW_BYTES", 4096))  # a row: 64 slices' worth
    extra = (rows[-1] - rows[0]) * row_bytes  # bytes the long copy moves beyond the short one
    same = extra / (by["0", rows[-1]] - by["0", rows[0]])
    if ("1", rows[0]) not in by:  # a chip of one cluster: nothing crosses
        return {"dm2dm_rate": same}
    across = extra / (by["1", rows[-1]] - by["1", rows[0]])
    return {"dm2dm_rate": same, "xcluster_factor": across / same}


SCALE_SLACK = 0.08  # MB07: how far the bytes a read moves may be off by one common factor


MB07_ROW, MB07_READ = 1280, 960  # MB07's HBM rows, and the bytes each packet reads of one


def fit_hbm_alignment(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    start, bw, overhead = given["empty_kernel_cycles"], given["engine_bw"], given["pkt_overhead"]
    reads = {int(p["OFFSET"]): float(m) for p, m in zip(points, medians, strict=True) if p["STORES"] == "1"}
    rows = 16 * _slices(given)
    moved = {off: ((t - start) / rows - overhead) * bw for off, t in reads.items()}  # bytes per 960-B read

    offsets = sorted(moved)
    seen = np.array([moved[off] for off in offsets])

    def expected(unit: int) -> np.ndarray:
        # the bytes of the units a 960-B read at `off` into a 1,280-B row touches, over the rows: a unit
        # above 256 B does not divide the rows, so their reads start at every offset 1,280 takes modulo it
        first = np.arange(8)[:, None] * MB07_ROW + np.array(offsets)[None, :]  # 8 rows: every unit's period
        touched, _ = packet_units(first, first + MB07_READ, unit, extent=None)
        return touched.mean(axis=0) * unit

    def scale(unit: int) -> float:
        return float(seen @ expected(unit) / (expected(unit) @ expected(unit)))

    def mismatch(unit: int) -> float:
        # The pattern across offsets decides, not the absolute bytes: the device drifts a few per cent
        # between sessions and the given rates were measured in another, so a common scale is free
        # within what drift and those rates' error allow.
        return float(
            np.sum((seen / float(np.clip(scale(unit), 1 - SCALE_SLACK, 1 + SCALE_SLACK)) - expected(unit)) ** 2)
        )

    unit = min((1 << k for k in range(5, 12)), key=mismatch)  # transaction units are powers of two
    stores = {int(p["STORE"]): float(m) for p, m in zip(points, medians, strict=True) if p["STORES"] != "1"}
    count = 16 * int(_slices(given))

    def written(width: int) -> tuple[float, float]:  # (whole, partial) units `count` rows of `width` bytes write
        first = np.arange(count) * width
        touched, partial = packet_units(first, first + width, unit, extent=count * width)
        return float(touched.sum() - partial.sum()), float(partial.sum())

    (whole_256, partial_256), (whole_240, partial_240) = written(256), written(240)
    # the two stores differ in units only (same packets): the time between them is the units' cost at
    # the engine's rate, the partial ones at rmw times a whole one
    units_apart = (stores[240] - stores[256]) / (unit / bw)
    if partial_240 <= partial_256:  # (no unit of 32 B to 2 KB does this to MB07's rows: a guard)
        raise ValueError(f"MB07: the 240-B stores write no more partial {unit}-B units than the 256-B ones")
    rmw = (units_apart - (whole_240 - whole_256)) / (partial_240 - partial_256)
    return {"hbm_unit": float(unit), "rmw_factor": rmw}


def fit_decode(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    out = {}
    for source, name in (("f8e4m3", "lut_bpc"), ("f4e2m1", "lut_bpc_f4")):
        # the sizes whose pass outlasts the kernel's own DMA: a 1,500-cycle start-up hid the smallest and
        # flattened the line (a decode rate 34 % fast)
        chosen, times = _above(points, medians, given, lambda p, s=source: p["FROM"] == s)
        if len(chosen) < 2:
            raise ValueError(f"MB09: {len(chosen)} {source} size(s) rise above the launch and a DMA command: "
                             "too few to fit a decode rate")  # fmt: skip
        sizes = np.array([float(p["BYTES"]) for p in chosen])
        _, slope = _line(sizes, times)
        out[name] = 1.0 / slope  # input bytes decoded per cycle (one slice works)
    return out


def fit_pass_costs(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # One pair, F flits. main -> main: two main passes of F 32-byte flits. sub -> main: a sub pass
    # and a main pass.
    lines = {}
    for context in ("main", "sub"):
        chosen, times = _above(points, medians, given, lambda p, c=context: p["CONTEXT"] == c and p["SWEEP"] == "flits")
        if len(chosen) < 2:
            raise ValueError(f"MB10: {len(chosen)} point(s) of the {context} flit sweep rise above the launch")
        # per pair of passes: the sweep runs several pairs a point
        lines[context] = _line(np.array([float(p["FLITS"]) * float(p["PAIRS"]) for p in chosen]), times)
    per_main = lines["main"][1] / 2
    per_sub = lines["sub"][1] - per_main
    # A sequencer reads a power of two bytes per cycle: the nearest one is the read size.
    read_main, read_sub = _power_of_two(32 / per_main), _power_of_two(32 / per_sub)
    # Chains of one-flit pairs: a sub -> main pair costs what a main -> main pair costs, plus the
    # sub pass's slower flit, plus two hand-offs.
    pair_cost, pair_start = {}, {}
    for context in ("main", "sub"):
        chosen, times = _above(points, medians, given, lambda p, c=context: p["CONTEXT"] == c and p["SWEEP"] == "pairs")
        if len(chosen) < 2:
            raise ValueError(f"MB10: {len(chosen)} point(s) of the {context} pair sweep rise above the launch")
        pair_start[context], pair_cost[context] = _line(np.array([float(p["PAIRS"]) for p in chosen]), times)
    slower_flit = 32 / read_sub - 32 / read_main
    # The launch: a chain of main -> main pairs is the launch and then nothing but passes, so the
    # chain's line meets zero pairs at the launch. Half a pair, less its one flit, is what a pass
    # costs whatever it carries (its fixed cost and its stages' latencies).
    launch = pair_start["main"]
    fixed_pass = pair_cost["main"] / 2 - 32 / read_main
    return {"fetch_read_main": read_main, "fetch_read_sub": read_sub,
            "sync_cycles": (pair_cost["sub"] - pair_cost["main"] - slower_flit) / 2,
            "launch_cycles": launch, "pass_fixed_cycles": fixed_pass}  # fmt: skip


def fit_idle_start(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    """A DMA command's start-up on an idle engine, from a chain of dependent 8-byte copies on two engines
    in turn: each pair adds two start-ups and two one-packet transfers, and no launch. (The empty kernel
    less the launch said the same where the launch is small, but a launch of thousands of cycles, itself
    an extrapolated intercept, left the start-up 12 % off.)"""
    if _clusters(given) * _engines_per_cluster(given) < 2:
        # one engine: a command waiting for the last one's copy always chains behind it on that engine
        found = {"dma_start_cycles": given["empty_kernel_cycles"] - given["launch_cycles"]}
    else:
        _, slope = _line(np.array([float(p["PAIRS"]) for p in points]), medians)
        # a packet's overhead and 8 bytes are a few cycles beside hundreds: where MB04 could not run (0.5.0
        # has no `order =`), the start-up is taken with them, under 1 % high
        packet = given.get("pkt_overhead", 0.0) + (8 / given["engine_bw"] if given.get("engine_bw") else 0.0)
        found = {"dma_start_cycles": slope / 2 - packet}
    return _costs("MB17", found, points, "dma_start_cycles")


def fit_vector_ops(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    ops = np.array([float(p["CHAIN"].count("exp")) for p in points])
    chosen = ops > 0
    _, slope = _line(ops[chosen], medians[chosen])
    return {"ve_trans_cycles": float(round(slope / 512))}  # 4096 f32 in flits of 8; whole cycles per flit


def fit_switch(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    chosen, times = _above(points, medians, given)
    ring = np.array([float(p["RING"]) for p in chosen])
    flits = np.array([float(p["FLITS"]) for p in chosen])
    _, _, per_ring_flit, per_ring = _least_squares([np.ones_like(ring), flits, ring * flits, ring], times)
    if per_ring < 0:  # a latency below zero is none: the fit without it (-1.37 and -0.24 were recorded)
        _, _, per_ring_flit = _least_squares([np.ones_like(ring), flits, ring * flits], times)
        per_ring = 0.0
    found = {"switch_per_ring_flit": float(per_ring_flit), "switch_per_ring": float(per_ring)}
    return _costs("MB12", found, chosen, "switch_per_ring_flit")


def fit_reducer(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    chosen, times = _above(points, medians, given)
    group = np.array([float(p["GROUP"]) for p in chosen])
    flits = np.array([float(p["FLITS"]) for p in chosen])
    reps = np.array([float(p.get("REPS", 1)) for p in chosen])  # reductions in a row at each point
    _, _, per_slice, per_flit_group = _least_squares(
        [np.ones_like(group), reps * flits, reps * group, reps * flits * group / 64], times
    )
    found = {"reducer_per_slice": float(per_slice), "reducer_throughput": float(per_flit_group)}
    return _costs("MB13", found, chosen, "reducer_throughput")


def _costs(probe: str, found: dict[str, float], chosen: list[dict[str, str]], main: str) -> dict[str, float]:
    """Fitted costs, or ValueError where the main one is not above zero: too few points rose above a slow
    launch (or above a noisy one) to tell the terms apart (the small secondary terms may come out a little
    below zero). A cost below zero recorded as a fact would price every design that pays it wrongly."""
    if found[main] <= 0:
        raise ValueError(f"{probe}: {len(chosen)} points rise above the launch, and the fit gives {main} "
                         f"{found[main]:.3g}, no cost")  # fmt: skip
    return found


PORT_BOUND = 0.85  # MB15: the share of a port its DMA's other limits must reach (the default chip's: 0.96 to 1.03)


def fit_interference(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    by = {p["PASSES"]: float(m) for p, m in zip(points, medians, strict=True)}
    running = by["only"] - given["empty_kernel_cycles"]  # how long the passes run
    port, roof = given.get("cluster_ingress"), given.get("roof")
    if port and roof and "engine_bw" in given:
        # the factor slows a cluster's port: only a DMA the port bounds shows it (engines of 1 B/cycle read
        # 0.30, HBM under the ports 0.86, for 0.985)
        supply = min(_engines_per_cluster(given) * given["engine_bw"], roof / _clusters(given))
        if supply < PORT_BOUND * port:
            raise ValueError(f"MB15: a cluster's engines and its share of the roof move {supply:,.1f} B/cycle, "
                             f"under its port's {port:,.1f}: what a pass costs the port is not observable "
                             "on this chip")  # fmt: skip
    if by["without"] <= by["only"]:
        # the DMA must outlast the passes: on a chip whose ports fill 8 MiB sooner than the passes run, the
        # kernel ended with the passes and the factor read 0.42 for 0.985
        raise ValueError(f"MB15: the DMA alone ({by['without']:,.0f} cycles) ends before the passes alone "
                         f"({by['only']:,.0f}): what a pass costs the DMA is not observable with this "
                         "sweep")  # fmt: skip
    factor = 1 - (by["with"] - by["without"]) / running
    if factor <= 0:  # the DMA waited out the passes (engines of 1 B/cycle read -0.01): no port slowdown does that
        raise ValueError(f"MB15: the DMA lost {1 - factor:.2f} of the passes' time beside them: no slower port "
                         "explains it, so the factor is not observable on this chip")  # fmt: skip
    # at most 1: a DMA the pass does not slow reads 1 within the noise (1.02 was recorded, above its range)
    return {"interference": min(1.0, factor)}


def _compile_limit(probe: ProbeTemplate, version: str, point: Callable[[int], dict[str, str]], low: int, high: int,
                   refused: Callable[[str], bool]) -> int:  # fmt: skip
    """The largest value in [low, high) whose program the compiler (or the device) accepts."""
    return largest_accepted(low, high, lambda value: refused(probe.instantiate(point(value), version)))


def search_vector_chain(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    check = bench.check
    chain = lambda k: {"CHAIN": ", ".join(["add(1.0)"] * k)}  # noqa: E731
    longest = _compile_limit(probe, version, chain, 1, 33, lambda source: not check(source, version).ok)
    return {"ve_max_chain": float(longest)}


def search_dm_capacity(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    check = bench.check
    refused = lambda words: not check(probe.instantiate({"BYTES": str(8 * words)}, version), version).ok  # noqa: E731
    # 1 MiB first, then doubled until refused: a DM of 2 MiB a slice came out 1 MiB when the search stopped there
    high = 1 << 17
    while high < DM_WORDS_MAX and not refused(high):
        high *= 2
    return {"dm_usable_per_slice": float(8 * largest_accepted(1, high, refused))}


DM_WORDS_MAX = 1 << 37  # 8-byte words: a slice's DM is at most 1 TiB, the largest size a chip file may state

SHAPE_CLUSTERS = range(1, 9)
SHAPE_SLICES = tuple(1 << k for k in range(4, 12))  # 16 .. 2048
SHAPE_LANES = tuple(1 << k for k in range(7))  # 1 .. 64
SHAPE_ENGINES = 256  # engine numbers searched: 0 .. 255
OPERAND_BYTES = 1 << 20  # the largest TRF lane or VRF operand searched for, in bytes (a chip's largest)


def search_shape(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    """The chip's shape, by compiling MB00 (no device time): the one cluster and slice count that
    every layout must have, the most lanes a TRF operand may span, the highest engine number
    (engines are numbered cluster by cluster, so each cluster has engines / clusters), and the
    largest TRF operand of one lane and VRF operand of one slice."""
    start = dict(SHAPE_START)

    def accepted(**knobs: int) -> bool:
        point = start | {name.upper(): str(value) for name, value in knobs.items()}
        return bench.check(probe.instantiate(point, version), version).ok

    grid = [(c, s) for c in SHAPE_CLUSTERS for s in SHAPE_SLICES if accepted(clusters=c, slices=s)]
    if len(grid) != 1:
        found = ", ".join(f"{c} x {s}" for c, s in grid) or "none"
        raise ValueError(f"MB00: expected one cluster x slice count to compile, found {found}")
    clusters, slices = grid[0]
    start |= {"CLUSTERS": str(clusters), "SLICES": str(slices)}
    lanes = max(n for n in SHAPE_LANES if accepted(lanes=n))
    engines = largest_accepted(0, SHAPE_ENGINES, lambda e: not accepted(engine=e)) + 1
    trf_words = largest_accepted(1, OPERAND_BYTES // 8 + 1, lambda k: not accepted(trf=4 * k))  # 4 bf16 per word
    vrf_words = largest_accepted(1, OPERAND_BYTES // 8 + 1, lambda k: not accepted(vrf=2 * k))  # 2 f32 per word
    return {"clusters": float(clusters), "slices": float(slices), "lanes": float(lanes),
            "engines_per_cluster": float(engines // clusters), "trf_lane_bytes": float(8 * trf_words),
            "vrf_bytes": float(8 * vrf_words)}  # fmt: skip


def search_bank_run(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    """The shortest same-bank run the toolchain or the device objects to: a note or an error from
    0.6.0 on, a NOC_TIMEOUT fault on 0.5.0 (a job per step of the search)."""

    def objected(source: str) -> bool:
        if any(d.code.endswith("0520") for d in bench.check(source, version).diagnostics):
            return True
        job = DeviceJob(kernel=probe.kernel, program=source, toolchain=version, fixtures="smoke", agent="harness")
        return any(f.code == "NOC_TIMEOUT" for f in bench.run(job).faults)

    run = lambda r: {"RUN": str(r), "SPAN": str(128 * r)}  # noqa: E731
    # Runs whose buffer the slice's DM cannot hold (E0301 on a small DM) say nothing of the banks: the
    # search stays below them, and where nothing objects there, the limit is past the longest run DM holds.
    held = _compile_limit(probe, version, run, 1, 513, lambda source: _refused_but_for_banks(bench, source, version))
    return {"bank_run_limit": float(_compile_limit(probe, version, run, 1, held + 1, objected) + 1)}


def _refused_but_for_banks(bench: Bench, source: str, version: str) -> bool:
    return any(d.is_error and not d.code.endswith("0520") for d in bench.check(source, version).diagnostics)


FITS: tuple[ProbeFit, ...] = (
    # The shape first: it is what every other probe's program must be written for.
    ProbeFit("MB00", "MB00", ("clusters", "slices", "lanes", "engines_per_cluster", "trf_lane_bytes", "vrf_bytes"),
             {"clusters": P.CLUSTERS, "slices": P.SLICES, "lanes": P.LANES,
              "engines_per_cluster": P.ENGINES_PER_CLUSTER, "trf_lane_bytes": P.TRF_LANE, "vrf_bytes": P.VRF_SLICE},
             search=search_shape),
    # Then the DM a slice may use (compile only): the probes' buffers are sized within it.
    ProbeFit("MB14", "MB14", ("dm_usable_per_slice",), {"dm_usable_per_slice": P.DM_USABLE}, search=search_dm_capacity),
    ProbeFit("MB01", "MB01", ("empty_kernel_cycles",), {"empty_kernel_cycles": P.EMPTY_KERNEL}, fit_empty_kernel),
    ProbeFit("MB02", "MB02", ("engine_rate_4k", "dma_intercept"), {"engine_rate_4k": P.ENGINE_RATE_4K},
             fit_dma_transfer),
    ProbeFit("MB03", "MB03", ("dma_chain_startup",), {"dma_chain_startup": P.DMA_QUEUED_START}, fit_queued_start),
    ProbeFit("MB04", "MB04", ("engine_bw", "pkt_overhead"), {"engine_bw": P.ENGINE_BW,
             "pkt_overhead": P.PACKET_OVERHEAD}, fit_packet_size),
    ProbeFit("MB05", "MB05", ("dmn_bw",), {"dmn_bw": P.DMN_BW}, fit_dmn_order),
    ProbeFit("MB06", "MB06", ("cluster_ingress", "roof"), {"cluster_ingress": P.CLUSTER_PORT, "roof": P.CHIP_ROOF},
             fit_engine_count),
    ProbeFit("MB07", "MB07", ("hbm_unit", "rmw_factor"), {"hbm_unit": P.HBM_UNIT, "rmw_factor": P.PARTIAL_STORE},
             fit_hbm_alignment),
    ProbeFit("MB08", "MB08", ("dm2dm_rate", "xcluster_factor"), {"dm2dm_rate": P.DM_TO_DM,
             "xcluster_factor": P.CROSS_CLUSTER}, fit_dm_to_dm),
    ProbeFit("MB09", "MB09", ("lut_bpc", "lut_bpc_f4"), {"lut_bpc": P.DECODE_RATE, "lut_bpc_f4": P.DECODE_F4_RATE},
             fit_decode),
    ProbeFit(
        "MB10", "MB10",
        ("fetch_read_main", "fetch_read_sub", "sync_cycles", "launch_cycles", "pass_fixed_cycles"),
        {"fetch_read_main": P.FETCH_MAIN, "fetch_read_sub": P.FETCH_SUB, "sync_cycles": P.HANDOFF,
         "launch_cycles": P.LAUNCH, "pass_fixed_cycles": P.PASS_FIXED},
        fit_pass_costs,
        # the launch and a pass's fixed cost come from intercepts: fitted, but not pinned to 2 %
        secondary=("launch_cycles", "pass_fixed_cycles"),
    ),
    ProbeFit("MB17", "MB17", ("dma_start_cycles",), {"dma_start_cycles": P.DMA_START}, fit_idle_start),
    ProbeFit("MB11", "MB11", ("ve_trans_cycles",), {"ve_trans_cycles": P.TRANSCENDENTAL}, fit_vector_ops),
    ProbeFit("MB11/chain", "MB11", ("ve_max_chain",), {"ve_max_chain": P.MAX_CHAIN}, search=search_vector_chain),
    # the ring term (MB12) and the 2r term (MB13) are a few hundred cycles beside thousands
    ProbeFit("MB12", "MB12", ("switch_per_ring_flit", "switch_per_ring"), {"switch_per_ring_flit": P.SWITCH_RING_FLIT,
             "switch_per_ring": P.SWITCH_RING}, fit_switch, secondary=("switch_per_ring",)),
    ProbeFit("MB13", "MB13", ("reducer_per_slice", "reducer_throughput"), {"reducer_per_slice": P.REDUCER_SLICE,
             "reducer_throughput": P.REDUCER_THROUGHPUT}, fit_reducer, secondary=("reducer_per_slice",)),
    ProbeFit("MB15", "MB15", ("interference",), {"interference": P.INTERFERENCE}, fit_interference),
    ProbeFit("MB16", "MB16", ("bank_run_limit",), {"bank_run_limit": P.BANK_RUN}, search=search_bank_run),
)  # fmt: skip
