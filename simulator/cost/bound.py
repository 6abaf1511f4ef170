"""The weight-movement bound (the chip's roof): the fewest cycles any program needs to bring a
kernel's weights into DM through the clusters' ingress ports. Harness-only, like the rest of the
cost model: agents compute their own bound from the roof they measured.

`floor_cycles` adds what every program of a kernel with weights and an output pays besides moving the
weights (benchmarks report it beside the bound: for a tiny kernel the bound is unreachable by far)."""

from __future__ import annotations

from chiplore.simulator._truth import ChipTruth, load_truth


def weight_bound_cycles(weight_bytes: float, truth: ChipTruth | None = None) -> float:
    """Weight bytes over the true roof (every cluster's ingress) of this chip."""
    return weight_bytes / (truth or load_truth()).roof


def floor_cycles(weight_bytes: float, truth: ChipTruth | None = None) -> float:
    """A lower bound on any program's cycles (the scheduler's rules, docs/simrngd.md §7): the launch; no
    byte moves before a DMA's start-up on an idle engine, and the weights take `weight_bound_cycles`
    after it; the last weight byte is used by a pass (a hand-off from the DMA, its fixed cost and the
    fetch, collect and commit latencies every pass has) whose result reaches HBM by a DMA (another
    hand-off and a start-up, chained at best). Output bytes and every other stage are left out."""
    chip = truth or load_truth()
    a_pass = chip.pass_fixed + chip.latency_fetch + chip.latency_collect + chip.latency_commit
    store = min(chip.dma_startup, chip.dma_chain_startup)
    moved = chip.dma_startup + weight_bound_cycles(weight_bytes, chip)
    return chip.launch_cycles + moved + 2 * chip.sync_cycles + a_pass + store
