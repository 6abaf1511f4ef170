"""sliding_project_qkv in numpy: the input RMS norm, q/k/v projections with row scales, per-head RMS
norms (v without a weight), RoPE at `rope_pos` on q and k, q out and row `kv_pos` of each cache.

The `sin` table arrives with its low half negated (the fixture's convention), so the true sine is
recovered before rotating. Every intermediate the kernel keeps in bf16 is rounded to bf16.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import bf16, f8_decode
from chiplore.simulator.execute.reference import HEAD, project, rmsnorm, rmsnorm_heads, rot
from chiplore.simulator.execute.values import Inputs, Periodic


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    f = inputs
    h = rmsnorm(_flat(f["x"]), f["input_rms_weight"])  # type: ignore[arg-type]
    out: dict[str, np.ndarray] = {}
    for name in ("q", "k", "v"):
        weights, scale = f[f"{name}_weight"], f[f"{name}_weight_scale"]
        assert isinstance(weights, Periodic) and isinstance(scale, Periodic)
        out[name] = bf16(project(weights, f8_decode, h) * scale.dense().astype(np.float32))
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


def _flat(value: object) -> np.ndarray:
    return np.asarray(value).reshape(-1)
