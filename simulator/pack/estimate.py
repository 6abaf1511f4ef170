"""SimRNGD's cost model for any program: cycles predicted from ferc's lowering statistics
(`Target.analyze`, chiplore.core.stats) and the parameters chiplore learnt, never from the chip's truth.

The chip's documented structure (docs/simrngd.md §7) with learnt numbers: what one op costs alone
(`prices`) and how the ops share the queues and the cluster ports (`timeline`). Generated designs,
hand-written programs and an LLM's programs are priced the same way; benchmarks/cost_model.py
measures how well it ranks them against the true cycles.
"""

from __future__ import annotations

from collections.abc import Callable

from chiplore.core.pack import CostModel, Facts, Params
from chiplore.core.stats import ProgramStats
from chiplore.simulator.pack import params as P
from chiplore.simulator.pack.prices import STATS_COST_PARAMS, Prices
from chiplore.simulator.pack.timeline import makespan, schedule


def predict_stats(stats: ProgramStats, facts: Facts) -> float | None:
    """Predicted cycles of one run of a compiled program: the launch plus the schedule's makespan."""
    if not stats.compiled:
        return None
    prices = Prices.of(facts)
    span = makespan(stats, prices)
    return None if span is None else prices.launch + span


LATENCY_BOUND = 0.6  # below this share of its cycles on every resource, a program is bound by its chain of steps
IDLE_PORTS_SAID = 0.25  # the ports' share of the cycles from which clusters whose ports idle are named


def bottleneck(stats: ProgramStats, facts: Facts) -> str:
    """What bounds a compiled program, in a line: the busiest of the Tensor Unit's queues (main, sub),
    the DMA engines (the busiest one) and the clusters' ingress ports (the busiest port's bytes from
    HBM over what it moves in the makespan: the weight bound's resource), each as a share of the
    makespan, and the ports that carry next to nothing when some do (the bound counts every port).
    Where the measured roof is below the ports' sum (HBM's side of the chip), the share of the makespan
    the inbound bytes take at that roof is weighed too. The busiest engine's start-ups are said; where no
    resource works (an engine's start-ups aside) LATENCY_BOUND of the makespan, the program is bound by
    its chain of start-ups and hand-offs (a tiny kernel), and says so.
    "" when the program does not compile or its ops cannot all run."""
    if not stats.compiled:
        return ""
    prices = Prices.of(facts)
    planned = schedule(stats, prices)
    if planned is None or planned.makespan <= 0:
        return ""
    span = planned.makespan
    dma = {queue: busy for queue, busy in planned.busy.items() if queue not in ("main", "sub")}
    engine = max(dma, key=dma.__getitem__, default="")
    engines = dma.get(engine, 0.0)
    started = planned.startups.get(engine, 0.0)  # of the busiest engine's cycles, its commands' start-ups
    moving = max((busy - planned.startups.get(queue, 0.0) for queue, busy in dma.items()), default=0.0)
    inbound = sum(op.counters.get("bytes", 0.0) for op in stats.ops if op.kind == "dma.h2d")
    clusters = int(facts.get(P.CLUSTERS.key, P.CLUSTERS.default or 2.0))  # every cluster's port (the learnt shape)
    ports = [c.get("ingress_bytes", 0.0) for name, c in stats.by_resource.items() if name.startswith("cluster")]
    busiest = max(ports, default=inbound / clusters)
    shares = {
        "the Tensor Unit's main queue": planned.busy.get("main", 0.0) / span,
        "the sub queue": planned.busy.get("sub", 0.0) / span,
        "the busiest DMA engine": engines / span,
        "the busiest cluster's ingress": busiest / prices.cluster_port / span,
    }
    roof = prices.roof  # the chip moves less than its ports (Prices.of: HBM's side binds), else None
    if roof:
        shares[f"the chip's roof ({roof:,.0f} B/cycle measured, below its ports')"] = inbound / roof / span
    ranked = sorted(shares.items(), key=lambda item: -item[1])
    # an engine busy with its commands' start-ups is no engine moving bytes: said, and not counted as work
    note = {"the busiest DMA engine": f" ({started / engines:.0%} of it start-ups)"
            if engines > 0 and started >= 0.1 * engines else ""}  # fmt: skip
    said = [f"{name} {share:.0%}{note.get(name, '')}" for name, share in ranked]
    working = {**shares, "the busiest DMA engine": moving / span}
    if max(working.values()) < LATENCY_BOUND:  # nothing works most of the time: the chain of dependent steps
        line = (f"bound by start-ups and hand-offs: no resource works {LATENCY_BOUND:.0%} of its cycles "
                f"({', '.join(said)}); the launch ({prices.launch:,.0f} cycles), each DMA start-up "
                f"({prices.dma_start:,.0f}) and pass on its chain of dependent steps add up")  # fmt: skip
    else:
        top, share = ranked[0]
        line = f"bound by {top}, {share:.0%} busy{note.get(top, '')} ({', '.join(said[1:])})"
    carrying = sum(1 for port in ports if port >= 0.1 * busiest) if busiest > 0 else clusters
    ingress = shares["the busiest cluster's ingress"]
    # the bound counts every port: idle ones put it out of reach, said wherever the weights take a fair
    # share of the time (a kernel with almost no weights was told its ports carry them; a 3.6x chain whose
    # rows left a cluster of three idle, at 44 % ingress, was told only of a DMA engine 76 % busy); where
    # the chip's roof is below its ports (HBM's side), the ports that carry may reach it all the same (a
    # kernel at 1.17x was told it stays at least 1.5x, four ports of six carrying a roof they could carry)
    floor = (roof or clusters * prices.cluster_port) / (carrying * prices.cluster_port)
    if carrying < clusters and ingress >= IDLE_PORTS_SAID and floor >= 1.05:
        line += (f"; {carrying} of {clusters} clusters' ports carry the weights, so it stays at least "
                 f"{floor:.3g}x its bound")  # fmt: skip
    return line


# ---- the pack's cost model -------------------------------------------------------------------


class StatsCostModel(CostModel):
    """Prices any program from its lowering statistics: a generated design, a hand-written program and
    an LLM's the same way. `analyze` is the toolchain's (source, version or None for the program's
    own) -> ProgramStats, cached by source. A program's statistics cost its compile (0.1 to 1 s cold),
    so the builtin proposers price a budgeted search of a space, never the whole of it. An empty
    source gets no price."""

    reads = tuple(key.key for key in STATS_COST_PARAMS)

    def __init__(self, analyze: Callable[[str, str | None], ProgramStats]) -> None:
        self.analyze = analyze

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        if not source.strip():
            return None
        return predict_stats(self.analyze(source, None), facts)

    def explain(self, kernel: str, source: str, params: Params | None, facts: Facts) -> str:
        return bottleneck(self.analyze(source, None), facts) if source.strip() else ""
