"""Kernels nobody here wrote, for tests and benchmarks: random well-formed kernel packs.

`random_pack(seed, root)` writes one (`build`): a random op graph over the whole vocabulary with
random shapes, dtypes, scales, rounding points and clashing names (`random_graphs`), its fixture
recipe and no reference.py (the op graph's reference grades it), and a baseline written by the
design generator. `campaign` loads, designs, compiles and host-tests such packs and counts what
goes wrong (`benchmarks/unseen_kernels.py`, tests/simulator/test_unseen_kernels.py). Nothing here
holds data of the shipped packs.
"""

from chiplore.simulator.testing.build import PackBuild, build_pack, random_pack
from chiplore.simulator.testing.random_graphs import KINDS, random_sketch
from chiplore.simulator.testing.sketch import PackSketch, Param

__all__ = ["KINDS", "PackBuild", "PackSketch", "Param", "build_pack", "random_pack", "random_sketch"]
