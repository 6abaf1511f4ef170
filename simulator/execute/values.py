"""What a kernel's HBM parameters hold when the executor runs it, and how those containers are read.

A parameter's value comes in one of three containers:

* a numpy array of the whole tensor (any shape with the parameter's element count, row-major);
* a `Periodic` weight: only its distinct rows, row r of the tensor being distinct row r mod n (the
  rows of the parameter's first axis), so a 15,360 x 3,840 weight costs what n rows cost;
* a `RopeTable`: a cos/sin table computed a row at a time.

Whatever the container, its numbers are read by the parameter's *declared dtype* (`decode`):

| declared dtype | integer container (codes)                         | float container (values)     |
|----------------|---------------------------------------------------|------------------------------|
| f8e4m3         | uint8, one code per element                       | rounded to f8e4m3            |
| f4e2m1         | uint8, two codes per byte, low nibble first       | rounded to f4e2m1            |
| bf16           | uint16 bit patterns                               | rounded to bf16              |
| f32            | the integers as values                            | as f32                       |
| i8, i32        | the integers as values                            | must hold integers           |

so a plain array of f8 codes is never mistaken for values, and a value the format cannot hold is
rounded as storing it in HBM would. Bad input is an `InputError` naming the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from chiplore.core.target import KernelParam
from chiplore.simulator.execute.factored import ExecutionError
from chiplore.simulator.execute.numerics import F8_VALUES, bf16, bf16_from_bits, f4, f4_unpack, f8

ROPE_THETA = 10_000.0


class InputError(ExecutionError):
    """An input that does not fit its parameter (missing, unknown, wrong size or container)."""


@dataclass(frozen=True)
class Periodic:
    """A weight whose rows repeat: `distinct` holds n rows (codes or values, see the module's table)
    and the tensor's row r is distinct row r mod n. Any n >= 1 works; a prime n (the harness uses
    509) keeps a tiling or layout bug from hiding behind the period."""

    distinct: np.ndarray
    rows: int

    @property
    def period(self) -> int:
        return int(self.distinct.shape[0])

    @property
    def row_ids(self) -> np.ndarray:
        return np.arange(self.rows) % self.period

    def dense(self) -> np.ndarray:
        return self.distinct[self.row_ids]


@dataclass(frozen=True)
class RopeTable:
    """cos or sin (bf16) of every position x frequency, computed a row at a time: a kernel reads one
    row (`cos.at(E = rope_pos)`), so a 32,768-row table is never materialised unless asked for.
    With `negate_low_half` (the harness's sin parameter) the first half of every row is negated."""

    positions: int
    width: int
    kind: str  # "cos" | "sin"
    theta: float = ROPE_THETA
    negate_low_half: bool | None = None  # None: the harness convention (sin negated, cos not)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.positions, self.width)

    def __getitem__(self, position: int) -> np.ndarray:
        return self.rows(np.array([position]))[0]

    def rows(self, positions: np.ndarray) -> np.ndarray:
        half = self.width // 2
        frequencies = self.theta ** (-np.arange(half, dtype=np.float64) * 2 / self.width)
        angles = positions.astype(np.float64)[:, None] * np.concatenate([frequencies, frequencies])[None, :]
        wave = np.cos if self.kind == "cos" else np.sin
        values = bf16(wave(angles).astype(np.float32))
        negate = self.kind == "sin" if self.negate_low_half is None else self.negate_low_half
        if negate:
            values[:, :half] = -values[:, :half]
        return values

    def dense(self) -> np.ndarray:
        return self.rows(np.arange(self.positions))


InputValue = np.ndarray | Periodic | RopeTable
Inputs = Mapping[str, InputValue]
Outputs = dict[str, np.ndarray]


def param_shape(param: KernelParam) -> tuple[int, ...]:
    """The parameter's shape: one size per term of its HBM mapping."""
    return tuple(size for _, size in param.shape)


def decode(value: object, param: KernelParam) -> InputValue:
    """The container's numbers as f32 values of the parameter's dtype (codes decoded, values
    rounded), in the same container: a whole array comes back in the parameter's shape, a
    `Periodic` keeps its distinct rows (decoded, one flat row each), a `RopeTable` is already values.
    A periodic value's rows need not be the parameter's first axis: any row length that divides the
    tensor works."""
    shape = param_shape(param)
    if isinstance(value, RopeTable):
        if math.prod(value.shape) != math.prod(shape):
            raise InputError(f"{param.name}: a {value.shape} table for a parameter of shape {shape}")
        return value
    if isinstance(value, Periodic):
        count = math.prod(shape)
        if value.period < 1 or value.rows < 1 or count % value.rows:
            raise InputError(f"{param.name}: a periodic value of {value.rows} rows (and {value.period} distinct) "
                             f"for a parameter of shape {shape}")  # fmt: skip
        per_row = count // value.rows
        rows = _values(np.asarray(value.distinct), param, value.period * per_row)
        return Periodic(rows.reshape(value.period, per_row), value.rows)
    if not isinstance(value, np.ndarray | list | tuple | int | float | np.generic):
        raise InputError(f"{param.name}: expected an array, a Periodic or a RopeTable, not {type(value).__name__}")
    return _values(np.asarray(value), param, math.prod(shape)).reshape(shape)


def _values(array: np.ndarray, param: KernelParam, count: int) -> np.ndarray:
    """`count` f32 values of `param.dtype` from an array of codes or values (the module's table)."""
    dtype, name = param.dtype, param.name
    integer = np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_
    if not integer and not np.issubdtype(array.dtype, np.floating):
        raise InputError(f"{name}: cannot read a {array.dtype} array as {dtype}")
    if dtype == "f4e2m1" and integer:
        if array.size * 2 != count:
            raise InputError(f"{name}: {array.size:,} bytes of packed f4 codes for {count:,} elements "
                             f"(two codes per byte: expected {count // 2:,})")  # fmt: skip
        return f4_unpack(_codes(array, name, 0xFF).reshape(-1))
    if array.size != count:
        raise InputError(f"{name}: {array.size:,} elements for a parameter of {count:,}")
    flat = array.reshape(-1)
    if integer:
        if dtype == "f8e4m3":
            return F8_VALUES[_codes(flat, name, 0xFF)]
        if dtype == "bf16":
            return bf16(bf16_from_bits(_codes(flat, name, 0xFFFF, np.uint16)))
        return flat.astype(np.float32)
    values = flat.astype(np.float32)
    if dtype in ("i8", "i32"):
        finite = values[np.isfinite(values)]
        if finite.size != values.size or not np.array_equal(finite, np.round(finite)):
            raise InputError(f"{name}: {dtype} values must be integers")
        return values
    return {"f8e4m3": f8, "f4e2m1": f4, "bf16": bf16}.get(dtype, np.asarray)(values).astype(np.float32)


def _codes(array: np.ndarray, name: str, top: int, dtype: type = np.uint8) -> np.ndarray:
    if array.size and (int(array.min()) < 0 or int(array.max()) > top):
        raise InputError(f"{name}: codes must lie in 0..{top}")
    return array.astype(dtype)


def check_inputs(params: tuple[KernelParam, ...], inputs: Inputs) -> None:
    """Every parameter given, nothing else: one line naming what is missing or unknown."""
    names = {p.name for p in params}
    missing = [p.name for p in params if p.name not in inputs]
    unknown = sorted(set(inputs) - names)
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no value for {', '.join(missing)}")
        if unknown:
            parts.append(f"no parameter named {', '.join(unknown)}")
        raise InputError("; ".join(parts))


def dense(value: InputValue) -> np.ndarray:
    """The whole tensor of a decoded value."""
    if isinstance(value, Periodic | RopeTable):
        return value.dense()
    return np.asarray(value)
