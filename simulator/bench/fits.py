"""Reference fits of the microbenchmarks (harness side): run a probe's sweep on a simulated device
with its noise, and fit the parameters it is meant to reveal, with bootstrap intervals.

These are the simulator's own check that each probe can reveal its parameter at the stated
repeats (SIMULATOR.md 7: within about 2 %); chiplore writes its own fits from the same templates.
Nothing here reads the chip's truth: a fit sees cycles and the probe's points, as an agent does.

Sweeps run every point once per round and spread the rounds over half an hour of device time, so
the slow drift of the device averages out instead of biasing one point. Medians per point make
the fits robust to the occasional slow run. Later fits take earlier results as givens (the
launch-plus-start-up of MB01 is the intercept every DMA probe subtracts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from chiplore.target import DeviceJob, ProbeTemplate
from simulator.device import SimDevice

Samples = list[np.ndarray]  # per point: the timed runs' cycles
SPREAD_S = 1800.0  # one drift period of device time per sweep
MIB = 1 << 20


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float
    low: float  # 95 % bootstrap interval
    high: float


def sweep(device: SimDevice, probe: ProbeTemplate, version: str, rounds: int | None = None) -> Samples:
    """Each point's cycles over `rounds` rounds (default: the probe's stated repeats)."""
    count = rounds if rounds is not None else probe.repeats
    sources = [probe.instantiate(point, version) for point in probe.points]
    samples: list[list[float]] = [[] for _ in sources]
    for round_no in range(count):
        for offset in range(len(sources)):  # rotate the order so no point always runs first
            index = (offset + round_no) % len(sources)
            job = DeviceJob(kernel=probe.kernel, program=sources[index], toolchain=version, fixtures="smoke",
                            agent="harness")  # fmt: skip
            samples[index] += _timed_runs(device, job, f"{probe.id} point {index}")
        device.advance(SPREAD_S / count)
    return [np.asarray(s, dtype=np.float64) for s in samples]


def _timed_runs(device: SimDevice, job: DeviceJob, what: str, attempts: int = 4) -> list[float]:
    """A job's timed runs; a job that faults at random (a hang, a transient) is simply run again."""
    result = None
    for _ in range(attempts):
        result = device.result(device.submit(job))
        if result.status == "ok":
            return [run.cycles for run in result.runs if not run.warmup]
    assert result is not None
    raise RuntimeError(f"{what}: {result.status} {attempts} times; last: {result.message}")


@dataclass(frozen=True)
class Fit:
    """How one probe's medians turn into parameters (given earlier probes' results)."""

    probe: str
    params: tuple[str, ...]
    model: Callable[[list[dict[str, str]], np.ndarray, dict[str, float]], dict[str, float]]


def fit(fit_spec: Fit, probe: ProbeTemplate, samples: Samples, given: dict[str, float],
        draws: int = 400, seed: int = 0) -> dict[str, Estimate]:  # fmt: skip
    """The parameters from the per-point medians, and intervals from resampling each point's runs."""
    points = [dict(p) for p in probe.points]
    central = fit_spec.model(points, np.array([np.median(s) for s in samples]), given)
    rng = np.random.default_rng(seed)
    boot: dict[str, list[float]] = {name: [] for name in central}
    for _ in range(draws):
        medians = np.array([np.median(rng.choice(s, size=len(s))) for s in samples])
        for name, value in fit_spec.model(points, medians, given).items():
            boot[name].append(value)
    return {
        name: Estimate(
            value=value, low=float(np.percentile(boot[name], 2.5)), high=float(np.percentile(boot[name], 97.5))
        )
        for name, value in central.items()
    }


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Intercept and slope, weighted for noise proportional to the value (relative errors)."""
    weights = 1.0 / np.maximum(y, 1.0)
    slope, intercept = np.polyfit(x, y, 1, w=weights)
    return float(intercept), float(slope)


def _mb01(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    return {"launch_plus_startup": float(medians[0])}


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
    return {"engine_bw": 4 * MIB / (intercept - given["launch_plus_startup"]), "pkt_overhead": slope}


def _rate(nbytes: float, cycles: float, given: dict[str, float]) -> float:
    return nbytes / (cycles - given["launch_plus_startup"])


def _mb05(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    one_dmn = next(i for i, p in enumerate(points) if p["ORDER"] == "[S, A]")
    return {"dmn_bw": _rate(16 * MIB, float(medians[one_dmn]), given)}


def _mb06(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    rates = {p["ENGINES"]: _rate(16 * MIB, float(m), given) for p, m in zip(points, medians, strict=True)}
    one_cluster = [rates["[0, 1]"], rates["[0, 1, 2, 3]"]]  # two or four engines into one port: its limit
    return {"cluster_ingress": float(np.mean(one_cluster)), "roof": rates["[0, 1, 4, 5]"]}


def _mb08(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    # 1 MiB into cluster 0 on four engines (the port limits it), then the DM -> DM copy on engine 0,
    # queued behind the load on that engine.
    load = MIB / given["cluster_ingress"]
    copy = {
        p["TO_CLUSTER"]: float(m) - given["launch_plus_startup"] - load for p, m in zip(points, medians, strict=True)
    }
    same = MIB / copy["0"]
    return {"dm2dm_rate": same, "xcluster_factor": (MIB / copy["1"]) / same}


FITS: dict[str, Fit] = {
    f.probe: f
    for f in (
        Fit("MB01", ("launch_plus_startup",), _mb01),
        Fit("MB02", ("engine_rate_4k", "dma_intercept"), _mb02),
        Fit("MB03", ("dma_chain_startup",), _mb03),
        Fit("MB04", ("engine_bw", "pkt_overhead"), _mb04),
        Fit("MB05", ("dmn_bw",), _mb05),
        Fit("MB06", ("cluster_ingress", "roof"), _mb06),
        Fit("MB08", ("dm2dm_rate", "xcluster_factor"), _mb08),
    )
}
