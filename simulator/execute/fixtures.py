"""Seeded fixture sets of the three kernels (SIMULATOR.md 6.3).

Nine sets per kernel: g0..g6 (graded), `exact` (the normalised activation is exactly representable)
and `cancel` (block-alternating activation offsets and row offsets that cancel over every 512-wide
partial sum, so bf16 accumulation of narrow partials shows). Every tensor is regenerated from its own
seed, sha256(f"{kernel}/{set}/{tensor}"), so nothing is stored.

Weights are row-periodic, W[r] == W[r mod 509] (509 is prime, so no tiling or layout bug can hide
behind the period), and are kept as their 509 distinct rows: full shapes stay cheap.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.execute.numerics import bf16, f8_encode

PERIOD = 509
SETS = (*(f"g{i}" for i in range(7)), "exact", "cancel")
POSITION = 137  # kv_pos and rope_pos
ROPE_THETA = 10_000.0
GLOBAL_SCALES = {"up_global_scale": 1 / 9600, "gate_global_scale": 1 / 9600, "down_global_scale": 1 / 12928}
LAYER_SCALAR = 0.375
CANCEL_C = 16.0  # activation offset per 256-wide block of the reduction axis
CANCEL_D = 200.0  # weight row offset
BLOCK = 256

Axes = dict[str, int]


@dataclass(frozen=True)
class Periodic:
    """A weight tensor whose rows repeat with PERIOD: `distinct` holds rows 0..508 (codes or values)."""

    distinct: np.ndarray
    rows: int

    @property
    def row_ids(self) -> np.ndarray:
        return np.arange(self.rows) % PERIOD

    def dense(self) -> np.ndarray:
        return self.distinct[self.row_ids]


Value = np.ndarray | Periodic  # or a RopeTable
Fixture = dict[str, Value]


def rng_for(kernel: str, fixture_set: str, tensor: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{kernel}/{fixture_set}/{tensor}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "big")))


def fixture(kernel: str, fixture_set: str) -> Fixture:
    """All inputs of one kernel for one set (HBM outputs start as these contents)."""
    if fixture_set not in SETS:
        raise KeyError(f"unknown fixture set {fixture_set!r}; sets are {', '.join(SETS)}")
    builders = {"sliding_project_qkv": _qkv, "sliding_attention_output": _o, "decoder_feedforward": _ffn}
    if kernel not in builders:
        raise KeyError(f"no fixtures for kernel {kernel!r}")
    return dict(_cached(kernel, fixture_set, builders[kernel]))


@lru_cache(maxsize=32)
def _cached(kernel: str, fixture_set: str, build: object) -> tuple[tuple[str, Value], ...]:
    values = build(kernel, fixture_set)  # type: ignore[operator]
    for value in values.values():  # shared between callers: nobody may write into them
        if isinstance(value, Periodic):
            value.distinct.setflags(write=False)
        elif isinstance(value, np.ndarray):
            value.setflags(write=False)
    return tuple(values.items())


# ---- distributions (the official generator's) ---------------------------------------------------


def _uniform_bf16(rng: np.random.Generator, low: float, high: float, size: int | tuple[int, ...]) -> np.ndarray:
    return bf16(rng.uniform(low, high, size).astype(np.float32))


def _signs(rng: np.random.Generator, size: int) -> np.ndarray:
    return np.where(rng.random(size) < 0.5, -1.0, 1.0).astype(np.float32)


def _f8_codes(
    rng: np.random.Generator, shape: tuple[int, ...], low: int = 7, high: int = 14, signed: bool = True
) -> np.ndarray:
    exponent = rng.integers(low, high + 1, size=shape, dtype=np.uint8)
    mantissa = rng.integers(0, 8, size=shape, dtype=np.uint8)
    sign = (rng.random(shape) < 0.5).astype(np.uint8) if signed else np.zeros(shape, dtype=np.uint8)
    return (sign << 7) | (exponent << 3) | mantissa


def _row_scale(rng: np.random.Generator, rows: int) -> Periodic:
    return Periodic(_uniform_bf16(rng, 0.0, 1e-3, PERIOD), rows)


def _f8_matrix(kernel: str, fixture_set: str, name: str, rows: int, cols: int) -> Periodic:
    rng = rng_for(kernel, fixture_set, name)
    if fixture_set != "cancel":
        return Periodic(_f8_codes(rng, (PERIOD, cols)), rows)
    # Row offsets +-d on a narrow base band, re-quantised: every 512-wide partial cancels them.
    base = _f8_codes(rng, (PERIOD, cols), low=7, high=10)
    from simulator.execute.numerics import f8_decode

    offset = CANCEL_D * _signs(rng, PERIOD)[:, None]
    return Periodic(f8_encode(f8_decode(base) + offset), rows)


def _block_offsets(length: int) -> np.ndarray:
    """+c, -c, +c, ... per 256-wide block."""
    blocks = np.where(np.arange(math.ceil(length / BLOCK)) % 2 == 0, CANCEL_C, -CANCEL_C)
    return np.repeat(blocks, BLOCK)[:length].astype(np.float32)


def _activation(kernel: str, fixture_set: str, name: str, length: int, low: float, high: float,
                norm_weight: np.ndarray | None) -> np.ndarray:  # fmt: skip
    rng = rng_for(kernel, fixture_set, name)
    if fixture_set == "exact":
        signs = _signs(rng, length)
        return bf16(signs / norm_weight) if norm_weight is not None else bf16(signs * 0.25)
    if kernel == "sliding_project_qkv":
        values = _signs(rng, length)  # bf16 signs
    else:
        values = rng.uniform(low, high, length).astype(np.float32)
    if fixture_set == "cancel":
        values = values + _block_offsets(length)
    return bf16(values)


@dataclass(frozen=True)
class RopeTable:
    """cos or sin (bf16) of every position x frequency, computed a row at a time: a kernel reads one
    row (`cos.at(E = rope_pos)`), so the 32,768-row table is never materialised unless asked for.
    The sin parameter has its low half negated."""

    positions: int
    width: int
    kind: str  # "cos" | "sin"

    @property
    def shape(self) -> tuple[int, int]:
        return (self.positions, self.width)

    def __getitem__(self, position: int) -> np.ndarray:
        return self.rows(np.array([position]))[0]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        half = self.width // 2
        frequencies = ROPE_THETA ** (-np.arange(half, dtype=np.float64) * 2 / self.width)
        angles = positions.astype(np.float64)[:, None] * np.concatenate([frequencies, frequencies])[None, :]
        if self.kind == "cos":
            return bf16(np.cos(angles).astype(np.float32))
        values = bf16(np.sin(angles).astype(np.float32))
        values[:, :half] = -values[:, :half]
        return values

    def dense(self) -> np.ndarray:
        return self.rows(np.arange(self.positions))


# ---- the kernels ---------------------------------------------------------------------------------


def _qkv(kernel: str, fixture_set: str) -> Fixture:
    H, Qs, Ps, Ds, Ts, E = 3840, 4096, 2048, 256, 1024, 32768
    r = lambda name: rng_for(kernel, fixture_set, name)  # noqa: E731
    w_in = _uniform_bf16(r("input_rms_weight"), 0.75, 1.25, H)
    return {
        "x": _activation(kernel, fixture_set, "x", H, -1, 1, w_in),
        "q_weight": _f8_matrix(kernel, fixture_set, "q_weight", Qs, H),
        "k_weight": _f8_matrix(kernel, fixture_set, "k_weight", Ps, H),
        "v_weight": _f8_matrix(kernel, fixture_set, "v_weight", Ps, H),
        "q_weight_scale": _row_scale(r("q_weight_scale"), Qs),
        "k_weight_scale": _row_scale(r("k_weight_scale"), Ps),
        "v_weight_scale": _row_scale(r("v_weight_scale"), Ps),
        "input_rms_weight": w_in,
        "q_rms_weight": _uniform_bf16(r("q_rms_weight"), 0.0, 1.0, Ds),
        "k_rms_weight": _uniform_bf16(r("k_rms_weight"), 0.0, 1.0, Ds),
        "kv_pos": np.array([POSITION], dtype=np.int32),
        "rope_pos": np.array([POSITION], dtype=np.int32),
        "cos": RopeTable(E, Ds, "cos"),  # type: ignore[dict-item]
        "sin": RopeTable(E, Ds, "sin"),  # type: ignore[dict-item]
        "k_cache": _uniform_bf16(r("k_cache"), -1.0, 1.0, (Ts, 8 * Ds)),
        "v_cache": _uniform_bf16(r("v_cache"), -1.0, 1.0, (Ts, 8 * Ds)),
        "q_out": _uniform_bf16(r("q_out"), -1.0, 1.0, Qs),
    }


def _o(kernel: str, fixture_set: str) -> Fixture:
    H, Qs = 3840, 4096
    r = lambda name: rng_for(kernel, fixture_set, name)  # noqa: E731
    return {
        "x": _activation(kernel, fixture_set, "x", Qs, -0.5, 0.5, None),
        "post_attn_rms_weight": _uniform_bf16(r("post_attn_rms_weight"), 0.0, 1.0, H),
        "o_weight": _f8_matrix(kernel, fixture_set, "o_weight", H, Qs),
        "o_weight_scale": _row_scale(r("o_weight_scale"), H),
        "residual": _uniform_bf16(r("residual"), 0.0, 1.0, H),
    }


def _ffn(kernel: str, fixture_set: str) -> Fixture:
    H, L = 3840, 15360
    r = lambda name: rng_for(kernel, fixture_set, name)  # noqa: E731
    w_pre = _uniform_bf16(r("pre_ff_rms_weight"), 0.75, 1.25, H)

    def packed(name: str, rows: int, cols: int) -> Periodic:
        return Periodic(r(name).integers(0, 256, size=(PERIOD, cols // 2), dtype=np.uint8), rows)

    def block_scale(name: str, rows: int, cols: int) -> Periodic:
        return Periodic(_f8_codes(r(name), (PERIOD, cols // 16), low=8, high=10, signed=False), rows)

    out: Fixture = {
        "residual": _activation(kernel, fixture_set, "residual", H, 0.0, 1.0, w_pre),
        "pre_ff_rms_weight": w_pre,
        "up_weight_packed": packed("up_weight_packed", L, H),
        "gate_weight_packed": packed("gate_weight_packed", L, H),
        "down_weight_packed": packed("down_weight_packed", H, L),
        "up_weight_scale": block_scale("up_weight_scale", L, H),
        "gate_weight_scale": block_scale("gate_weight_scale", L, H),
        "down_weight_scale": block_scale("down_weight_scale", H, L),
        "post_ff_rms_weight": _uniform_bf16(r("post_ff_rms_weight"), 0.0, 1.0, H),
        "layer_scalar": np.array([LAYER_SCALAR], dtype=np.float32),
    }
    for name, value in GLOBAL_SCALES.items():
        out[name] = np.array([value], dtype=np.float32)
    return out
