"""Helpers shared by several test modules (no test module imports another)."""

from __future__ import annotations

from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.knowledge import Knowledge
from chiplore.agents.proposers import KernelView
from chiplore.core.target import Target

# The environment of a command-line run whose architect prices a few designs per proposal, not the default
# 192: for tests of plumbing (roles, packs, concurrency, resume, the demo), where the search is not tested.
QUICK_SEARCH = {"CHIPLORE_SEARCH_PREDICTIONS": "16"}


def kernel_view(target: Target, kernel: str, version: str, knowledge: Knowledge | None = None) -> KernelView:
    """What a proposer sees of a kernel with the given knowledge (none: the pack's defaults)."""
    pack = target.pack()
    spec = next(k for k in target.kernels() if k.name == kernel)
    return KernelView(spec=spec, version=version, knowledge=knowledge or Knowledge(version, {}),
                      space=pack.design_space(spec), model=CalibratedCostModel(pack.cost_model), seed=0)  # fmt: skip
