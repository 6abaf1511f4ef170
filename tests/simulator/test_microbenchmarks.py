"""The starting microbenchmarks (SIMULATOR.md 7) against the answer key, noise-free.

The key is what a perfect fit of each probe would find; the cost model must reproduce it within
0.5 %. Rates come from the measured op's duration less one command start-up (what the sweep's
slope gives an agent)."""

from __future__ import annotations

import pytest

from chiplore.target import ProbeTemplate
from simulator.bench import microbenchmarks
from simulator.cost import CostReport, estimate
from simulator.toolchain.check import check

PROBES = {p.id: p for p in microbenchmarks()}
STARTUP = 340.0


def run(probe: str, index: int, version: str = "0.6.0") -> CostReport:
    template = PROBES[probe]
    return estimate(template.instantiate(template.points[index], version), version)


def rate(report: CostReport, label: str, nbytes: float) -> float:
    op = next(o for o in report.per_op if o.label == label)
    return nbytes / (op.end - op.start - STARTUP)


def close(value: float, key: float) -> bool:
    return abs(value / key - 1) <= 0.005


@pytest.mark.parametrize("template", microbenchmarks(), ids=lambda t: t.id)
@pytest.mark.parametrize("version", ["0.6.0", "0.7.0"])
def test_every_probe_compiles_at_every_point(template: ProbeTemplate, version: str) -> None:
    for point in template.points:
        result = check(template.instantiate(point, version), version)
        assert result.ok, (point, [d.message for d in result.diagnostics if d.is_error])
        assert not result.diagnostics, [d.code for d in result.diagnostics]  # the sink is written, nothing else


def test_mb01_launch_plus_one_command() -> None:
    assert close(run("MB01", 0).cycles, 541)


@pytest.mark.parametrize(("index", "key"), [(0, 543), (1, 560), (2, 865), (3, 5_733)])
def test_mb02_size_sweep(index: int, key: int) -> None:
    assert close(run("MB02", index).cycles, key)


@pytest.mark.parametrize(("version", "key"), [("0.6.0", 340), ("0.7.0", 90)])
def test_mb03_a_queued_command_starts_in_the_chain_time(version: str, key: int) -> None:
    cycles = [run("MB03", i, version).cycles for i in range(len(PROBES["MB03"].points))]
    commands = [int(p["COMMANDS"]) for p in PROBES["MB03"].points]
    transfer = 65_536 / 201.9
    slope = (cycles[-1] - cycles[0]) / (commands[-1] - commands[0])
    assert abs(slope - transfer - key) <= 0.005 * (transfer + key)


@pytest.mark.parametrize(("index", "key"), list(enumerate([81.5, 119.5, 155.8, 183.8, 201.9])))
def test_mb04_engine_rate_per_packet_size(index: int, key: float) -> None:
    assert close(rate(run("MB04", index), "d", 4 << 20), key)


@pytest.mark.parametrize(("index", "key"), [(0, 143.0), (1, 201.9)])
def test_mb05_one_dmn_against_alternating(index: int, key: float) -> None:
    assert close(rate(run("MB05", index), "d", 16 << 20), key)


@pytest.mark.parametrize(("index", "key"), list(enumerate([201.9, 285.0, 285.0, 403.8, 570.0, 570.0])))
def test_mb06_engines_and_cluster_ports(index: int, key: float) -> None:
    assert close(rate(run("MB06", index), "d", 16 << 20), key)


@pytest.mark.parametrize(("index", "key"), [(0, 59.4), (1, 29.7)])
def test_mb08_dm_to_dm(index: int, key: float) -> None:
    assert close(rate(run("MB08", index), "b", 1 << 20), key)
