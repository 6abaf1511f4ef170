"""Microbenchmark fits: run a probe's sweep on the device through the Target interface, and fit
the parameters it is meant to reveal, with bootstrap intervals.

A fit sees cycles and the probe's points, as an agent does, and nothing else. The simulator's tests
run these fits on its noisy device to check that every probe reveals its parameter at its stated
repeats (SIMULATOR.md 7: within about 2 %); `chiplore learn` runs them, leaner, to learn the chip.

Sweeps run every point once per round and spread the rounds evenly over one drift period of device
time, so the slow drift averages out instead of biasing one point. Medians per point make
the fits robust to the occasional slow run. Later fits take earlier results as givens (the
launch-plus-start-up of MB01 is the intercept every DMA probe subtracts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from chiplore.core.target import DeviceJob, DeviceResult, ProbeTemplate, Target

Samples = list[np.ndarray]  # per point: the timed runs' cycles
Jobs = list[list[np.ndarray]]  # per point, per job: the runs one job took (one moment of the drift)
SPREAD_S = 1800.0  # one drift period of device time per sweep
MIB = 1 << 20


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float
    low: float  # 95 % bootstrap interval
    high: float


ROUNDS = 6  # slots over one drift period; a round's job runs its share of the repeats


class Bench:
    """The device as a sweep uses it: jobs through the Target, an optional way to let device time
    pass between rounds (a harness warps its simulated clock; an agent just keeps working), and a
    hook that sees every result (to record it, or to stop when the budget is spent)."""

    def __init__(self, target: Target, wait: Callable[[float], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 on_result: Callable[[DeviceJob, DeviceResult], None] | None = None) -> None:  # fmt: skip
        self.target, self.wait, self.clock, self.on_result = target, wait, clock, on_result

    def run(self, job: DeviceJob) -> DeviceResult:
        result = self.target.result(self.target.submit(job))
        if self.on_result is not None:
            self.on_result(job, result)
        return result


def sweep(bench: Bench, probe: ProbeTemplate, version: str, repeats: int | None = None, rounds: int = ROUNDS,
          ) -> Jobs:  # fmt: skip
    """Each point's cycles, `repeats` runs of it (default: the probe's stated repeats), taken in up
    to `rounds` jobs per point so the fixed cost of a job is paid a few times, not once per run."""
    wanted = repeats if repeats is not None else probe.repeats
    rounds = max(1, min(wanted, rounds))
    sources = [probe.instantiate(point, version) for point in probe.points]
    jobs: Jobs = [[] for _ in sources]
    start = bench.clock() if bench.clock is not None else 0.0
    for round_no in range(rounds):
        # Round k starts k / rounds of a drift period after the first: the rounds sample the slow
        # drift evenly over one period, so its mean over the sweep is the device's operating point.
        if bench.wait is not None and bench.clock is not None:
            bench.wait(max(0.0, start + round_no * SPREAD_S / rounds - bench.clock()))
        runs = wanted // rounds + (1 if round_no < wanted % rounds else 0)
        for offset in range(len(sources)):  # rotate the order so no point always runs first
            index = (offset + round_no) % len(sources)
            job = DeviceJob(kernel=probe.kernel, program=sources[index], toolchain=version, fixtures="smoke",
                            repeats=runs, agent="harness")  # fmt: skip
            jobs[index].append(np.asarray(_timed_runs(bench, job, f"{probe.id} point {index}"), dtype=np.float64))
    return jobs


def _timed_runs(bench: Bench, job: DeviceJob, what: str, attempts: int = 4) -> list[float]:
    """A job's timed runs; a job that faults at random (a hang, a transient) is simply run again."""
    result = None
    for _ in range(attempts):
        result = bench.run(job)
        if result.status == "ok":
            return [run.cycles for run in result.runs if not run.warmup]
        if result.status not in ("fault", "timeout", "transient"):  # a program or budget problem: retrying cannot help
            break
    assert result is not None
    raise RuntimeError(f"{what}: {result.status}: {result.message}")


Model = Callable[[list[dict[str, str]], np.ndarray, dict[str, float]], dict[str, float]]
Search = Callable[[ProbeTemplate, str, Bench], dict[str, float]]


@dataclass(frozen=True)
class Fit:
    """How one probe's medians turn into parameters (given earlier probes' results), or, for the
    probes that find a limit, the search that finds it (exact: no interval)."""

    probe: str
    params: tuple[str, ...]
    model: Model | None = None
    search: Search | None = None
    # Also fitted, but not pinned to 2 % at the stated repeats: MB12's ring term and MB13's 2r term
    # are a few hundred cycles beside thousands; the launch and the start-up come from intercepts.
    secondary: tuple[str, ...] = ()


def fit(fit_spec: Fit, probe: ProbeTemplate, jobs: Jobs, given: dict[str, float],
        draws: int = 400, seed: int = 0) -> dict[str, Estimate]:  # fmt: skip
    """The parameters from the per-point medians, and intervals from resampling each point's runs."""
    assert fit_spec.model is not None, f"{fit_spec.probe} is a search, not a fit"
    points = [dict(p) for p in probe.points]
    samples: Samples = [np.concatenate(point) for point in jobs]
    central = fit_spec.model(points, np.array([np.median(s) for s in samples]), given)
    rng = np.random.default_rng(seed)
    boot: dict[str, list[float]] = {name: [] for name in central}
    for _ in range(draws):
        medians = np.array([np.median(rng.choice(s, size=len(s))) for s in samples])
        for name, value in fit_spec.model(points, medians, given).items():
            boot[name].append(value)
    found = {
        name: Estimate(
            value=value, low=float(np.percentile(boot[name], 2.5)), high=float(np.percentile(boot[name], 97.5))
        )
        for name, value in central.items()
    }
    return found


def noise_sigma(jobs: Jobs, draws: int = 400, seed: int = 0) -> Estimate:
    """The run-to-run spread (sigma of log cycles) of runs around their job's median, pooled over
    jobs: within a job the slow drift has not moved. The rare slow runs are cut at three robust
    sigmas and the standard deviation of the rest, corrected for the cut, is the estimate (it needs
    a third of the runs a MAD would). Kernels too short for the 8-cycle counter to resolve the
    spread, and jobs too small to have a steady median, are left out."""
    rng = np.random.default_rng(seed)
    kept = [runs for point in jobs for runs in point if len(runs) >= 20 and np.median(runs) > 4000]
    if not kept:
        raise ValueError("no job long enough to measure the noise")
    residuals = np.concatenate([np.log(runs) - np.log(np.median(runs)) for runs in kept])

    def sigma(values: np.ndarray) -> float:
        robust = 1.4826 * np.median(np.abs(values - np.median(values)))
        inside = values[np.abs(values - np.median(values)) < 3 * robust]
        return float(np.std(inside) / 0.9866)  # a normal cut at 3 sigma keeps 98.66 % of its spread

    boot = [sigma(rng.choice(residuals, size=len(residuals))) for _ in range(draws)]
    return Estimate(value=sigma(residuals), low=float(np.percentile(boot, 2.5)), high=float(np.percentile(boot, 97.5)))


def run_fit(fit_spec: Fit, probe: ProbeTemplate, version: str, bench: Bench, given: dict[str, float],
            repeats: int | None = None, rounds: int = ROUNDS) -> dict[str, Estimate]:  # fmt: skip
    """Sweep and fit, or search: the probe's parameters (`repeats` overrides the probe's own)."""
    if fit_spec.search is not None:
        return {k: Estimate(value=v, low=v, high=v) for k, v in fit_spec.search(probe, version, bench).items()}
    return fit(fit_spec, probe, sweep(bench, probe, version, repeats, rounds), given)


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


def _mb01(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    return {"empty_kernel_cycles": float(medians[0])}


def _mb02(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    sizes = np.array([float(p["BYTES"]) for p in points])
    intercept, slope = _line(sizes, medians)
    return {"engine_rate_4k": 1.0 / slope, "dma_intercept": intercept}


def _mb03(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # each extra one-packet command adds its 4 KB transfer and the start of a command that waited
    commands = np.array([float(p["COMMANDS"]) for p in points])
    _, slope = _line(commands, medians)
    return {"dma_chain_startup": slope - 4096 / given["engine_rate_4k"]}


def _mb04(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # cycles = c + 4 MiB / bw + packets * overhead, packets = 4 MiB / P
    packets = np.array([4 * MIB / float(p["PACKET"]) for p in points])
    intercept, slope = _line(packets, medians)
    return {"engine_bw": 4 * MIB / (intercept - given["empty_kernel_cycles"]), "pkt_overhead": slope}


def _rate(nbytes: float, cycles: float, given: dict[str, float]) -> float:
    return nbytes / (cycles - given["empty_kernel_cycles"])


def _mb05(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    one_dmn = next(i for i, p in enumerate(points) if p["ORDER"] == "[S, A]")
    return {"dmn_bw": _rate(16 * MIB, float(medians[one_dmn]), given)}


def _mb06(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    rates = {p["ENGINES"]: _rate(16 * MIB, float(m), given) for p, m in zip(points, medians, strict=True)}
    one_cluster = [rates["[0, 1]"], rates["[0, 1, 2, 3]"]]  # two or four engines into one port: its limit
    return {"cluster_ingress": float(np.mean(one_cluster)), "roof": rates["[0, 1, 4, 5]"]}


def _mb08(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # The same kernel with a 4 MiB and a 256 KB copy: the load, the launch and the start-ups cancel,
    # and so does whatever the device's operating point does to them.
    by = {(p["TO_CLUSTER"], int(p["COPY_ROWS"])): float(m) for p, m in zip(points, medians, strict=True)}
    rows = sorted({r for _, r in by})
    extra = (rows[-1] - rows[0]) * 256 * 1024  # bytes the long copy moves beyond the short one
    same = extra / (by["0", rows[-1]] - by["0", rows[0]])
    across = extra / (by["1", rows[-1]] - by["1", rows[0]])
    return {"dm2dm_rate": same, "xcluster_factor": across / same}


def _mb07(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    start, bw, overhead = given["empty_kernel_cycles"], given["engine_bw"], given["pkt_overhead"]
    reads = {int(p["OFFSET"]): float(m) for p, m in zip(points, medians, strict=True) if p["STORES"] == "1"}
    rows = 16 * 256
    moved = {off: ((t - start) / rows - overhead) * bw for off, t in reads.items()}  # bytes per 960-B read

    def mismatch(unit: int) -> float:  # reads of 960 B at `off` move ceil((off + 960) / unit) units
        return sum((-(-(off + 960) // unit) * unit - b) ** 2 for off, b in moved.items())

    unit = min((1 << k for k in range(5, 12)), key=mismatch)  # transaction units are powers of two
    stores = {int(p["STORE"]): float(m) for p, m in zip(points, medians, strict=True) if p["STORES"] != "1"}
    count = 16 * 256
    touched = sum((r * 240 + 239) // unit - (r * 240) // unit + 1 for r in range(count))  # all partial
    unit_time = unit / bw
    rmw = ((stores[240] - stores[256]) / unit_time + count) / touched
    return {"hbm_unit": float(unit), "rmw_factor": rmw}


def _mb09(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    out = {}
    for source, name in (("f8e4m3", "lut_bpc"), ("f4e2m1", "lut_bpc_f4")):
        chosen = [i for i, p in enumerate(points) if p["FROM"] == source]
        sizes = np.array([float(points[i]["BYTES"]) for i in chosen])
        _, slope = _line(sizes, medians[chosen])
        out[name] = 1.0 / slope  # input bytes decoded per cycle (one slice works)
    return out


def _mb10(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # One pair, F flits. main -> main: two main passes of F 32-byte flits. sub -> main: a sub pass
    # and a main pass.
    lines = {}
    for context in ("main", "sub"):
        chosen, times = _above(points, medians, given, lambda p, c=context: p["CONTEXT"] == c and p["PAIRS"] == "1")
        lines[context] = _line(np.array([float(p["FLITS"]) for p in chosen]), times)
    per_main = lines["main"][1] / 2
    per_sub = lines["sub"][1] - per_main
    # A sequencer reads a power of two bytes per cycle: the nearest one is the read size.
    read_main, read_sub = _power_of_two(32 / per_main), _power_of_two(32 / per_sub)
    # Chains of one-flit pairs: a sub -> main pair costs what a main -> main pair costs, plus the
    # sub pass's slower flit, plus two hand-offs.
    pair_cost, pair_start = {}, {}
    for context in ("main", "sub"):
        chosen, times = _above(points, medians, given, lambda p, c=context: p["CONTEXT"] == c and p["PAIRS"] != "1")
        pair_start[context], pair_cost[context] = _line(np.array([float(p["PAIRS"]) for p in chosen]), times)
    slower_flit = 32 / read_sub - 32 / read_main
    # The launch: a chain of main -> main pairs is the launch and then nothing but passes, so the
    # chain's line meets zero pairs at the launch. Half a pair, less its one flit, is what a pass
    # costs whatever it carries (its fixed cost and its stages' latencies).
    launch = pair_start["main"]
    fixed_pass = pair_cost["main"] / 2 - 32 / read_main
    # The empty kernel is a launch and one 8-byte command: what is left is the command's start-up.
    start = given["empty_kernel_cycles"] - launch
    return {"fetch_read_main": read_main, "fetch_read_sub": read_sub,
            "sync_cycles": (pair_cost["sub"] - pair_cost["main"] - slower_flit) / 2,
            "launch_cycles": launch, "dma_start_cycles": start, "pass_fixed_cycles": fixed_pass}  # fmt: skip


def _mb11(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    ops = np.array([float(p["CHAIN"].count("exp")) for p in points])
    chosen = ops > 0
    _, slope = _line(ops[chosen], medians[chosen])
    return {"ve_trans_cycles": float(round(slope / 512))}  # 4096 f32 in flits of 8; whole cycles per flit


def _mb12(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    chosen, times = _above(points, medians, given)
    ring = np.array([float(p["RING"]) for p in chosen])
    flits = np.array([float(p["FLITS"]) for p in chosen])
    _, _, per_ring_flit, per_ring = _least_squares([np.ones_like(ring), flits, ring * flits, ring], times)
    return {"switch_per_ring_flit": float(per_ring_flit), "switch_per_ring": float(per_ring)}


def _mb13(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    chosen, times = _above(points, medians, given)
    group = np.array([float(p["GROUP"]) for p in chosen])
    flits = np.array([float(p["FLITS"]) for p in chosen])
    _, _, per_slice, per_flit_group = _least_squares([np.ones_like(group), flits, group, flits * group / 64], times)
    return {"reducer_per_slice": float(per_slice), "reducer_throughput": float(per_flit_group)}


def _mb15(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    by = {p["PASSES"]: float(m) for p, m in zip(points, medians, strict=True)}
    running = by["only"] - given["empty_kernel_cycles"]  # how long the passes run
    return {"interference": 1 - (by["with"] - by["without"]) / running}


def largest_accepted(low: int, high: int, refused: Callable[[int], object]) -> int:
    """The largest value in [low, high) that is not refused, for a refusal that starts somewhere and
    holds above it (bisection; `low` is accepted, `high` refused)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if refused(middle) else (middle, high)
    return low


def _compile_limit(probe: ProbeTemplate, version: str, point: Callable[[int], dict[str, str]], low: int, high: int,
                   refused: Callable[[str], bool]) -> int:  # fmt: skip
    """The largest value in [low, high) whose program the compiler (or the device) accepts."""
    return largest_accepted(low, high, lambda value: refused(probe.instantiate(point(value), version)))


def _mb11_chain(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    check = bench.target.check
    chain = lambda k: {"CHAIN": ", ".join(["add(1.0)"] * k)}  # noqa: E731
    longest = _compile_limit(probe, version, chain, 1, 33, lambda source: not check(source, version).ok)
    return {"ve_max_chain": float(longest)}


def _mb14(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    check = bench.target.check
    words = _compile_limit(probe, version, lambda w: {"BYTES": str(8 * w)}, 1, 1 << 17,
                           lambda source: not check(source, version).ok)  # fmt: skip
    return {"dm_usable_per_slice": float(8 * words)}


def _mb16(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    """The shortest same-bank run the toolchain or the device objects to: a note or an error from
    0.6.0 on, a NOC_TIMEOUT fault on 0.5.0 (a job per step of the search)."""

    def objected(source: str) -> bool:
        if any(d.code.endswith("0520") for d in bench.target.check(source, version).diagnostics):
            return True
        job = DeviceJob(kernel=probe.kernel, program=source, toolchain=version, fixtures="smoke", agent="harness")
        return any(f.code == "NOC_TIMEOUT" for f in bench.run(job).faults)

    run = lambda r: {"RUN": str(r), "SPAN": str(128 * r)}  # noqa: E731
    return {"bank_run_limit": float(_compile_limit(probe, version, run, 1, 513, objected) + 1)}


FITS: dict[str, Fit] = {
    f.probe: f
    for f in (
        Fit("MB01", ("empty_kernel_cycles",), _mb01),
        Fit("MB02", ("engine_rate_4k", "dma_intercept"), _mb02),
        Fit("MB03", ("dma_chain_startup",), _mb03),
        Fit("MB04", ("engine_bw", "pkt_overhead"), _mb04),
        Fit("MB05", ("dmn_bw",), _mb05),
        Fit("MB06", ("cluster_ingress", "roof"), _mb06),
        Fit("MB07", ("hbm_unit", "rmw_factor"), _mb07),
        Fit("MB08", ("dm2dm_rate", "xcluster_factor"), _mb08),
        Fit("MB09", ("lut_bpc", "lut_bpc_f4"), _mb09),
        Fit(
            "MB10",
            (
                "fetch_read_main",
                "fetch_read_sub",
                "sync_cycles",
                "launch_cycles",
                "dma_start_cycles",
                "pass_fixed_cycles",
            ),
            _mb10,
            secondary=("launch_cycles", "dma_start_cycles", "pass_fixed_cycles"),
        ),
        Fit("MB11", ("ve_trans_cycles",), _mb11),
        Fit("MB11/chain", ("ve_max_chain",), search=_mb11_chain),
        Fit("MB12", ("switch_per_ring_flit", "switch_per_ring"), _mb12, secondary=("switch_per_ring",)),
        Fit("MB13", ("reducer_per_slice", "reducer_throughput"), _mb13, secondary=("reducer_per_slice",)),
        Fit("MB14", ("dm_usable_per_slice",), search=_mb14),
        Fit("MB15", ("interference",), _mb15),
        Fit("MB16", ("bank_run_limit",), search=_mb16),
    )
}
