"""The toy chip's hidden truth: what its device really does, per toolchain version.

Only the device's timing (`tests.toy.timing`), the target's kernel bound and the tests read it; the
pack (`tests.toy.pack`) never does, so whatever chiplore knows of these numbers it measured.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Truth:
    clock_hz: float = 1e9
    launch_cycles: float = 300.0
    dma_start_cycles: float = 640.0  # every DMA command (a load chunk, a store) pays it before its first byte
    lane_bytes_per_cycle: float = 24.0  # one DMA lane (the 1.0 docs say 32: wrong)
    ingress_bytes_per_cycle: float = 64.0  # all lanes together: the roof weights reach compute at
    mac_bytes_per_cycle: float = 128.0  # matrix bytes a `mul` consumes per cycle
    scale_bytes_per_cycle: float = 64.0
    warmup_factor: float = 1.25  # a job's first run, cold
    noise_sigma: float = 0.015  # run-to-run, log-normal


BASE = Truth()
# 2.0's DMA engine starts a command in half the time (its CHANGES.md says so).
TRUTH: dict[str, Truth] = {"1.0": BASE, "2.0": replace(BASE, dma_start_cycles=320.0)}
