"""The cost model against its calibration (docs/simrngd.md §7.6), the bound (§11), the
toolchain effects of 3.4 and a chip with other hidden values (CHIPLORE_SIM_TRUTH)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chiplore.simulator._truth import ENV_VAR, ChipTruth, TruthFileError, load_truth
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.cost.passes import pass_cycles
from chiplore.simulator.toolchain.lowered import PassWork
from tests.simulator.ports import port
from tests.simulator.programs import program_text

OFFICIAL = {"qkv": 250_514, "o": 404_633, "ffn": 3_703_473}  # cycles on 0.6.0 (docs/simrngd.md §7.6)
BOUND = {"qkv": 55_217, "o": 27_608, "ffn": 174_619}  # W_bytes / 570 (section 9)
WEIGHT_BYTES = {"qkv": 31_473_664, "o": 15_736_320, "ffn": 99_532_812}


def source(name: str) -> str:
    return program_text(name)


@pytest.mark.parametrize("kernel", sorted(OFFICIAL))
def test_baselines_reproduce_the_official_cycles(kernel: str) -> None:
    cycles = estimate(source(f"{kernel}_baseline"), "0.6.0").cycles
    assert abs(cycles / OFFICIAL[kernel] - 1) <= 0.005, cycles


@pytest.mark.parametrize("kernel", ["qkv", "o", "ffn"])
def test_optimised_examples_come_close_to_the_bound(kernel: str) -> None:
    ratio = estimate(source(f"{kernel}_opt"), "0.6.0").cycles / BOUND[kernel]
    assert 1.02 <= ratio <= 1.13, ratio


@pytest.mark.parametrize("name", ["qkv_baseline", "o_baseline", "ffn_baseline", "qkv_opt", "o_opt", "ffn_opt"])
def test_no_program_moves_its_weights_faster_than_both_ingress_ports(name: str) -> None:
    kernel = name.split("_")[0]
    truth = load_truth("0.6.0")
    assert WEIGHT_BYTES[kernel] / truth.roof == pytest.approx(BOUND[kernel], abs=1)
    assert estimate(source(name), "0.6.0").cycles >= WEIGHT_BYTES[kernel] / truth.roof


# One GEMV design family (the o_opt shape) over engines, chunks and pipeline depth: whatever the
# design, weights cannot arrive faster than 2 x cluster_ingress.
FAMILY = [
    (engines, chunks, depth)
    for engines in ("[0, 4]", "[0, 1, 4, 5]", "[0, 1, 2, 3, 4, 5, 6, 7]", "[0, 1, 2, 3]")
    for chunks, depth in ((4, 3), (8, 2), (2, 1))
]


@pytest.mark.parametrize(("engines", "chunks", "depth"), FAMILY)
def test_generated_designs_never_beat_the_weight_bound(engines: str, chunks: int, depth: int) -> None:
    rows = 128 // chunks
    text = source("o_opt")
    text = text.replace("o_weight.tile(H % 128, c * 32, 32).dma(engines = [0, 1, 2, 3, 4, 5, 6, 7])",
                        f"o_weight.tile(H % 128, c * {rows}, {rows}).dma(engines = {engines})")  # fmt: skip
    text = text.replace("#[pipeline(depth = 3)]", f"#[pipeline(depth = {depth})]").replace(
        "for c in 0..4", f"for c in 0..{chunks}"
    )
    text = text.replace("H % 128 = 32", f"H % 128 = {rows}").replace(
        "acc.tile(H % 128, c * 32, 32)", f"acc.tile(H % 128, c * {rows}, {rows})"
    )
    report = estimate(text, "0.6.0")
    assert report.cycles >= WEIGHT_BYTES["o"] / load_truth("0.6.0").roof


def test_the_estimate_is_deterministic_and_cached() -> None:
    text = source("o_baseline")
    first, second = estimate(text, "0.6.0"), estimate(text, "0.6.0")
    assert first is second  # the same (source, toolchain, truth) is simulated once
    assert first.cycles == estimate(text + "\n", "0.6.0").cycles


def test_a_program_with_errors_is_not_estimated() -> None:
    with pytest.raises(NotCompiled, match="E0103"):
        estimate(source("o_baseline"), "0.7.0")


def test_a_pass_is_its_slowest_stage_plus_fixed_costs_and_latencies() -> None:
    truth = load_truth("0.6.0")
    decode = PassWork(fetch_reads=3840, decode_bytes=122_880, flits=7680, commit_writes=7680)
    cycles, bound = pass_cycles(decode, truth)
    assert bound == "decode" and cycles == pytest.approx(48 + 12 + 2 + 8 + 6 + 122_880 / 1.622)
    switch = PassWork(fetch_reads=256, flits=256, switch_ring=256, switch_flits=256, commit_writes=256)
    assert pass_cycles(switch, truth) == (48 + 12 + 2 + 8 + 256 + 256 * 256, "switch")
    gelu = PassWork(fetch_reads=15, flits=15, vector_flits=15, transcendentals=1, commit_writes=15)
    assert pass_cycles(gelu, truth) == (48 + 12 + 2 + 8 + 8 + 60, "vector")


# ---- toolchain effects (docs/simrngd.md §4.3) ------------------------------------------------------


def test_a_broadcast_pays_for_every_slice_its_copies_reach_whatever_ring_it_states() -> None:
    # `ring = n` states the ring a switch uses; a broadcast's copies still have to reach their slices
    # (here 64 row-groups x 4 k-groups of 256), so stating a ring of one slice saves nothing.
    source = program_text("qkv_opt")
    stated = source.replace(".switch(broadcast, slice = [rep(64), H / 960])",
                            ".switch(broadcast, slice = [rep(64), H / 960], ring = 1)")  # fmt: skip
    assert stated != source
    assert estimate(stated, "0.6.0").cycles == estimate(source, "0.6.0").cycles
    wider = stated.replace("ring = 1", "ring = 512")  # a ring wider than the slices costs what it states
    assert estimate(wider, "0.6.0").per_queue_busy["main"] > estimate(source, "0.6.0").per_queue_busy["main"]


@pytest.mark.parametrize(("kernel", "change"), [("qkv", -0.009), ("o", -0.001), ("ffn", -0.005)])
def test_the_official_baseline_across_toolchains(kernel: str, change: float) -> None:
    base = source(f"{kernel}_baseline")
    at_060 = estimate(base, "0.6.0").cycles
    assert estimate(port(base, "0.5.0"), "0.5.0").cycles == pytest.approx(at_060, rel=1e-9)
    at_070 = estimate(port(base, "0.7.0"), "0.7.0").cycles
    assert at_070 / at_060 - 1 == pytest.approx(change, abs=0.004)


def test_070_chains_queued_dma_commands_and_reserves_more_dm() -> None:
    assert load_truth("0.6.0").dma_chain_startup == 340 and load_truth("0.7.0").dma_chain_startup == 90
    assert load_truth("0.7.0").dm_usable_per_slice == 464 * 1024


# ---- another chip ------------------------------------------------------------------------------


def test_a_truth_file_simulates_a_different_chip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Halving the single-DMN rate doubles the QKV baseline's weight stream (31.46 MB, one engine,
    destination-major order) and leaves everything else alone."""
    text = source("qkv_baseline")
    default = estimate(text, "0.6.0").cycles
    chip = tmp_path / "slow.toml"
    chip.write_text("dmn_bw = 71.5\n")
    monkeypatch.setenv(ENV_VAR, str(chip))
    slower = estimate(text, "0.6.0").cycles
    weights = 31_457_280
    assert slower - default == pytest.approx(weights / 71.5 - weights / 143.0, rel=0.02)
    # JSON works too, and the roof of the optimised example moves with cluster_ingress.
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({"cluster_ingress": 570.0}))
    monkeypatch.setenv(ENV_VAR, str(wide))
    assert load_truth("0.6.0").roof == 1140.0
    assert estimate(source("o_opt"), "0.6.0").cycles < estimate(source("o_opt"), "0.6.0", ChipTruth()).cycles


def test_a_bad_truth_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("dmn_bw = -3\n")
    with pytest.raises(TruthFileError, match="dmn_bw"):
        load_truth("0.6.0", bad)
    with pytest.raises(TruthFileError, match="not valid"):
        (tmp_path / "broken.json").write_text("{")
        load_truth("0.6.0", tmp_path / "broken.json")
    with pytest.raises(TruthFileError, match="No such file"):
        load_truth(None, tmp_path / "missing.toml")
    with pytest.raises(TruthFileError, match=r"unknown_field|Extra inputs"):
        (tmp_path / "extra.toml").write_text("unknown_field = 1\n")
        load_truth(None, tmp_path / "extra.toml")
    # DM is allocated in 8-byte words: 200,003 B was taken without a word and learnt as 200,000
    (tmp_path / "odd_dm.toml").write_text("dm_usable_per_slice = 200003\n")
    with pytest.raises(TruthFileError, match="dm_usable_per_slice = 200003: Input should be a multiple of 8"):
        load_truth(None, tmp_path / "odd_dm.toml")
