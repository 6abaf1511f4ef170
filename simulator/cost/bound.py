"""The weight-movement bound (the chip's roof): the fewest cycles any program needs to bring a
kernel's weights into DM through the clusters' ingress ports. Harness-only, like the rest of the
cost model: agents compute their own bound from the roof they measured."""

from __future__ import annotations

from chiplore.simulator._truth import ChipTruth, load_truth


def weight_bound_cycles(weight_bytes: float, truth: ChipTruth | None = None) -> float:
    """Weight bytes over the true roof (every cluster's ingress) of this chip."""
    return weight_bytes / (truth or load_truth()).roof
