"""Kernels to try the generator on: the three Gemma kernels with their op graphs, and three kernels
the generator was not written for, each with a signature, fixture recipe, numpy reference and
tolerances (what a kernel pack declares), so their programs can be graded on the host.

- `ex_swiglu_feedforward`: SwiGLU at Llama-3-8B sizes (H 4096, L 14336), f8 weights with row scales.
- `ex_lm_head`: a vocabulary projection (128,256 rows x 2,048), f8 with row scales, after the final norm.
- `ex_gqa_project_qkv`: 32 query and 8 key/value heads of 128, bf16 weights, per-head norms on q and k
  only, no RoPE (so the input norm stays: v is not renormalised).
Used by the tests and `benchmarks/generator.py`; nothing in the generator reads this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from chiplore.core.ops import OpGraph
from chiplore.core.target import KernelSpec
from chiplore.simulator.cost.bound import weight_bound_cycles
from chiplore.simulator.execute.cases import KernelCase, harness_case
from chiplore.simulator.execute.numerics import bf16, f8_decode
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.reference import EPS, project, rmsnorm
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.execute.values import Inputs, Outputs, Periodic
from chiplore.simulator.kernel_specs import kernel_spec

PERIOD = 509

GEMMA = {
    "sliding_attention_output": [
        {"op": "matvec", "input": "x", "weight": "o_weight", "scale": "o_weight_scale", "scale_kind": "row",
         "out": "y"},
        {"op": "rms_norm", "input": "y", "weight": "post_attn_rms_weight", "out": "yn"},
        {"op": "add", "a": "residual", "b": "yn", "out": "r"},
        {"op": "store", "input": "r", "to": "residual"},
    ],
    "sliding_project_qkv": [
        {"op": "rms_norm", "input": "x", "weight": "input_rms_weight", "out": "h"},
        *({"op": "matvec", "input": "h", "weight": f"{n}_weight", "scale": f"{n}_weight_scale", "scale_kind": "row",
           "out": n} for n in "qkv"),
        {"op": "head_norm", "input": "q", "head_dim": 256, "weight": "q_rms_weight", "out": "qn"},
        {"op": "head_norm", "input": "k", "head_dim": 256, "weight": "k_rms_weight", "out": "kn"},
        {"op": "head_norm", "input": "v", "head_dim": 256, "out": "vn"},
        {"op": "rope", "input": "qn", "cos": "cos", "sin": "sin", "position": "rope_pos", "head_dim": 256, "out": "qr"},
        {"op": "rope", "input": "kn", "cos": "cos", "sin": "sin", "position": "rope_pos", "head_dim": 256, "out": "kr"},
        {"op": "store", "input": "qr", "to": "q_out"},
        {"op": "cache_write", "input": "kr", "cache": "k_cache", "position": "kv_pos"},
        {"op": "cache_write", "input": "vn", "cache": "v_cache", "position": "kv_pos"},
    ],
    "decoder_feedforward": [
        {"op": "rms_norm", "input": "residual", "weight": "pre_ff_rms_weight", "out": "h"},
        *({"op": "matvec", "input": "h", "weight": f"{n}_weight_packed", "scale": f"{n}_weight_scale",
           "scale_kind": "block", "block": 16, "global_scale": f"{n}_global_scale", "out": n} for n in ("up", "gate")),
        {"op": "gelu_tanh", "input": "gate", "out": "g"},
        {"op": "mul", "a": "g", "b": "up", "out": "a"},
        {"op": "matvec", "input": "a", "weight": "down_weight_packed", "scale": "down_weight_scale",
         "scale_kind": "block", "block": 16, "global_scale": "down_global_scale", "out": "d"},
        {"op": "rms_norm", "input": "d", "weight": "post_ff_rms_weight", "out": "dn"},
        {"op": "add", "a": "residual", "b": "dn", "out": "s"},
        {"op": "mul", "a": "s", "b": "layer_scalar", "out": "o"},
        {"op": "store", "input": "o", "to": "residual"},
    ],
}  # fmt: skip


@dataclass(frozen=True)
class Example:
    """A kernel as a pack would declare it: its spec (signature, op graph, bound) and its case."""

    spec: KernelSpec
    case: KernelCase


def gemma(name: str) -> Example:
    """A harness kernel with its op graph."""
    spec = kernel_spec(name).model_copy(update={"ops": OpGraph.model_validate({"ops": GEMMA[name]})})
    return Example(spec, harness_case(name))


# ---- kernels the generator was not written for ----------------------------------------------------

LLAMA_FFN = """#![toolchain = "0.6.0"]
axes! { H = 4096, L = 14336 }
kernel ex_swiglu_feedforward(
    residual: &mut hbm<bf16>[H],
    ffn_rms_weight: &hbm<bf16>[H],
    gate_weight: &hbm<f8e4m3>[L, H],
    gate_weight_scale: &hbm<bf16>[L],
    up_weight: &hbm<f8e4m3>[L, H],
    up_weight_scale: &hbm<bf16>[L],
    down_weight: &hbm<f8e4m3>[H, L],
    down_weight_scale: &hbm<bf16>[H],
) {
}
"""
LLAMA_OPS = [
    {"op": "rms_norm", "input": "residual", "weight": "ffn_rms_weight", "out": "h"},
    {"op": "matvec", "input": "h", "weight": "gate_weight", "scale": "gate_weight_scale", "scale_kind": "row",
     "out": "g"},
    {"op": "matvec", "input": "h", "weight": "up_weight", "scale": "up_weight_scale", "scale_kind": "row", "out": "u"},
    {"op": "silu", "input": "g", "out": "sg"},
    {"op": "mul", "a": "sg", "b": "u", "out": "a"},
    {"op": "matvec", "input": "a", "weight": "down_weight", "scale": "down_weight_scale", "scale_kind": "row",
     "out": "d"},
    {"op": "add", "a": "residual", "b": "d", "out": "o"},
    {"op": "store", "input": "o", "to": "residual"},
]  # fmt: skip

LM_HEAD = """#![toolchain = "0.6.0"]
axes! { H = 2048, V = 128256 }
kernel ex_lm_head(
    x: &hbm<bf16>[H],
    final_rms_weight: &hbm<bf16>[H],
    lm_head_weight: &hbm<f8e4m3>[V, H],
    lm_head_weight_scale: &hbm<bf16>[V],
    logits: &mut hbm<bf16>[V],
) {
}
"""
LM_HEAD_OPS = [
    {"op": "rms_norm", "input": "x", "weight": "final_rms_weight", "out": "h"},
    {"op": "matvec", "input": "h", "weight": "lm_head_weight", "scale": "lm_head_weight_scale", "scale_kind": "row",
     "out": "y"},
    {"op": "store", "input": "y", "to": "logits"},
]  # fmt: skip

GQA = """#![toolchain = "0.6.0"]
axes! { H = 4096, Nq = 32, Nk = 8, Dh = 128, T = 2048, Q = (Nq, Dh), KV = (Nk, Dh) }
kernel ex_gqa_project_qkv(
    x: &hbm<bf16>[H],
    attn_rms_weight: &hbm<bf16>[H],
    q_weight: &hbm<bf16>[Q, H],
    k_weight: &hbm<bf16>[KV, H],
    v_weight: &hbm<bf16>[KV, H],
    q_norm_rms_weight: &hbm<bf16>[Dh],
    k_norm_rms_weight: &hbm<bf16>[Dh],
    kv_pos: &hbm<i32>[1],
    q_out: &mut hbm<bf16>[Nq, Dh],
    k_cache: &mut hbm<bf16>[T, Nk, Dh],
    v_cache: &mut hbm<bf16>[T, Nk, Dh],
) {
}
"""
GQA_OPS = [
    {"op": "rms_norm", "input": "x", "weight": "attn_rms_weight", "out": "h"},
    *({"op": "matvec", "input": "h", "weight": f"{n}_weight", "out": n} for n in "qkv"),
    {"op": "head_norm", "input": "q", "head_dim": 128, "weight": "q_norm_rms_weight", "out": "qn"},
    {"op": "head_norm", "input": "k", "head_dim": 128, "weight": "k_norm_rms_weight", "out": "kn"},
    {"op": "store", "input": "qn", "to": "q_out"},
    {"op": "cache_write", "input": "kn", "cache": "k_cache", "position": "kv_pos"},
    {"op": "cache_write", "input": "v", "cache": "v_cache", "position": "kv_pos"},
]  # fmt: skip


def _uniform(low: float, high: float, rows: bool = False) -> dict[str, object]:
    return {"dist": {"kind": "uniform", "low": low, "high": high}, **({"distinct_rows": PERIOD} if rows else {})}


F8 = {"dist": {"kind": "f8_codes"}, "distinct_rows": PERIOD}
BF16_MATRIX = {"dist": {"kind": "normal", "std": 0.02}, "distinct_rows": PERIOD}
POSITION = {"dist": {"kind": "position", "value": 137}}


def _matrix(inputs: Inputs, name: str, scale: str | None, decode: Callable[[np.ndarray], np.ndarray]) -> Periodic:
    weights = inputs[name]
    assert isinstance(weights, Periodic)
    rows = decode(weights.distinct)
    if scale is not None:
        scales = inputs[scale]
        assert isinstance(scales, Periodic) and scales.period == weights.period
        rows = rows * scales.distinct.reshape(-1, 1)
    return Periodic(rows.astype(np.float32), weights.rows)


def _values(rows: np.ndarray) -> np.ndarray:
    return rows


def _llama(inputs: Inputs) -> Outputs:
    residual = np.asarray(inputs["residual"], dtype=np.float32)
    h = rmsnorm(residual, np.asarray(inputs["ffn_rms_weight"]))
    g = bf16(project(_matrix(inputs, "gate_weight", "gate_weight_scale", f8_decode), _values, h))
    u = bf16(project(_matrix(inputs, "up_weight", "up_weight_scale", f8_decode), _values, h))
    a = bf16(g / (1.0 + np.exp(-g.astype(np.float64))).astype(np.float32) * u)
    d = bf16(project(_matrix(inputs, "down_weight", "down_weight_scale", f8_decode), _values, a))
    return {"residual": bf16(residual + d)}


def _lm_head(inputs: Inputs) -> Outputs:
    h = rmsnorm(np.asarray(inputs["x"], dtype=np.float32), np.asarray(inputs["final_rms_weight"]))
    return {"logits": bf16(project(_matrix(inputs, "lm_head_weight", "lm_head_weight_scale", f8_decode), _values, h))}


def _heads(v: np.ndarray, weight: np.ndarray, size: int) -> np.ndarray:
    heads = v.reshape(-1, size).astype(np.float64)
    inverse = 1.0 / np.sqrt(np.mean(heads**2, axis=1, keepdims=True) + EPS)
    return bf16((heads * inverse * weight.astype(np.float64)).astype(np.float32).reshape(-1))


def _gqa(inputs: Inputs) -> Outputs:
    h = rmsnorm(np.asarray(inputs["x"], dtype=np.float32), np.asarray(inputs["attn_rms_weight"]))
    out = {n: bf16(project(_matrix(inputs, f"{n}_weight", None, _values), _values, h)) for n in "qkv"}
    q = _heads(out["q"], np.asarray(inputs["q_norm_rms_weight"]), 128)
    k = _heads(out["k"], np.asarray(inputs["k_norm_rms_weight"]), 128)
    row = int(np.asarray(inputs["kv_pos"]).reshape(-1)[0])
    caches = {}
    for name, value in (("k_cache", k), ("v_cache", out["v"])):
        cache = np.array(inputs[name], dtype=np.float32)
        shape = cache.shape
        flat = cache.reshape(shape[0], -1)
        flat[row] = value
        caches[name] = flat.reshape(shape)
    return {"q_out": q.reshape(np.shape(inputs["q_out"])), **caches}


NEW: dict[str, tuple[str, list[dict[str, object]], dict[str, object], Callable[[Inputs], Outputs], float, float]] = {
    "ex_swiglu_feedforward": (LLAMA_FFN, LLAMA_OPS, {
        "residual": _uniform(-1.0, 1.0), "ffn_rms_weight": _uniform(0.75, 1.25),
        "gate_weight": F8, "up_weight": F8, "down_weight": F8,
        "gate_weight_scale": _uniform(0.0, 1e-3, rows=True), "up_weight_scale": _uniform(0.0, 1e-3, rows=True),
        "down_weight_scale": _uniform(0.0, 2e-5, rows=True),
    }, _llama, 0.05, 1e-2),
    "ex_lm_head": (LM_HEAD, LM_HEAD_OPS, {
        "x": _uniform(-1.0, 1.0), "final_rms_weight": _uniform(0.75, 1.25),
        "lm_head_weight": F8, "lm_head_weight_scale": _uniform(0.0, 1e-3, rows=True),
    }, _lm_head, 0.05, 1e-2),
    "ex_gqa_project_qkv": (GQA, GQA_OPS, {
        "x": _uniform(-1.0, 1.0), "attn_rms_weight": _uniform(0.75, 1.25),
        "q_weight": BF16_MATRIX, "k_weight": BF16_MATRIX, "v_weight": BF16_MATRIX,
        "q_norm_rms_weight": _uniform(0.0, 1.0), "k_norm_rms_weight": _uniform(0.0, 1.0),
        "kv_pos": POSITION, "q_out": _uniform(-1.0, 1.0), "k_cache": _uniform(-1.0, 1.0),
        "v_cache": _uniform(-1.0, 1.0),
    }, _gqa, 0.04, 1e-2),
}  # fmt: skip


@cache
def example(name: str) -> Example:
    """Any example kernel by name (a Gemma harness kernel or one of the new ones)."""
    if name in GEMMA:
        return gemma(name)
    source, ops, recipe, reference, atol, rtol = NEW[name]
    signature = kernel_signature(source)
    graph = OpGraph.model_validate({"ops": ops})
    streamed = {name for op in graph.ops if op.op == "matvec"
                for name in (op.weight, op.scale, op.global_scale) if name}  # type: ignore[union-attr]  # fmt: skip
    weight_bytes = sum(_bytes(p.shape, p.dtype) for p in signature.params if p.name in streamed)
    spec = KernelSpec(
        name=name, description=f"generator example {name}", params=signature.params, axes=signature.axes,
        atol=atol, rtol=rtol, weight_bytes=weight_bytes, bound_cycles=weight_bound_cycles(weight_bytes),
        baseline_source=source, ops=graph,
    )  # fmt: skip
    case = KernelCase(name=name, signature=signature, recipe=FixtureRecipe.model_validate({"inputs": recipe}),
                      reference=reference, atol=atol, rtol=rtol, key=f"generator-example:{name}")  # fmt: skip
    return Example(spec, case)


def _bytes(shape: tuple[tuple[str, int], ...], dtype: str) -> int:
    count = int(np.prod([size for _, size in shape]))
    return int(count * {"f8e4m3": 1, "bf16": 2, "f32": 4, "f4e2m1": 0.5, "i32": 4}[dtype])


ALL = (*GEMMA, *NEW)
