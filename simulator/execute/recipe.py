"""Fixture recipes: how to draw any kernel's inputs, as data (a kernel pack's `kernel.toml` holds one).

A recipe names, per parameter, a distribution (`dist`) and a few modifiers, and may change them for
a named fixture set (`sets.exact`, `sets.cancel`, ...). `draw_inputs(recipe, signature, set, seed)`
draws every parameter from its own generator, seeded by sha256(f"{seed}/{set}/{key}") where `key`
is the parameter's name (or its `seed_key`), so adding a parameter never changes another's values
and the same recipe, set and seed always give the same bytes. Every set the device may ask for
(g0..g6, exact, cancel) can be drawn from any recipe: an input a set does not change is drawn from
its plain recipe under that set's own seed, so a recipe changes only the sets it has a use for.

Drawing one parameter, in this order:
1. `dist` fills the tensor, or only its first `distinct_rows` rows (a `Periodic` weight: row r of
   the tensor is drawn row r mod n; host tests of big weights stay fast);
2. `row_offsets = d` adds +d or -d to each drawn row (signs from the same generator);
3. `divide_by = "other"` divides element-wise by another parameter's values;
4. `block_offsets` adds +m, -m, +m, ... per block of elements in row-major order;
5. the values are stored as the parameter's dtype: rounded to bf16, encoded as f8e4m3 codes, packed
   as f4e2m1 codes (two per byte), or integers. Code distributions (`f8_codes`, `f4_codes`) give
   codes directly; a modifier decodes them, changes the values and encodes again.

A `&mut` parameter without a recipe starts as zeros (what the kernel does not write stays zero).
"""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from chiplore.core.target import KernelParam
from chiplore.simulator.execute.numerics import bf16, f4_encode, f4_pack, f4_unpack, f8_decode, f8_encode
from chiplore.simulator.execute.signature import KernelSignature
from chiplore.simulator.execute.values import ROPE_THETA, InputError, InputValue, Periodic, RopeTable, param_shape

DEFAULT_SETS = (*(f"g{i}" for i in range(7)), "exact", "cancel")
MAX_DRAWN = 1 << 26  # values one input may draw densely (256 MB of f32)


class _Model(BaseModel):
    # strict: a pack's `low = "0.75"` or `atol = true` is refused, not read as 0.75 or 1; no NaN or infinity
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class Uniform(_Model):
    kind: Literal["uniform"] = "uniform"
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.low > self.high:
            raise ValueError(f"a uniform distribution needs low <= high (low {self.low}, high {self.high})")
        return self


class Normal(_Model):
    kind: Literal["normal"] = "normal"
    mean: float = 0.0
    std: float = Field(1.0, ge=0)


class Signs(_Model):
    """+magnitude or -magnitude, each with probability one half."""

    kind: Literal["signs"] = "signs"
    magnitude: float = 1.0


class Constant(_Model):
    kind: Literal["constant"] = "constant"
    value: float


class Integers(_Model):
    """Integers in [low, high)."""

    kind: Literal["integers"] = "integers"
    low: int
    high: int

    @model_validator(mode="after")
    def _nonempty(self) -> Integers:
        if self.low >= self.high:
            raise ValueError(f"integers are drawn from [low, high): low {self.low} must be below high {self.high}")
        return self


class Position(_Model):
    """A row index for a run-time gather or scatter (`t.at(A = p)`): `value`, or one drawn uniformly
    from the rows of `axis`."""

    kind: Literal["position"] = "position"
    value: int | None = None
    axis: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Position:
        if (self.value is None) == (self.axis is None):
            raise ValueError("a position takes either value or axis")
        return self


class F8Codes(_Model):
    """f8e4m3 codes with exponents in [exponent_low, exponent_high] and any mantissa."""

    kind: Literal["f8_codes"] = "f8_codes"
    exponent_low: int = Field(7, ge=0, le=15)
    exponent_high: int = Field(14, ge=0, le=15)
    signed: bool = True


class F4Codes(_Model):
    """f4e2m1 codes, every byte (two codes) equally likely."""

    kind: Literal["f4_codes"] = "f4_codes"


class Rope(_Model):
    """A RoPE table (positions x width): cos or sin of position x theta^(-2i/width), bf16."""

    kind: Literal["rope"] = "rope"
    part: Literal["cos", "sin"]
    theta: float = ROPE_THETA
    negate_low_half: bool = False


Distribution = Annotated[
    Uniform | Normal | Signs | Constant | Integers | Position | F8Codes | F4Codes | Rope, Field(discriminator="kind")
]


class BlockOffsets(_Model):
    """+magnitude, -magnitude, ... per block of `block` elements, in row-major order."""

    magnitude: float
    block: int = Field(256, ge=1)


class InputChange(_Model):
    """What one fixture set changes in a parameter's recipe (unset fields keep the base recipe's)."""

    dist: Distribution | None = None
    divide_by: str | None = None
    block_offsets: BlockOffsets | None = None
    row_offsets: float | None = None


class InputRecipe(_Model):
    dist: Distribution
    distinct_rows: int | None = Field(None, ge=1)
    divide_by: str | None = None
    block_offsets: BlockOffsets | None = None
    row_offsets: float | None = None
    seed_key: str | None = None
    sets: dict[str, InputChange] = Field(default_factory=dict)

    def for_set(self, name: str) -> InputRecipe:
        change = self.sets.get(name)
        if change is None:
            return self
        given = change.model_dump(exclude_unset=True)
        updates = {key: getattr(change, key) for key in given}
        return self.model_copy(update=updates)


class FixtureRecipe(_Model):
    """Per parameter, how to draw it; `sets` lists the fixture sets the recipe names (the device's sets
    can be drawn whether listed or not: `drawable`)."""

    inputs: dict[str, InputRecipe]
    sets: tuple[str, ...] = DEFAULT_SETS

    @field_validator("sets", mode="before")
    @classmethod
    def _listed(cls, sets: object) -> object:
        return tuple(sets) if isinstance(sets, list) else sets  # TOML has arrays, not tuples

    @property
    def drawable(self) -> tuple[str, ...]:
        """The sets `draw_inputs` draws: the device's, then any other the recipe lists."""
        return tuple(dict.fromkeys((*DEFAULT_SETS, *self.sets)))

    @model_validator(mode="after")
    def _known_sets(self) -> FixtureRecipe:
        for name, recipe in self.inputs.items():
            divisors: set[str | None] = {recipe.divide_by, *(c.divide_by for c in recipe.sets.values())}
            if name in divisors:
                raise ValueError(f"input {name} divides by itself")
            unknown = sorted(set(recipe.sets) - set(self.drawable))
            if unknown:
                raise ValueError(f"input {name} changes sets {', '.join(unknown)} that the recipe does not list")
            for other in sorted(divisors - {None}):
                if other not in self.inputs:
                    raise ValueError(f"input {name} divides by {other}, which has no recipe")
        return self


def rng_for(seed: str | int, fixture_set: str, key: str) -> np.random.Generator:
    """The generator of one parameter in one set: sha256(f"{seed}/{set}/{key}")."""
    digest = hashlib.sha256(f"{seed}/{fixture_set}/{key}".encode()).digest()
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:8], "big")))


def draw_inputs(
    recipe: FixtureRecipe, signature: KernelSignature, fixture_set: str, seed: str | int
) -> dict[str, InputValue]:
    """Every parameter of `signature` drawn for one fixture set (an InputError when the recipe and
    the signature disagree: a parameter without a recipe, a recipe without a parameter, a code
    distribution for another dtype)."""
    if fixture_set not in recipe.drawable:
        raise InputError(f"unknown fixture set {fixture_set!r}; sets are {', '.join(recipe.drawable)}")
    params = {p.name: p for p in signature.params}
    unknown = sorted(set(recipe.inputs) - set(params))
    missing = [p.name for p in signature.params if p.name not in recipe.inputs and not p.mutable]
    if unknown or missing:
        parts = [f"no recipe for {', '.join(missing)}"] if missing else []
        parts += [f"kernel {signature.name} has no parameter {', '.join(unknown)}"] if unknown else []
        raise InputError("; ".join(parts))
    drawn: dict[str, InputValue] = {}
    pending = [p.name for p in signature.params]
    while pending:
        progressed = False
        for name in list(pending):
            chosen = recipe.inputs[name].for_set(fixture_set) if name in recipe.inputs else None
            if chosen is not None and chosen.divide_by is not None and chosen.divide_by not in drawn:
                continue
            if chosen is None:
                drawn[name] = np.zeros(param_shape(params[name]), dtype=np.float32)
            else:
                rng = rng_for(seed, fixture_set, chosen.seed_key or name)
                drawn[name] = _draw(chosen, params[name], signature, rng, drawn)
            pending.remove(name)
            progressed = True
        if not progressed:
            raise InputError(f"inputs {', '.join(pending)} divide by each other")
    return drawn


def _draw(
    recipe: InputRecipe, param: KernelParam, signature: KernelSignature, rng: np.random.Generator,
    drawn: dict[str, InputValue],
) -> InputValue:  # fmt: skip
    shape = param_shape(param)
    dist = recipe.dist
    if isinstance(dist, Rope):
        if len(shape) != 2:
            raise InputError(f"{param.name}: a rope table is (positions, width), the parameter has shape {shape}")
        return RopeTable(shape[0], shape[1], dist.part, dist.theta, dist.negate_low_half)
    rows = shape[0] if shape else 1
    period = min(recipe.distinct_rows, rows) if recipe.distinct_rows is not None else None
    drawn_shape = ((period, *shape[1:]) if shape else (period,)) if period is not None else shape
    if math.prod(drawn_shape) > MAX_DRAWN:
        per_row = math.prod(shape[1:]) if len(shape) > 1 else 1
        most = max(1, MAX_DRAWN // per_row)  # the distinct rows that fit the cap
        if recipe.distinct_rows is None:
            fix = f"give it distinct_rows (at most {most:,}) so only a few rows are drawn"
        else:
            drawn_rows = f"distinct_rows = {recipe.distinct_rows:,} draws {period:,} of its {rows:,} rows"
            fix = f"its {drawn_rows}: at most {most:,} fit"
        raise InputError(f"{param.name}: {math.prod(drawn_shape):,} values to draw (at most {MAX_DRAWN:,}); {fix}")
    codes = _codes(dist, param, drawn_shape, rng, signature)
    changed = recipe.row_offsets is not None or recipe.divide_by is not None or recipe.block_offsets is not None
    if codes is not None and not changed:
        return Periodic(codes, rows) if period is not None else codes
    values = _decode(codes, param.dtype) if codes is not None else _values(dist, drawn_shape, rng, signature, param)
    if recipe.row_offsets is not None:
        signs = np.where(rng.random(drawn_shape[0]) < 0.5, -1.0, 1.0).astype(np.float32)
        values = values + (recipe.row_offsets * signs).reshape(-1, *(1,) * (values.ndim - 1))
    if recipe.divide_by is not None:
        values = values / _dense_like(drawn[recipe.divide_by], values.shape, period)
    if recipe.block_offsets is not None:
        offsets = recipe.block_offsets
        length = values.size
        signs = np.where(np.arange(math.ceil(length / offsets.block)) % 2 == 0, offsets.magnitude, -offsets.magnitude)
        values = values + np.repeat(signs, offsets.block)[:length].astype(np.float32).reshape(values.shape)
    stored = _store(np.asarray(values, dtype=np.float32), param)
    return Periodic(stored, rows) if period is not None else stored


def _codes(
    dist: object, param: KernelParam, shape: tuple[int, ...], rng: np.random.Generator, signature: KernelSignature
) -> np.ndarray | None:
    """Codes a code distribution draws (None for value distributions)."""
    if isinstance(dist, F8Codes):
        if param.dtype != "f8e4m3":
            raise InputError(f"{param.name}: f8_codes for a {param.dtype} parameter")
        exponent = rng.integers(dist.exponent_low, dist.exponent_high + 1, size=shape, dtype=np.uint8)
        mantissa = rng.integers(0, 8, size=shape, dtype=np.uint8)
        sign = (rng.random(shape) < 0.5).astype(np.uint8) if dist.signed else np.zeros(shape, dtype=np.uint8)
        return ((sign << 7) | (exponent << 3) | mantissa).astype(np.uint8)
    if isinstance(dist, F4Codes):
        if param.dtype != "f4e2m1" or not shape or shape[-1] % 2:
            raise InputError(f"{param.name}: f4_codes need an f4e2m1 parameter with an even last axis")
        return rng.integers(0, 256, size=(*shape[:-1], shape[-1] // 2), dtype=np.uint8)
    return None


def _values(
    dist: object, shape: tuple[int, ...], rng: np.random.Generator, signature: KernelSignature, param: KernelParam
) -> np.ndarray:
    if isinstance(dist, Uniform):
        return rng.uniform(dist.low, dist.high, shape).astype(np.float32)
    if isinstance(dist, Normal):
        return rng.normal(dist.mean, dist.std, shape).astype(np.float32)
    if isinstance(dist, Signs):
        return np.where(rng.random(shape) < 0.5, -dist.magnitude, dist.magnitude).astype(np.float32)
    if isinstance(dist, Constant):
        return np.full(shape, dist.value, dtype=np.float32)
    if isinstance(dist, Integers):
        return rng.integers(dist.low, dist.high, size=shape).astype(np.float32)
    if isinstance(dist, Position):
        if dist.value is not None:
            return np.full(shape, dist.value, dtype=np.float32)
        size = signature.axes.get(dist.axis or "")
        if size is None:
            raise InputError(f"{param.name}: position over {dist.axis}, which kernel {signature.name} does not declare")
        return rng.integers(0, size, size=shape).astype(np.float32)
    raise InputError(f"{param.name}: cannot draw {type(dist).__name__}")


def _decode(codes: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f8e4m3":
        return f8_decode(codes)
    return f4_unpack(codes)


def _store(values: np.ndarray, param: KernelParam) -> np.ndarray:
    """Values as the parameter's dtype holds them: f32 storage for floats, codes for f8/f4."""
    if param.dtype == "bf16":
        return bf16(values)
    if param.dtype == "f8e4m3":
        return f8_encode(values)
    if param.dtype == "f4e2m1":
        return f4_pack(f4_encode(values))
    if param.dtype in ("i8", "i32"):
        return np.rint(values).astype(np.int8 if param.dtype == "i8" else np.int32)
    return values.astype(np.float32)


def _dense_like(value: InputValue, shape: tuple[int, ...], period: int | None) -> np.ndarray:
    """Another parameter's values, as many rows as this one draws."""
    if isinstance(value, Periodic):
        rows = value.distinct if period is not None and value.period == period else value.dense()
    elif isinstance(value, RopeTable):
        rows = value.dense()
    else:
        rows = np.asarray(value)
    if period is not None and rows.shape[0] != period:
        rows = rows[:period]
    if rows.dtype == np.uint8:
        raise InputError("divide_by needs a parameter of values, not codes")
    return np.broadcast_to(rows.astype(np.float32), shape)
