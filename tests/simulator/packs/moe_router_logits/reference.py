import numpy as np

from chiplore.simulator.execute.numerics import bf16
from chiplore.simulator.execute.reference import rmsnorm
from chiplore.simulator.execute.values import Inputs, Periodic


def reference(inputs: Inputs) -> dict[str, np.ndarray]:
    x = np.asarray(inputs["x0"])
    h = bf16(rmsnorm(x, np.asarray(inputs["norm"])).astype(np.float32)).astype(np.float64)
    w = inputs["router_weight"]
    dense = w.dense() if isinstance(w, Periodic) else np.asarray(w)
    logits = dense.astype(np.float64) @ h
    out = (logits + np.asarray(inputs["tmp"], dtype=np.float64)) * 0.125
    return {"acc": out.astype(np.float32)}
