"""vocab_projection in numpy: h = rms_norm(x) * final_norm_weight (bf16); logits = (W @ h) / 16 in f32.

The head's 131,072 rows repeat every 509 (the fixture's period), so `project` computes 509 dot
products and gathers them to every row.
"""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.reference import project, rmsnorm
from chiplore.simulator.execute.values import Inputs, Periodic

LOGIT_SCALE = 0.0625


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    weights = inputs["lm_head_weight"]
    assert isinstance(weights, Periodic)
    h = rmsnorm(np.asarray(inputs["x"]), np.asarray(inputs["final_norm_weight"]))
    values = lambda rows: rows  # noqa: E731 - bf16 weights are stored as their values
    return {"logits": (project(weights, values, h) * np.float32(LOGIT_SCALE)).astype(np.float32)}
