"""A design family: a kernel's program written from a few knobs (SimRNGD's design spaces).

A family knows the structure of a good program for its kernel (which dims go to clusters and
slices, where the split-K reduction happens, how the tail is ordered) and leaves the choices that
depend on the chip to knobs: k-groups, chunking, pipeline depth, engines. `facts` are what the
graph has measured or learnt (parameter key -> value; capability flags as 0/1), so a family can
size row-groups to the measured HBM unit or fit buffers in the measured DM. `workload` describes
the program to the pack's cost model without parsing it. A family is a `DesignSpace` (chiplore.core.pack).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable

from chiplore.core.pack import Facts, Knob, Params
from simulator.pack import capabilities as C
from simulator.pack import params as P
from simulator.pack.cost import COST_PARAMS, engine_rate, param
from simulator.pack.workload import Workload


def engines_text(engines: Iterable[int]) -> str:
    """A list of DMA engines as the DSL writes it: `[0, 1, 4, 5]`."""
    return "[" + ", ".join(map(str, engines)) + "]"


def engine_list(per_cluster: int) -> str:
    """Engines 0.. of cluster 0 and 4.. of cluster 1, as the DSL writes them."""
    return engines_text([*range(per_cluster), *range(4, 4 + per_cluster)])


def packet_arg(p: Params) -> str:
    """`packet = N` for a DMA when the design asks for packets smaller than the contiguous run."""
    return f", packet = {p['packet']}" if p.get("packet") else ""


def all_reduce(group: str, facts: Facts) -> str:
    """Sum over `group` left on every slice, in the toolchain's vocabulary (0.7.0 renamed it)."""
    if facts.get(C.ALLREDUCE, 0.0) > 0:
        return f".allreduce_slices(add, group = [{group}])"
    return f".reduce_slices(add, group = [{group}], result = all)"


def lookup(facts: Facts) -> str:
    """The table-lookup stage as the toolchain names it (`.lut` until 0.6.0 renamed it `.decode`)."""
    return "lut" if facts.get(C.DECODE, 1.0) <= 0 else "decode"


def bridge(facts: Facts) -> bool:
    """Whether the toolchain adds the two clusters' values over the cluster bridge (`reduce_clusters`)."""
    return facts.get(C.BRIDGE, 0.0) > 0


def widening(facts: Facts) -> str:
    """The widening cast as the toolchain names it (`.widen` where `.cast` was split, 0.7.0)."""
    return "widen" if facts.get(C.WIDEN, 0.0) > 0 else "cast"


def narrowing(facts: Facts) -> str:
    """The narrowing cast as the toolchain names it."""
    return "narrow" if facts.get(C.WIDEN, 0.0) > 0 else "cast"


def usable_dm(facts: Facts) -> float:
    """DM a slice holds: the measured limit, or the documented 480 KB until it is measured."""
    return facts.get(P.DM_USABLE.key, 480 * 1024)


class Family(ABC):
    kernel: str
    knobs: tuple[Knob, ...]
    # What a design is decided from: the cost model's parameters and the families' sizing facts
    # (a capability's fact is the rule that refuses it, where one does).
    consults: tuple[str, ...] = (*(p.key for p in COST_PARAMS), P.DM_USABLE.key, C.WIDEN, C.ALLREDUCE, C.BRIDGE,
                                 C.F8_STREAM, C.F4_STREAM, P.DECODE_RATE.key)  # fmt: skip

    @abstractmethod
    def valid(self, p: Params, facts: Facts) -> bool:
        """Whether the knobs make a program this chip can hold (DM capacity, slice counts)."""

    @abstractmethod
    def workload(self, p: Params, facts: Facts) -> Workload: ...

    @abstractmethod
    def dm_bytes(self, p: Params, facts: Facts) -> int:
        """DM a slice holds at the peak: the pipeline's buffers and the accumulators."""

    def stream_dtypes(self, p: Params, facts: Facts) -> tuple[str, ...]:
        """The element types its contractions stream (against a bf16 operand)."""
        return ("f8e4m3",) if p.get("direct", 1) else ("bf16",)

    def features(self, p: Params, facts: Facts) -> dict[str, object]:
        """The quantities the graph's legality rules constrain, as this design has them."""
        return {
            "dm.bytes_per_slice": self.dm_bytes(p, facts),
            "contract.stream_dtype": self.stream_dtypes(p, facts),
            "dma.packet_bytes": max(s.packet_bytes for s in self.workload(p, facts).streams),
        }

    @abstractmethod
    def source(self, p: Params, facts: Facts, version: str) -> str: ...

    def rationale(self, p: Params, facts: Facts, predicted_cycles: float) -> str:
        work = self.workload(p, facts)
        main = max(work.streams, key=lambda s: s.bytes_per_cluster)
        port = param(facts, P.CLUSTER_PORT)
        return (
            f"{json.dumps(p, sort_keys=True)}: {main.engines} engine(s) per cluster x {engine_rate(main, facts):.0f} "
            f"B/cycle at {main.packet_bytes} B packets against a {port:.0f} B/cycle cluster port; {work.chunks} "
            f"chunk(s), depth {work.depth}; {self.dm_bytes(p, facts):,} B of DM per slice; predicted "
            f"{predicted_cycles:,.0f} cycles"
        )
