"""The shape chiplore writes SimRNGD programs for: what the shape probe (MB00) measured, else what the
docs of the first chip state. The microbenchmarks (`simulator/bench`) and the design-space generator
(`simulator/pack/generator`) both write layouts and engine lists from it. It is not the chip's hidden
truth (`simulator/_truth`), only what was learnt of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Chip:
    """Clusters, slices, engines, register files and DM; engines are numbered cluster by cluster."""

    clusters: int = 2
    slices: int = 256  # per cluster
    engines_per_cluster: int = 4
    lanes: int = 8  # per slice: the contraction lanes a fold may span
    trf_lane_bytes: int = 8 * 1024
    vrf_bytes: int = 8 * 1024  # per slice
    dm_usable_per_slice: int = 480 * 1024  # what MB14 found; the probes keep their buffers well inside it

    @classmethod
    def named(cls, found: Mapping[str, float]) -> Chip:
        """From values by field name (MB00's fit names them so); what is missing keeps its documented value."""
        return cls(**{f.name: int(found[f.name]) for f in dataclasses.fields(cls) if f.name in found})

    @property
    def engines(self) -> int:
        return self.clusters * self.engines_per_cluster

    @property
    def every(self) -> tuple[int, ...]:
        """Every cluster, in order."""
        return tuple(range(self.clusters))

    def engine(self, cluster: int, local: int) -> int:
        """The number of a cluster's `local`-th engine."""
        return cluster * self.engines_per_cluster + local

    def beside_first(self, count: int) -> list[int]:
        """`count` engines for DMAs beside engine 0's: cluster 0's next ones, else the chip's next ones,
        else engine 0 itself (a chip of one engine)."""
        others = self.local(0)[1:] + [e for e in range(self.engines) if e not in self.local(0)]
        return (others + [self.engine(0, 0)] * count)[:count]

    def local(self, cluster: int, count: int | None = None) -> list[int]:
        """The first `count` engines of a cluster (all of them by default)."""
        return [
            self.engine(cluster, e) for e in range(min(count or self.engines_per_cluster, self.engines_per_cluster))
        ]


DOCUMENTED_CHIP = Chip()
