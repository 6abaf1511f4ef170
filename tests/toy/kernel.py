"""The toy chip's one kernel: y = w @ x with 256 KB of f32 weights, its fixtures, its reference and
the vendor's baseline (correct, and slow on purpose: one lane, 64 small chunks)."""

from __future__ import annotations

import zlib

import numpy as np

from chiplore.core.target import KernelParam, KernelSpec
from tests.toy.truth import BASE

GEMV = "gemv"
ROWS = COLS = 256
WEIGHT_BYTES = ROWS * COLS * 4
SIGNATURE = {"w": (ROWS, COLS), "x": (COLS,), "y": (ROWS,)}
OUTPUTS = ("y",)

BASELINE = """#toolchain 1.0
// the vendor's reference port: correct, one lane, small chunks
kernel gemv
param w 256x256
param x 256
out y 256
load w chunks=64 lanes=1
load x
mul y w x
store y
"""


def gemv_spec() -> KernelSpec:
    return KernelSpec(
        name=GEMV, label="GEMV", description="y = w @ x: a 256x256 f32 matrix times a vector",
        params=(
            KernelParam(name="w", type="param w 256x256", mutable=False, dtype="f32",
                        shape=(("rows", ROWS), ("cols", COLS))),
            KernelParam(name="x", type="param x 256", mutable=False, dtype="f32", shape=(("cols", COLS),)),
            KernelParam(name="y", type="out y 256", mutable=True, dtype="f32", shape=(("rows", ROWS),)),
        ),
        axes={"rows": ROWS, "cols": COLS}, atol=1e-4, rtol=1e-4, weight_bytes=WEIGHT_BYTES,
        # the harness's own bound: weight bytes over the true ingress (chiplore measures its own)
        bound_cycles=WEIGHT_BYTES / BASE.ingress_bytes_per_cycle, baseline_source=BASELINE,
    )  # fmt: skip


def fixture(name: str) -> dict[str, np.ndarray]:
    """The inputs of one fixture set, the same for every run of it."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return {"w": (rng.standard_normal((ROWS, COLS)) / 16).astype(np.float32),
            "x": rng.standard_normal(COLS).astype(np.float32)}  # fmt: skip


def reference(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"y": inputs["w"].astype(np.float64) @ inputs["x"].astype(np.float64)}
