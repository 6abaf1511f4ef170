"""A design family: a kernel's program written from a few knobs (the space generator).

A family knows the structure of a good program for its kernel (which dims go to clusters and
slices, where the split-K reduction happens, how the tail is ordered) and leaves the choices that
depend on the chip to knobs: k-groups, chunking, pipeline depth, engines. `facts` are what the
graph has measured or learnt (parameter key -> value; capability flags as 0/1), so a family can
size row-groups to the measured HBM unit or fit buffers in the measured DM. `workload` describes
the program to the graph's cost model without parsing it.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

Params = dict[str, int]
Facts = dict[str, float]


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Stream:
    """Weight bytes moved HBM -> DM per cluster, in packets of `packet_bytes`, split into `commands`
    DMA commands per engine, landing on `slices` slices of the cluster."""

    bytes_per_cluster: float
    packet_bytes: int
    engines: int
    commands: int
    slices: int


@dataclass(frozen=True)
class Workload:
    """What the cost model needs to know of a design."""

    streams: tuple[Stream, ...]
    chunk_compute: float  # TU cycles of one chunk's passes, beyond their fixed costs
    chunk_passes: int  # passes per chunk
    head_passes: int  # passes before the stream can be consumed (operand set-up)
    head_switch: tuple[int, int]  # (ring, flits) of the broadcast that must finish before the first contraction
    tail_passes: int  # passes after the last chunk
    tail_reduce: tuple[int, int]  # (slices reduced over, flits)
    tail_dmas: int  # DMA commands after the last chunk (exchanges and stores)
    depth: int
    chunks: int


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
    if facts.get("vocab.allreduce_slices", 0.0) > 0:
        return f".allreduce_slices(add, group = [{group}])"
    return f".reduce_slices(add, group = [{group}], result = all)"


def lookup(facts: Facts) -> str:
    """The table-lookup stage as the toolchain names it (`.lut` until 0.6.0 renamed it `.decode`)."""
    return "lut" if facts.get("vocab.decode", 1.0) <= 0 else "decode"


def bridge(facts: Facts) -> bool:
    """Whether the toolchain adds the two clusters' values over the cluster bridge (`reduce_clusters`)."""
    return facts.get("vocab.reduce_clusters", 0.0) > 0


class Family(ABC):
    kernel: str
    knobs: tuple[Knob, ...]

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

    def points(self, facts: Facts) -> Iterator[Params]:
        """Every valid knob setting, in a fixed order."""
        names = [knob.name for knob in self.knobs]
        for values in itertools.product(*(knob.values for knob in self.knobs)):
            p = dict(zip(names, values, strict=True))
            if self.valid(p, facts):
                yield p

    def neighbours(self, p: Params, facts: Facts) -> Iterator[Params]:
        """Valid settings one knob step away: what the refiner tries next to the best."""
        full = {**{knob.name: knob.values[0] for knob in self.knobs}, **p}  # a knob added since: its first value
        for knob in self.knobs:
            if full[knob.name] not in knob.values:
                continue
            index = knob.values.index(full[knob.name])
            for step in (-1, 1):
                if 0 <= index + step < len(knob.values):
                    q = {**full, knob.name: knob.values[index + step]}
                    if self.valid(q, facts):
                        yield q
