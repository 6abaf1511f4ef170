"""SimRNGD's cost model for any program: cycles predicted from ferc's lowering statistics
(`Target.analyze`, chiplore.core.stats) and the parameters chiplore learnt, never from the chip's truth.

The chip's documented structure (docs/simrngd.md §7) with learnt numbers: what one op costs alone
(`prices`) and how the ops share the queues and the cluster ports (`timeline`). Generated designs,
hand-written programs and an LLM's programs are priced the same way; benchmarks/cost_model.py
measures how well it ranks them against the true cycles.
"""

from __future__ import annotations

from collections.abc import Callable

from chiplore.core.pack import Facts, Params
from chiplore.core.stats import ProgramStats
from chiplore.simulator.pack.prices import Prices
from chiplore.simulator.pack.timeline import makespan


def predict_stats(stats: ProgramStats, facts: Facts) -> float | None:
    """Predicted cycles of one run of a compiled program: the launch plus the schedule's makespan."""
    if not stats.compiled:
        return None
    prices = Prices.of(facts)
    span = makespan(stats, prices)
    return None if span is None else prices.launch + span


# ---- the pack's cost model -------------------------------------------------------------------


class StatsCostModel:
    """Prices any program from its lowering statistics (chiplore.core.pack.CostModel): a generated
    design, a hand-written program and an LLM's the same way. `analyze` is the toolchain's (source,
    version or None for the program's own) -> ProgramStats, cached by source. A program's statistics
    cost its compile (0.1 to 1 s cold), so the builtin proposers price a budgeted search of a space,
    never the whole of it. An empty source gets no price."""

    def __init__(self, analyze: Callable[[str, str | None], ProgramStats]) -> None:
        self.analyze = analyze

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        if not source.strip():
            return None
        return predict_stats(self.analyze(source, None), facts)
