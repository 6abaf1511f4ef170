"""The number formats of the chip, bit-exact (docs/simrngd.md §9.1): bf16 round-to-nearest-even
(no subnormals, NaN canonicalised), f8e4m3 (no infinities; 0x7F/0xFF are NaN; narrowing rounds to
nearest even and saturates at +-448) and f4e2m1 codes {0, .5, 1, 1.5, 2, 3, 4, 6} with a sign bit,
two per byte, low nibble first."""

from __future__ import annotations

import numpy as np

F8_MAX = 448.0
F4_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
_BF16_NAN = np.uint32(0x7FC00000)


def bf16(values: np.ndarray | float) -> np.ndarray:
    """Round f32 to bf16 (kept in f32 storage): nearest even, subnormals flushed, one NaN."""
    a = np.asarray(values, dtype=np.float32)
    bits = a.view(np.uint32)
    # In place on one temporary (weight-sized arrays pass here often). uint32 arithmetic wraps only for
    # NaN bit patterns, which are replaced below.
    rounded = np.right_shift(bits, np.uint32(16), out=np.empty_like(bits))  # an array even for a scalar
    rounded &= np.uint32(1)
    rounded += np.uint32(0x7FFF)
    rounded += bits
    rounded &= np.uint32(0xFFFF0000)
    # Subnormal: a zero exponent and a nonzero mantissa (magnitude - 1 wraps for a zero).
    magnitude = np.bitwise_and(rounded, np.uint32(0x7FFFFFFF), out=np.empty_like(rounded))
    magnitude -= np.uint32(1)
    subnormal = magnitude < np.uint32(0x007FFFFF)
    if subnormal.any():  # no subnormals: a signed zero
        np.bitwise_and(rounded, np.uint32(0x80000000), out=rounded, where=subnormal)
    nan = np.isnan(a)
    if nan.any():
        np.copyto(rounded, _BF16_NAN, where=nan)
    return rounded.view(np.float32)


def _f8_table() -> np.ndarray:
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    normal = (1 + mantissa / 8) * np.exp2(exponent.astype(np.float64) - 7)
    subnormal = mantissa / 8 * 2.0**-6
    values = sign * np.where(exponent == 0, subnormal, normal)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values.astype(np.float32)


F8_VALUES = _f8_table()
_F8_POSITIVE = F8_VALUES[:127]  # codes 0..126, increasing


def f8_decode(codes: np.ndarray) -> np.ndarray:
    return F8_VALUES[np.asarray(codes, dtype=np.uint8)]


def f8_encode(values: np.ndarray | float) -> np.ndarray:
    """f32 -> f8e4m3 codes: nearest, ties to the even code, saturating at +-448, NaN to 0x7F."""
    a = np.asarray(values, dtype=np.float32)
    magnitude = np.minimum(np.abs(a), F8_MAX)
    upper = np.clip(np.searchsorted(_F8_POSITIVE, magnitude, side="left"), 0, 126)
    lower = np.clip(upper - 1, 0, 126)
    below, above = magnitude - _F8_POSITIVE[lower], _F8_POSITIVE[upper] - magnitude
    pick_upper = (above < below) | ((above == below) & (upper % 2 == 0))
    code = np.where(pick_upper, upper, lower).astype(np.uint8)
    code = np.where(np.signbit(a) & (code != 0), code | 0x80, code).astype(np.uint8)
    return np.where(np.isnan(a), np.uint8(0x7F), code).astype(np.uint8)


def f8(values: np.ndarray | float) -> np.ndarray:
    """Round f32 to the nearest f8e4m3 value (narrowing cast): 3 mantissa bits, nearest even,
    subnormals below 2^-6 in steps of 2^-9, saturating at +-448. Bit arithmetic, no table search."""
    a = np.asarray(values, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (((bits + 0x7FFFF + ((bits >> 20) & 1)) >> 20) << 20).astype(np.uint32).view(np.float32)
    tiny = np.abs(a) < np.float32(2.0**-6)
    subnormal = (np.rint(a.astype(np.float64) * 2.0**9) / 2.0**9).astype(np.float32)
    out = np.where(tiny, subnormal, rounded)
    out = np.clip(out, -F8_MAX, F8_MAX)
    return np.where(np.isnan(a), np.float32(np.nan), out).astype(np.float32)


# Signed f4 values by nibble (code 8 is -0.0), and both values of each byte (low nibble first) as one
# 8-byte item: one flat lookup decodes, where a sign select and a multiply took three passes over
# weight-sized arrays (and a 2-D table lookup a slow fancy index).
_F4_SIGNED = np.concatenate([F4_MAGNITUDES, -F4_MAGNITUDES])
_F4_BYTE_PAIRS = np.ascontiguousarray(
    np.stack([_F4_SIGNED[np.arange(256) & 0xF], _F4_SIGNED[np.arange(256) >> 4]], axis=-1)
).view(np.uint64)[:, 0]


def f4_decode_nibbles(nibbles: np.ndarray) -> np.ndarray:
    """f4 codes (bits above the nibble ignored) -> their f32 values."""
    return _F4_SIGNED[np.asarray(nibbles, dtype=np.uint8) & 0xF]


def f4_unpack(packed: np.ndarray) -> np.ndarray:
    """Bytes of two f4 codes (low nibble first) -> one value per code, last axis doubled."""
    p = np.asarray(packed, dtype=np.uint8)
    return _F4_BYTE_PAIRS.take(p).view(np.float32).reshape(*p.shape[:-1], p.shape[-1] * 2)


def f4_encode(values: np.ndarray | float) -> np.ndarray:
    """f32 -> f4e2m1 nibbles (one per value): nearest magnitude, ties to the even code, saturating at
    +-6, the sign in bit 3 (a negative zero keeps it). NaN has no f4 code: it becomes +0."""
    a = np.nan_to_num(np.asarray(values, dtype=np.float32), nan=0.0)
    magnitude = np.minimum(np.abs(a), F4_MAGNITUDES[-1])
    upper = np.clip(np.searchsorted(F4_MAGNITUDES, magnitude, side="left"), 0, 7)
    lower = np.clip(upper - 1, 0, 7)
    below, above = magnitude - F4_MAGNITUDES[lower], F4_MAGNITUDES[upper] - magnitude
    pick_upper = (above < below) | ((above == below) & (upper % 2 == 0))
    code = np.where(pick_upper, upper, lower).astype(np.uint8)
    return np.where(np.signbit(a), code | 0x8, code).astype(np.uint8)


def f4(values: np.ndarray | float) -> np.ndarray:
    """Round f32 to the nearest f4e2m1 value (what storing it as f4 keeps)."""
    return f4_decode_nibbles(f4_encode(values))


def f4_pack(nibbles: np.ndarray) -> np.ndarray:
    """One nibble per value -> bytes of two codes, low nibble first (the last axis halves)."""
    n = np.asarray(nibbles, dtype=np.uint8)
    pairs = n.reshape(*n.shape[:-1], n.shape[-1] // 2, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)


def bf16_from_bits(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> their values in f32 storage."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
