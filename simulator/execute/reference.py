"""numpy references of the built-in kernels (docs/simrngd.md §9.1), and the helpers a pack's `reference.py`
may use: each pack's `reference(inputs) -> outputs` lives in its folder (simulator/kernels/packs/).

Projections are computed on the distinct weight rows and gathered (`project`), so the full shapes
cost what the distinct rows cost. Accumulation is exact enough (f64) that the reference is the ideal
the device approximates; the tolerances say how close it has to be. Outputs come in the shapes of
their parameters.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from chiplore.core.target import Correctness
from chiplore.simulator.execute.criterion import grade_outputs
from chiplore.simulator.execute.fixtures import Periodic, fixture
from chiplore.simulator.execute.numerics import bf16, f4_unpack, f8_decode

if TYPE_CHECKING:
    from chiplore.simulator.kernels.pack import KernelPack

HEAD = 256  # the head width of the Gemma kernels (`rmsnorm_heads`, `rot`)
EPS = 1e-6
Outputs = dict[str, np.ndarray]


def rmsnorm(v: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    v32 = v.astype(np.float32)
    normed = v32 / np.sqrt(np.mean(v32.astype(np.float64) ** 2) + EPS).astype(np.float32)
    return bf16(normed * w.astype(np.float32) if w is not None else normed)


def rmsnorm_heads(v: np.ndarray, w: np.ndarray | None = None, head: int = HEAD) -> np.ndarray:
    """`rmsnorm` of each contiguous block of `head` elements (the same weight for every block)."""
    heads = v.reshape(-1, head)
    return np.concatenate([rmsnorm(h, w) for h in heads])


def rot(v: np.ndarray, head: int = HEAD) -> np.ndarray:
    """Per head, (-upper half, lower half): what RoPE multiplies by the sine."""
    heads = v.reshape(-1, head)
    half = head // 2
    return np.concatenate([-heads[:, half:], heads[:, :half]], axis=1).reshape(-1)


def gelu(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + np.tanh(0.79788456 * (x64 + 0.044715 * x64**3)))).astype(np.float32)


def project(weights: Periodic, values: np.ndarray, activation: np.ndarray) -> np.ndarray:
    """Row r of (W @ activation), computed once per distinct row: values(distinct) decodes the rows."""
    per_row = values(weights.distinct).astype(np.float64) @ activation.astype(np.float64)
    return per_row.astype(np.float32)[weights.row_ids]


def f4_with_block_scales(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """W = f4 code * repeat(f8 block scale, 16) on distinct rows."""
    return f4_unpack(codes) * np.repeat(f8_decode(scales), 16, axis=1)


def reference(kernel: str, fixture_set: str) -> Outputs:
    """A built-in kernel's expected outputs on one of its fixture sets (cached, read-only)."""
    return dict(_reference(kernel, fixture_set))


@lru_cache(maxsize=32)
def _reference(kernel: str, fixture_set: str) -> tuple[tuple[str, np.ndarray], ...]:
    outputs = _packs()[kernel].reference(fixture(kernel, fixture_set))
    for value in outputs.values():
        value.setflags(write=False)
    return tuple(outputs.items())


def grade(kernel: str, outputs_by_set: dict[str, Outputs]) -> Correctness:
    """The official criterion of a built-in kernel on every set (see `criterion.grade_outputs`)."""
    pack = _packs()[kernel]
    expected = {fixture_set: reference(kernel, fixture_set) for fixture_set in outputs_by_set}
    return grade_outputs(outputs_by_set, expected, pack.manifest.atol, pack.manifest.rtol, pack.manifest.graded)


def _packs() -> dict[str, KernelPack]:
    from chiplore.simulator.kernels.builtin import builtin_packs  # the packs' references import this module

    return builtin_packs()


def __getattr__(name: str) -> object:
    """`REFERENCES` and `TOLERANCES` (atol, rtol) of the built-in kernels, read from their packs."""
    if name == "REFERENCES":
        return {kernel: pack.reference for kernel, pack in _packs().items()}
    if name == "TOLERANCES":
        return {kernel: (pack.manifest.atol, pack.manifest.rtol) for kernel, pack in _packs().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
