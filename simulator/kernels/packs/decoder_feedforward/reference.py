"""decoder_feedforward in numpy: h = rms_norm(residual); u, g = up/gate projections (f4 codes times
their f8 scale per block of 16, times the global scale); a = gelu_tanh(g) * u; d = the down projection
of a; out = (residual + rms_norm(d)) * layer_scalar.

Each projection runs on the distinct weight rows only (`project`); bf16 rounding follows the kernel's
bf16 intermediates.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import bf16
from chiplore.simulator.execute.reference import f4_with_block_scales, gelu, project, rmsnorm
from chiplore.simulator.execute.values import Inputs, Periodic


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    f = inputs
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
