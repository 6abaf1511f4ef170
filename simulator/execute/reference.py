"""numpy references of the three harness kernels (SIMULATOR.md 6.2): functions from inputs to outputs.

Projections are computed on the 509 distinct weight rows and gathered, so the full shapes cost
what a 509-row matrix costs. Accumulation is exact enough (f64) that the reference is the ideal
the device approximates; the tolerances say how close it has to be. Outputs come in the shapes of
their parameters.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from chiplore.core.target import Correctness
from simulator.execute.criterion import grade_outputs
from simulator.execute.fixtures import Fixture, Periodic, fixture
from simulator.execute.numerics import bf16, f4_unpack, f8_decode

HEAD = 256
EPS = 1e-6
TOLERANCES = {  # (atol, rtol)
    "sliding_project_qkv": (0.04, 1e-2),
    "sliding_attention_output": (0.05, 1e-2),
    "decoder_feedforward": (0.01, 1e-2),
}
Outputs = dict[str, np.ndarray]


def rmsnorm(v: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    v32 = v.astype(np.float32)
    normed = v32 / np.sqrt(np.mean(v32.astype(np.float64) ** 2) + EPS).astype(np.float32)
    return bf16(normed * w.astype(np.float32) if w is not None else normed)


def rmsnorm_heads(v: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    heads = v.reshape(-1, HEAD)
    return np.concatenate([rmsnorm(h, w) for h in heads])


def rot(v: np.ndarray) -> np.ndarray:
    heads = v.reshape(-1, HEAD)
    half = HEAD // 2
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
    return dict(_reference(kernel, fixture_set))


@lru_cache(maxsize=32)
def _reference(kernel: str, fixture_set: str) -> tuple[tuple[str, np.ndarray], ...]:
    outputs = REFERENCES[kernel](fixture(kernel, fixture_set))
    for value in outputs.values():
        value.setflags(write=False)
    return tuple(outputs.items())


def _scale(p: Periodic) -> np.ndarray:
    return p.dense().astype(np.float32)


def _flat(value: object) -> np.ndarray:
    return np.asarray(value).reshape(-1)


def _qkv(f: Fixture) -> Outputs:
    h = rmsnorm(_flat(f["x"]), f["input_rms_weight"])  # type: ignore[arg-type]
    out: dict[str, np.ndarray] = {}
    for name in ("q", "k", "v"):
        weights = f[f"{name}_weight"]
        assert isinstance(weights, Periodic)
        out[name] = bf16(project(weights, f8_decode, h) * _scale(f[f"{name}_weight_scale"]))  # type: ignore[arg-type]
    q = rmsnorm_heads(out["q"], f["q_rms_weight"])  # type: ignore[arg-type]
    k = rmsnorm_heads(out["k"], f["k_rms_weight"])  # type: ignore[arg-type]
    v = rmsnorm_heads(out["v"])
    position = int(_flat(f["rope_pos"])[0])
    cos = np.tile(f["cos"][position], 1)  # type: ignore[index]
    sin_param = np.asarray(f["sin"][position])  # type: ignore[index]
    sin = np.concatenate([-sin_param[: HEAD // 2], sin_param[HEAD // 2 :]])  # the true sin

    def rope(t: np.ndarray) -> np.ndarray:
        heads = t.size // HEAD
        return bf16(t * np.tile(cos, heads) + rot(t) * np.tile(sin, heads))

    row = int(_flat(f["kv_pos"])[0])
    shape = np.shape(f["k_cache"])  # type: ignore[arg-type]
    k_cache, v_cache = np.array(f["k_cache"]).reshape(shape[0], -1), np.array(f["v_cache"]).reshape(shape[0], -1)
    k_cache[row], v_cache[row] = rope(k), v
    q_out = rope(q).reshape(np.shape(f["q_out"]))  # type: ignore[arg-type]
    return {"q_out": q_out, "k_cache": k_cache.reshape(shape), "v_cache": v_cache.reshape(shape)}


def _o(f: Fixture) -> Outputs:
    weights = f["o_weight"]
    assert isinstance(weights, Periodic)
    y = bf16(project(weights, f8_decode, _flat(f["x"])) * _scale(f["o_weight_scale"]))  # type: ignore[arg-type]
    return {"residual": bf16(f["residual"] + rmsnorm(y, f["post_attn_rms_weight"]))}  # type: ignore[operator,arg-type]


def _ffn(f: Fixture) -> Outputs:
    h = rmsnorm(f["residual"], f["pre_ff_rms_weight"])  # type: ignore[arg-type]

    def matrix(name: str) -> Periodic:
        codes, scales = f[f"{name}_weight_packed"], f[f"{name}_weight_scale"]
        assert isinstance(codes, Periodic) and isinstance(scales, Periodic)
        return Periodic(f4_with_block_scales(codes.distinct, scales.distinct), codes.rows)

    identity = lambda rows: rows  # noqa: E731 - the block-scaled rows are already values
    u = bf16(project(matrix("up"), identity, h) * f["up_global_scale"][0])  # type: ignore[index]
    g = bf16(project(matrix("gate"), identity, h) * f["gate_global_scale"][0])  # type: ignore[index]
    a = bf16(gelu(g) * u)
    d = bf16(project(matrix("down"), identity, a) * f["down_global_scale"][0])  # type: ignore[index]
    summed = bf16(f["residual"] + rmsnorm(d, f["post_ff_rms_weight"]))  # type: ignore[operator,arg-type]
    return {"residual": bf16(summed * f["layer_scalar"][0])}  # type: ignore[index]


REFERENCES = {"sliding_project_qkv": _qkv, "sliding_attention_output": _o, "decoder_feedforward": _ffn}


def grade(kernel: str, outputs_by_set: dict[str, Outputs]) -> Correctness:
    """The official criterion of a harness kernel on every set (see `criterion.grade_outputs`)."""
    atol, rtol = TOLERANCES[kernel]
    expected = {fixture_set: reference(kernel, fixture_set) for fixture_set in outputs_by_set}
    return grade_outputs(outputs_by_set, expected, atol, rtol)
