"""Seeded fixture sets of the three harness kernels (SIMULATOR.md 6.3), written as fixture recipes.

Nine sets per kernel: g0..g6 (graded), `exact` (the normalised activation is exactly representable)
and `cancel` (block-alternating activation offsets and row offsets that cancel over every 512-wide
partial sum, so bf16 accumulation of narrow partials shows). Every tensor is regenerated from its own
seed, sha256(f"{kernel}/{set}/{tensor}"), so nothing is stored.

Weights are row-periodic, W[r] == W[r mod 509] (509 is prime, so no tiling or layout bug can hide
behind the period), and are kept as their 509 distinct rows: full shapes stay cheap.

The recipes are data (`recipe.FixtureRecipe`), as a kernel pack's would be; they draw the same bytes
the hand-written generators of earlier versions did, so graded results do not move.
"""

from __future__ import annotations

from functools import cache, lru_cache

import numpy as np

from simulator.execute.recipe import FixtureRecipe, draw_inputs
from simulator.execute.signature import KernelSignature, kernel_signature
from simulator.execute.values import InputValue, Periodic, RopeTable
from simulator.toolchain.harness import BASELINES, HARNESS_KERNELS

PERIOD = 509
SETS = (*(f"g{i}" for i in range(7)), "exact", "cancel")
POSITION = 137  # kv_pos and rope_pos
GLOBAL_SCALES = {"up_global_scale": 1 / 9600, "gate_global_scale": 1 / 9600, "down_global_scale": 1 / 12928}
LAYER_SCALAR = 0.375
CANCEL_C = 16.0  # activation offset per 256-wide block of the reduction axis
CANCEL_D = 200.0  # weight row offset
BLOCK = 256

Value = InputValue
Fixture = dict[str, InputValue]

_CANCEL_BLOCKS = {"cancel": {"block_offsets": {"magnitude": CANCEL_C, "block": BLOCK}}}


def _uniform(low: float, high: float, **more: object) -> dict[str, object]:
    return {"dist": {"kind": "uniform", "low": low, "high": high}, **more}


def _activation(dist: dict[str, object], exact: dict[str, object]) -> dict[str, object]:
    """The kernel's activation: `exact` makes its normalised value representable, `cancel` adds
    block offsets that cancel over every 512-wide partial sum."""
    return {"dist": dist, "sets": {"exact": exact, **_CANCEL_BLOCKS}}


def _f8_matrix() -> dict[str, object]:
    """f8 codes, exponents 7..14; `cancel`: a narrow band (7..10) with +-200 row offsets, re-encoded."""
    cancel = {"dist": {"kind": "f8_codes", "exponent_low": 7, "exponent_high": 10}, "row_offsets": CANCEL_D}
    return {"dist": {"kind": "f8_codes"}, "distinct_rows": PERIOD, "sets": {"cancel": cancel}}


def _constant(value: float) -> dict[str, object]:
    return {"dist": {"kind": "constant", "value": value}}


ROW_SCALE = _uniform(0.0, 1e-3, distinct_rows=PERIOD)
F4_WEIGHT = {"dist": {"kind": "f4_codes"}, "distinct_rows": PERIOD}
BLOCK_SCALE = {"dist": {"kind": "f8_codes", "exponent_low": 8, "exponent_high": 10, "signed": False},
               "distinct_rows": PERIOD}  # fmt: skip
SIGNS = {"kind": "signs"}

RECIPES: dict[str, FixtureRecipe] = {
    "sliding_project_qkv": FixtureRecipe.model_validate({"inputs": {
        "x": _activation(SIGNS, {"divide_by": "input_rms_weight"}),
        "q_weight": _f8_matrix(), "k_weight": _f8_matrix(), "v_weight": _f8_matrix(),
        "q_weight_scale": ROW_SCALE, "k_weight_scale": ROW_SCALE, "v_weight_scale": ROW_SCALE,
        "input_rms_weight": _uniform(0.75, 1.25),
        "q_rms_weight": _uniform(0.0, 1.0), "k_rms_weight": _uniform(0.0, 1.0),
        "kv_pos": {"dist": {"kind": "position", "value": POSITION}},
        "rope_pos": {"dist": {"kind": "position", "value": POSITION}},
        "cos": {"dist": {"kind": "rope", "part": "cos"}},
        "sin": {"dist": {"kind": "rope", "part": "sin", "negate_low_half": True}},
        "k_cache": _uniform(-1.0, 1.0), "v_cache": _uniform(-1.0, 1.0), "q_out": _uniform(-1.0, 1.0),
    }}),
    "sliding_attention_output": FixtureRecipe.model_validate({"inputs": {
        "x": _activation({"kind": "uniform", "low": -0.5, "high": 0.5}, {"dist": {"kind": "signs", "magnitude": 0.25}}),
        "post_attn_rms_weight": _uniform(0.0, 1.0),
        "o_weight": _f8_matrix(),
        "o_weight_scale": ROW_SCALE,
        "residual": _uniform(0.0, 1.0),
    }}),
    "decoder_feedforward": FixtureRecipe.model_validate({"inputs": {
        "residual": _activation({"kind": "uniform", "low": 0.0, "high": 1.0},
                                {"dist": SIGNS, "divide_by": "pre_ff_rms_weight"}),
        "pre_ff_rms_weight": _uniform(0.75, 1.25),
        "up_weight_packed": F4_WEIGHT, "gate_weight_packed": F4_WEIGHT, "down_weight_packed": F4_WEIGHT,
        "up_weight_scale": BLOCK_SCALE, "gate_weight_scale": BLOCK_SCALE, "down_weight_scale": BLOCK_SCALE,
        "post_ff_rms_weight": _uniform(0.0, 1.0),
        "layer_scalar": _constant(LAYER_SCALAR),
        **{name: _constant(value) for name, value in GLOBAL_SCALES.items()},
    }}),
}  # fmt: skip


@cache
def harness_signature(kernel: str) -> KernelSignature:
    """The signature the harness passes to `kernel`: its official baseline's."""
    if kernel not in HARNESS_KERNELS:
        raise KeyError(f"no fixtures for kernel {kernel!r}")
    return kernel_signature((BASELINES / HARNESS_KERNELS[kernel]).read_text())


def fixture(kernel: str, fixture_set: str) -> Fixture:
    """All inputs of one harness kernel for one set (HBM outputs start as these contents)."""
    if fixture_set not in SETS:
        raise KeyError(f"unknown fixture set {fixture_set!r}; sets are {', '.join(SETS)}")
    if kernel not in RECIPES:
        raise KeyError(f"no fixtures for kernel {kernel!r}")
    return dict(_cached(kernel, fixture_set))


@lru_cache(maxsize=32)
def _cached(kernel: str, fixture_set: str) -> tuple[tuple[str, InputValue], ...]:
    values = draw_inputs(RECIPES[kernel], harness_signature(kernel), fixture_set, seed=kernel)
    for value in values.values():  # shared between callers: nobody may write into them
        if isinstance(value, Periodic):
            value.distinct.setflags(write=False)
        elif isinstance(value, np.ndarray):
            value.setflags(write=False)
    return tuple(values.items())


__all__ = ["PERIOD", "POSITION", "SETS", "Fixture", "Periodic", "RopeTable", "Value", "fixture", "harness_signature"]
