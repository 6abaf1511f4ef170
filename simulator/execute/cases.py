"""A kernel the executor can grade: its signature, how its inputs are drawn, its numpy reference and
its tolerances. Every kernel pack makes one (`chiplore.simulator.kernels.pack.KernelPack.case`); the built-in
kernels' are `harness_case`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.signature import KernelSignature
from chiplore.simulator.execute.values import Inputs, Outputs

Reference = Callable[[Inputs], Outputs]


@dataclass(frozen=True, eq=False)
class KernelCase:
    """Everything grading needs about one kernel.

    `reference(inputs) -> outputs` receives the inputs `draw_inputs` made (codes as codes, periodic
    weights as `Periodic`) and returns the expected value of every graded output; `graded` names the
    outputs that count (default: all the reference returns). `key` identifies the case in caches:
    two cases with one key must grade identically (a pack's name and content digest, say)."""

    name: str
    signature: KernelSignature
    recipe: FixtureRecipe
    reference: Reference
    atol: float
    rtol: float
    graded: tuple[str, ...] | None = None
    seed: str | None = None  # the fixtures' seed (default: the kernel's name)
    key: str | None = None

    @property
    def cache_key(self) -> str:
        return self.key or self.name

    def __hash__(self) -> int:
        return hash(self.cache_key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelCase) and other.cache_key == self.cache_key

    @property
    def fixture_seed(self) -> str:
        return self.seed or self.name


def harness_case(kernel: str) -> KernelCase:
    """A built-in kernel as a case (a KeyError for any other name)."""
    from chiplore.simulator.kernels.builtin import builtin_pack  # the packs build their cases from this module

    return builtin_pack(kernel).case
