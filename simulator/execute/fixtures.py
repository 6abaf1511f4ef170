"""Seeded fixture sets of the built-in kernels (docs/simrngd.md §9.2): their packs' fixture recipes, drawn.

Nine sets per kernel: g0..g6 (graded), `exact` (the normalised activation is exactly representable)
and `cancel` (block-alternating activation offsets and row offsets that cancel over every 512-wide
partial sum, so bf16 accumulation of narrow partials shows). Every tensor is regenerated from its own
seed, sha256(f"{kernel}/{set}/{tensor}"), so nothing is stored.

Weights are row-periodic, W[r] == W[r mod 509] (509 is prime, so no tiling or layout bug can hide
behind the period), and are kept as their 509 distinct rows: full shapes stay cheap.

The recipes are data: each pack's `kernel.toml` holds one (`[fixtures]`, a `recipe.FixtureRecipe`).
The Gemma kernels' draw the same bytes the hand-written generators of earlier versions did, so graded
results do not move.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from chiplore.simulator.execute.recipe import FixtureRecipe, draw_inputs
from chiplore.simulator.execute.signature import KernelSignature
from chiplore.simulator.execute.values import InputValue, Periodic, RopeTable

PERIOD = 509  # the distinct rows of the Gemma kernels' weights
SETS = (*(f"g{i}" for i in range(7)), "exact", "cancel")
POSITION = 137  # kv_pos and rope_pos of sliding_project_qkv

Value = InputValue
Fixture = dict[str, InputValue]


def recipes() -> dict[str, FixtureRecipe]:
    """Each built-in kernel's fixture recipe, as its pack's `kernel.toml` declares it."""
    from chiplore.simulator.kernels.builtin import builtin_packs  # the packs' loader grades through this module

    return {name: pack.manifest.fixtures for name, pack in builtin_packs().items()}


def harness_signature(kernel: str) -> KernelSignature:
    """The signature the harness passes to a built-in kernel: its baseline's (a KeyError for another)."""
    from chiplore.simulator.kernels.builtin import builtin_packs

    pack = builtin_packs().get(kernel)
    if pack is None:
        raise KeyError(f"no fixtures for kernel {kernel!r}")
    return pack.signature


def __getattr__(name: str) -> object:
    if name == "RECIPES":  # read from the packs on first use: they import this module's neighbours
        return recipes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fixture(kernel: str, fixture_set: str) -> Fixture:
    """All inputs of one built-in kernel for one set (HBM outputs start as these contents)."""
    if fixture_set not in SETS:
        raise KeyError(f"unknown fixture set {fixture_set!r}; sets are {', '.join(SETS)}")
    if kernel not in recipes():
        raise KeyError(f"no fixtures for kernel {kernel!r}")
    return dict(_cached(kernel, fixture_set))


@lru_cache(maxsize=32)
def _cached(kernel: str, fixture_set: str) -> tuple[tuple[str, InputValue], ...]:
    values = draw_inputs(recipes()[kernel], harness_signature(kernel), fixture_set, seed=kernel)
    for value in values.values():  # shared between callers: nobody may write into them
        if isinstance(value, Periodic):
            value.distinct.setflags(write=False)
        elif isinstance(value, np.ndarray):
            value.setflags(write=False)
    return tuple(values.items())


__all__ = ["PERIOD", "POSITION", "SETS", "Fixture", "Periodic", "RopeTable", "Value", "fixture", "harness_signature"]
