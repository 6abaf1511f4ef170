"""Rounding a stream to a tensor's number format, which formats hold which exactly (so a value
already exact is not rounded again), and f32 bytes reinterpreted as a narrower format (W0410)."""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.numerics import F8_VALUES, bf16, f8


def reinterpret_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """f32 values' bytes read as `dtype` values, in order (little-endian, as the DM stores them)."""
    raw = np.ascontiguousarray(values, dtype=np.float32).reshape(-1)
    if dtype == "bf16":
        halves = raw.view(np.uint16).astype(np.uint32) << 16
        return halves.view(np.float32)
    codes = raw.view(np.uint8)
    return F8_VALUES[codes] if dtype == "f8e4m3" else codes.view(np.int8).astype(np.float32)


# Formats whose values another holds exactly: f4 -> f8 -> bf16 -> f32, i8 -> i32.
WIDER = {"f4e2m1": 0, "f8e4m3": 1, "bf16": 2, "f32": 3}


def holds_exactly(wide: str, narrow: str) -> bool:
    """Whether every value of format `narrow` is a value of `wide` (rounding to `wide` changes nothing)."""
    if wide == narrow:
        return True
    if wide in WIDER and narrow in WIDER:
        return WIDER[wide] >= WIDER[narrow]
    return (narrow, wide) == ("i8", "i32")


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """The values rounded to `dtype` (bf16 and f8 bit-exact, anything else to f32)."""
    if dtype == "bf16":
        return bf16(values)
    if dtype == "f8e4m3":
        return f8(values)
    return values.astype(np.float32, copy=False)  # nothing writes a value in place: no copy needed
