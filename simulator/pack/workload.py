"""What SimRNGD's cost model needs to know of a design, without parsing its program: its weight
streams and the passes around them."""

from __future__ import annotations

from dataclasses import dataclass


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
