"""The cost model (docs/simrngd.md §7): harness-only; agents see device measurements instead."""

from chiplore.simulator.cost.estimate import CostReport, NotCompiled, estimate, estimate_lowered

__all__ = ["CostReport", "NotCompiled", "estimate", "estimate_lowered"]
