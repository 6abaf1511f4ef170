"""sliding_attention_output in numpy: residual + rms_norm(o_weight @ x * o_weight_scale) * post_attn_rms_weight.

The projection is computed once per distinct weight row (`project`) and gathered, so the full
3,840-row matrix costs what its 509 distinct rows cost. Values are rounded to bf16 where the kernel's
outputs and intermediates are bf16.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import bf16, f8_decode
from chiplore.simulator.execute.reference import project, rmsnorm
from chiplore.simulator.execute.values import Inputs, Periodic


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    weights, scale = inputs["o_weight"], inputs["o_weight_scale"]
    assert isinstance(weights, Periodic) and isinstance(scale, Periodic)
    x = np.asarray(inputs["x"]).reshape(-1)
    y = bf16(project(weights, f8_decode, x) * scale.dense().astype(np.float32))
    residual = np.asarray(inputs["residual"])
    return {"residual": bf16(residual + rmsnorm(y, np.asarray(inputs["post_attn_rms_weight"])))}
