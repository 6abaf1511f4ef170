"""gqa_project_qkv in numpy: h = rms_norm(x) * input_norm_weight; q, k, v = f8 projections of h times
their tensor scales (rounded to bf16); q and k normed per head of 128 with their weights; q out, and
k and v written to row `kv_pos` of their caches (the rest of each cache unchanged).

Projections run on the 509 distinct weight rows (`project`) and are gathered to the full rows.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import bf16, f8_decode
from chiplore.simulator.execute.reference import project, rmsnorm, rmsnorm_heads
from chiplore.simulator.execute.values import Inputs, Periodic

HEAD = 128


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    h = rmsnorm(np.asarray(inputs["x"]), np.asarray(inputs["input_norm_weight"]))
    projected = {}
    for name in ("q", "k", "v"):
        weights = inputs[f"{name}_weight"]
        assert isinstance(weights, Periodic)
        scale = np.float32(np.asarray(inputs[f"{name}_scale"]).reshape(-1)[0])
        projected[name] = bf16(project(weights, f8_decode, h) * scale)
    q = rmsnorm_heads(projected["q"], np.asarray(inputs["q_norm_weight"]), head=HEAD)
    k = rmsnorm_heads(projected["k"], np.asarray(inputs["k_norm_weight"]), head=HEAD)
    row = int(np.asarray(inputs["kv_pos"]).reshape(-1)[0])
    k_cache, v_cache = np.array(inputs["k_cache"]), np.array(inputs["v_cache"])
    k_cache[row] = k.reshape(k_cache.shape[1:])
    v_cache[row] = projected["v"].reshape(v_cache.shape[1:])
    return {"q_out": q.reshape(np.shape(inputs["q_out"])), "k_cache": k_cache, "v_cache": v_cache}
