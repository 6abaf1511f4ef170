"""swiglu_feedforward in numpy: h = rms_norm(residual) * ffn_norm_weight; g, u = f8 gate and up
projections of h times their row scales (f32); a = SiLU(g) * u, rounded to bf16; d = the f8 down
projection of a times its row scale; out = residual + d, rounded to bf16.

Each projection runs on the 509 distinct weight rows only (`project`) and is gathered to every row.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import bf16, f8_decode
from chiplore.simulator.execute.reference import project, rmsnorm
from chiplore.simulator.execute.values import Inputs, Periodic


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    residual = np.asarray(inputs["residual"])

    def matvec(name: str, vector: np.ndarray) -> np.ndarray:
        weights, scale = inputs[f"{name}_weight"], inputs[f"{name}_scale"]
        assert isinstance(weights, Periodic) and isinstance(scale, Periodic)
        return project(weights, f8_decode, vector) * scale.dense().astype(np.float32)

    h = rmsnorm(residual, np.asarray(inputs["ffn_norm_weight"]))
    g, u = matvec("gate", h), matvec("up", h)
    g64 = g.astype(np.float64)
    a = bf16((g64 / (1.0 + np.exp(-g64)) * u).astype(np.float32))
    d = matvec("down", a)
    return {"residual": bf16(residual + d)}
