"""How the toy chip's microbenchmarks (tests.toy.bench) become parameters.

TB02 streams 128 KB .. 1 MB on one lane and on four: the slope of cycles over bytes is one lane's
rate, and with four lanes (the most a load may use) the rate weights reach compute at, the roof.
TB01 loads 32 KB in 1 .. 32 commands: the slope over commands is a command's start-up and the
intercept, less the 32 KB streamed, the launch. A search compiles TB02's program with ever more
rows in one chunk on one lane: the largest the compiler accepts is a lane's buffer.
"""

from __future__ import annotations

import numpy as np

from chiplore.core.probes import Bench, ProbeFit, largest_accepted
from chiplore.core.target import ProbeTemplate
from tests.toy.pack import params as P

ROW_BYTES = 256 * 4  # the probes' rows: 256 f32


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Intercept and slope, weighted for noise proportional to the value."""
    slope, intercept = np.polyfit(x, y, 1, w=1.0 / np.maximum(y, 1.0))
    return float(intercept), float(slope)


def fit_stream(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    out = {}
    for lanes, name in (("1", "lane_rate"), ("4", "ingress")):
        chosen = [i for i, p in enumerate(points) if p["LANES"] == lanes]
        nbytes = np.array([float(points[i]["ROWS"]) * ROW_BYTES for i in chosen])
        _, slope = _line(nbytes, medians[chosen])
        out[name] = 1.0 / slope
    return out


def fit_start_up(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
    commands = np.array([float(p["CHUNKS"]) for p in points])
    intercept, slope = _line(commands, medians)
    streamed = float(points[0]["ROWS"]) * ROW_BYTES / given["lane_rate"]
    return {"dma_start": slope, "launch": intercept - streamed}


def search_lane_buffer(probe: ProbeTemplate, version: str, bench: Bench) -> dict[str, float]:
    def refused(rows: int) -> bool:
        source = probe.instantiate({"ROWS": str(rows), "CHUNKS": "1", "LANES": "1"}, version)
        return not bench.check(source, version).ok

    return {"lane_buffer": float(largest_accepted(1, 1025, refused) * ROW_BYTES)}


FITS: tuple[ProbeFit, ...] = (
    ProbeFit("TB02", "TB02", ("lane_rate", "ingress"), {"lane_rate": P.LANE_RATE, "ingress": P.INGRESS}, fit_stream),
    # the launch is an intercept far from the points: fitted, but loosely
    ProbeFit("TB01", "TB01", ("dma_start", "launch"), {"dma_start": P.DMA_START, "launch": P.LAUNCH}, fit_start_up,
             secondary=("launch",)),
    ProbeFit("TB02/buffer", "TB02", ("lane_buffer",), {"lane_buffer": P.LANE_BUFFER}, search=search_lane_buffer),
)  # fmt: skip
