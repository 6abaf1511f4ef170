"""A generated program: its Ferrite source, how to draw its inputs, and what it means in numpy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from chiplore.simulator.execute.numerics import bf16, f8
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.values import Inputs, Outputs, Periodic

Meaning = Callable[[Inputs], Outputs]
VERSIONS = ("0.5.0", "0.6.0", "0.7.0")


@dataclass(frozen=True)
class Generated:
    """One program of the differential tester. `meaning` is the numpy interpretation (None when the
    program has none, as a mutant); `recipe` draws its inputs (None: the compiler is its only judge);
    `features` names the constructs it uses, for the report."""

    family: str
    seed: int
    version: str
    source: str
    recipe: FixtureRecipe | None  # None: checked only (a full-size shipped kernel)
    meaning: Meaning | None
    features: tuple[str, ...] = ()


def widen(version: str) -> str:
    return "widen" if version == "0.7.0" else "cast"


def narrow(version: str) -> str:
    return "narrow" if version == "0.7.0" else "cast"


def header(version: str, axes: dict[str, int]) -> str:
    listed = ", ".join(f"{name} = {size}" for name, size in axes.items())
    return f'#![toolchain = "{version}"]\naxes! {{ {listed} }}\n'


def engines(rng_choice: Callable[[list[str]], str]) -> str:
    return rng_choice(["[0]", "[1]", "[0, 1]", "[0, 1, 2, 3]", "[2]", "[0, 4]"])


def stored(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values as a tensor of `dtype` holds them (what a commit or a DMA into it keeps)."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "bf16":
        return bf16(values)
    if dtype == "f8e4m3":
        return f8(values)
    return values


def dense(value: object) -> np.ndarray:
    return value.dense() if isinstance(value, Periodic) else np.asarray(value)
