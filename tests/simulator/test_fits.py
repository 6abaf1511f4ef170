"""The microbenchmarks' reference fits (SIMULATOR.md 7) on the noisy device: each sweep, run at the
probe's stated repeats spread over one drift period, recovers its parameter within 2 % of the truth.

The fits for MB07 and MB09-MB16 are not written yet, and three of the written checks miss 2 % (strict
xfails that say why); see simulator/bench/fits.py."""

from __future__ import annotations

from functools import cache

import pytest

from simulator._truth import ChipTruth, load_truth
from simulator.bench import microbenchmarks
from simulator.bench.fits import FITS, Estimate, fit, sweep
from simulator.device import DeviceConfig, SimDevice
from simulator.kernel_specs import input_bytes


def truth_of(name: str, chip: ChipTruth) -> float:
    return {
        "engine_rate_4k": 4096 / (4096 / chip.engine_bw + chip.pkt_overhead),
        "dma_chain_startup": chip.dma_chain_startup,
        "engine_bw": chip.engine_bw,
        "pkt_overhead": chip.pkt_overhead,
        "dmn_bw": chip.dmn_bw,
        "cluster_ingress": chip.cluster_ingress,
        "roof": chip.roof,
        "dm2dm_rate": chip.dm2dm_phase_bw / 2,
        "xcluster_factor": chip.xcluster_factor,
    }[name]


@cache
def results(version: str) -> dict[str, Estimate]:
    probes = {p.id: p for p in microbenchmarks()}
    device = SimDevice(1, DeviceConfig(agent_budget_s_per_day=1e9), input_bytes=input_bytes)
    found: dict[str, Estimate] = {}
    for probe_id, spec in FITS.items():
        estimates = fit(spec, probes[probe_id], sweep(device, probes[probe_id], version),
                        {k: e.value for k, e in found.items()})  # fmt: skip
        found |= estimates
    return found


MISSES = {  # (version, parameter): why the fit misses 2 % today
    ("0.6.0", "dm2dm_rate"): "the copy is what remains after subtracting a modelled load phase",
    ("0.6.0", "xcluster_factor"): "a ratio of two copies, each after subtracting the load phase",
    ("0.7.0", "xcluster_factor"): "a ratio of two copies, each after subtracting the load phase",
}
CASES = [
    pytest.param(v, name, marks=pytest.mark.xfail(strict=True, reason=MISSES[v, name])) if (v, name) in MISSES
    else pytest.param(v, name)
    for v in ("0.6.0", "0.7.0")
    for name in ("engine_rate_4k", "dma_chain_startup", "engine_bw", "pkt_overhead", "dmn_bw", "cluster_ingress",
                 "roof", "dm2dm_rate", "xcluster_factor")
]  # fmt: skip


@pytest.mark.parametrize(("version", "name"), CASES)
def test_the_reference_fit_recovers_the_parameter_within_two_percent(version: str, name: str) -> None:
    estimate = results(version)[name]
    true = truth_of(name, load_truth(version, path=""))
    assert abs(estimate.value / true - 1) <= 0.02, (estimate, true)


def test_the_intervals_are_intervals() -> None:
    for estimate in results("0.6.0").values():
        assert estimate.low <= estimate.value <= estimate.high
