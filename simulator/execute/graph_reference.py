"""A kernel's reference derived from its op graph: the graph (chiplore.core.ops) evaluated in numpy on
one fixture set's inputs, for a pack without a `reference.py` (docs/kernels.md).

`graph_reference(graph, signature)` is a `reference(inputs) -> outputs` like a pack's own. It takes
the inputs a reference.py receives (arrays, `Periodic` weights, `RopeTable`s; codes decoded by the
parameter's dtype with `values.decode`), accumulates in f64 and rounds to bf16 where an op says
`round_bf16` and where a value is stored into a bf16 output. A matvec computes one dot product per
distinct row of its weight (and of its block scales: the rows of the two repeat together every
lcm of their periods), so a 14,336-row matrix drawn as 509 distinct rows costs what 509 rows cost.

A graph the inputs do not fit (a weight whose size is no multiple of its input's length, a RoPE
table narrower than its heads, a position outside the cache) is a `GraphReferenceError` naming the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.special import erf

from chiplore.core.ops import (
    Activation,
    CacheWrite,
    Elementwise,
    HeadNorm,
    MatVec,
    OpGraph,
    RmsNorm,
    Rope,
    Scale,
    Store,
)
from chiplore.core.ops import Op as GraphOp
from chiplore.core.target import KernelParam
from chiplore.simulator.execute.numerics import bf16, f4, f8
from chiplore.simulator.execute.signature import KernelSignature
from chiplore.simulator.execute.values import Inputs, InputValue, Outputs, Periodic, RopeTable, decode, param_shape

CHUNK_VALUES = 1 << 22  # weight values one step of a matvec decodes and multiplies (32 MB of f64)
GELU_TANH = math.sqrt(2.0 / math.pi)


class GraphReferenceError(ValueError):
    """The inputs do not fit the op graph (one line naming the op)."""


def graph_reference(graph: OpGraph, signature: KernelSignature) -> Callable[[Inputs], Outputs]:
    """`reference(inputs) -> outputs` of the kernel the graph describes over `signature`."""
    return partial(evaluate, graph, signature)


@dataclass(frozen=True)
class Narrowing:
    """How an evaluation narrows values (`rounding_envelope`): the rounding points of the ops writing
    `directed` round toward zero or away from it instead of to nearest, and with `bf16_inputs` a
    matvec's input is rounded to bf16 first, as a TRF holds it."""

    directed: frozenset[str] = frozenset()
    away: bool = False
    bf16_inputs: bool = False


NEAREST = Narrowing()


def evaluate(graph: OpGraph, signature: KernelSignature, inputs: Inputs, narrowing: Narrowing = NEAREST) -> Outputs:
    """Every output parameter the graph writes, in its shape: floats (bf16 outputs rounded) or integers."""
    run = _Run(signature, inputs, narrowing)
    for index, op in enumerate(graph.ops):
        try:
            run.step(op)
        except GraphReferenceError as error:
            what = op.writes() or getattr(op, "to", None) or getattr(op, "cache", None)
            raise GraphReferenceError(f"op {index + 1} ({op.op} {what}): {error}") from None
    return run.outputs()


def rounding_envelope(graph: OpGraph, signature: KernelSignature, inputs: Inputs,
                      reference: Outputs | None = None) -> Outputs:  # fmt: skip
    """How far each output element may lie from the reference in a program that keeps every rounding
    point, computed by a chip whose contraction reads bf16 inputs: its matvec inputs rounded to bf16,
    and each rounding point no matvec reads from rounded to either neighbour (an f32 value in another
    order lands on the other side of a tie; where an add then cancels the rounded value, that ulp is
    the whole answer). Points a matvec reads from round to nearest: their flips at a tie are few and
    are summed away, where all rounded one way would add up. `reference`: the graph's outputs on these
    inputs, when the caller has them."""
    feeds: set[str] = set()  # values some matvec's input derives from
    for op in reversed(graph.ops):
        if isinstance(op, MatVec):
            feeds.add(op.input)
        elif op.writes() in feeds:
            feeds.update(op.reads())
    late = frozenset(str(op.writes()) for op in graph.ops if getattr(op, "round_bf16", False)) - feeds
    reference = reference if reference is not None else evaluate(graph, signature, inputs)
    spread = {name: np.zeros(np.shape(value)) for name, value in reference.items()}
    for away in (False, True):
        varied = evaluate(graph, signature, inputs, Narrowing(late, away, bf16_inputs=True))
        for name, value in varied.items():
            moved = np.abs(np.asarray(value, np.float64) - np.asarray(reference[name], np.float64))
            spread[name] = np.maximum(spread[name], moved)
    return spread


def _bf16_directed(value: np.ndarray, away: bool) -> np.ndarray:
    """`value` (f32 first) rounded to bf16 toward zero, or away from zero (infinities and NaNs kept)."""
    bits = value.astype(np.float32).view(np.uint32)
    truncated = bits & np.uint32(0xFFFF0000)
    if away:
        inexact = (bits != truncated) & np.isfinite(value)
        truncated = np.where(inexact, truncated + np.uint32(0x10000), truncated)
    return truncated.view(np.float32).astype(np.float64)


class _Run:
    """One evaluation: the values defined so far (f64 vectors) and the outputs written."""

    def __init__(self, signature: KernelSignature, inputs: Inputs, narrowing: Narrowing = NEAREST) -> None:
        self.params = {p.name: p for p in signature.params}
        self.inputs = inputs
        self.narrowing = narrowing
        self.values: dict[str, np.ndarray] = {}
        self.written: dict[str, np.ndarray] = {}

    # ---- reading ------------------------------------------------------------------------------------

    def decoded(self, name: str) -> InputValue:
        if name not in self.inputs:
            raise GraphReferenceError(f"no input {name!r}")
        return decode(self.inputs[name], self.params[name])

    def vector(self, name: str) -> np.ndarray:
        """A value, or an input parameter's values flattened (f64)."""
        if name not in self.values:
            value = self.decoded(name)
            dense = value.dense() if isinstance(value, Periodic | RopeTable) else np.asarray(value)
            self.values[name] = dense.reshape(-1).astype(np.float64)
        return self.values[name]

    def scalar(self, name: str) -> float:
        values = self.vector(name)
        if values.size < 1:
            raise GraphReferenceError(f"{name} is empty")
        return float(values[0])

    def position(self, name: str) -> int:
        return round(self.scalar(name))

    def rows(self, name: str, width: int) -> tuple[np.ndarray, int]:
        """A matrix input as (its distinct rows of `width` columns, f32; how many rows it has): row n
        of the matrix is distinct row n mod the number of distinct rows."""
        value = self.decoded(name)
        size = math.prod(param_shape(self.params[name]))
        if width < 1 or size % width:
            raise GraphReferenceError(f"{name} has {size:,} elements, not rows of {width:,}")
        if isinstance(value, Periodic):
            per_row = value.distinct.size // value.period
            if per_row % width == 0:
                return value.distinct.reshape(-1, width), size // width
            value = value.dense()
        elif isinstance(value, RopeTable):
            value = value.dense()
        return np.asarray(value).reshape(-1, width), size // width

    # ---- ops ----------------------------------------------------------------------------------------

    def step(self, op: GraphOp) -> None:
        if isinstance(op, Store):
            self.store(op.to, self.vector(op.input))
            return
        if isinstance(op, CacheWrite):
            self.cache_write(op, self.vector(op.input))
            return
        value = self.compute(op)
        if getattr(op, "round_bf16", False):
            if op.writes() in self.narrowing.directed:
                value = _bf16_directed(value, self.narrowing.away)
            else:
                value = bf16(value.astype(np.float32)).astype(np.float64)
        self.values[str(op.writes())] = value

    def compute(self, op: GraphOp) -> np.ndarray:
        if isinstance(op, RmsNorm):
            x = self.vector(op.input)
            return _normed(x, op.eps) * (self.matching(op.weight, x.size) if op.weight else 1.0)
        if isinstance(op, HeadNorm):
            heads = self.heads(op.input, op.head_dim)
            normed = np.stack([_normed(h, op.eps) for h in heads]) if heads.size else heads
            return (normed * (self.matching(op.weight, op.head_dim) if op.weight else 1.0)).reshape(-1)
        if isinstance(op, MatVec):
            return self.matvec(op)
        if isinstance(op, Rope):
            return self.rope(op)
        if isinstance(op, Activation):
            return _activation(op.op, self.vector(op.input))
        if isinstance(op, Elementwise):
            a, b = self.vector(op.a), self.vector(op.b)
            if a.size != b.size and b.size != 1 and a.size != 1:
                raise GraphReferenceError(f"{op.a} has {a.size:,} elements and {op.b} {b.size:,}")
            return a * b if op.op == "mul" else a + b
        if isinstance(op, Scale):
            return self.vector(op.input) * op.by
        raise GraphReferenceError(f"no reference for op {op.op!r}")

    def matching(self, name: str, size: int) -> np.ndarray:
        values = self.vector(name)
        if values.size != size:
            raise GraphReferenceError(f"{name} has {values.size:,} elements, not {size:,}")
        return values

    def heads(self, name: str, head_dim: int) -> np.ndarray:
        x = self.vector(name)
        if x.size % head_dim:
            raise GraphReferenceError(f"{name} has {x.size:,} elements, not whole heads of {head_dim}")
        return x.reshape(-1, head_dim)

    def matvec(self, op: MatVec) -> np.ndarray:
        x = self.vector(op.input)
        if self.narrowing.bf16_inputs:
            x = bf16(x.astype(np.float32)).astype(np.float64)
        k = x.size
        shape = param_shape(self.params[op.weight])
        if not any(math.prod(shape[i:]) == k for i in range(len(shape))):
            dims = ", ".join(f"{size:,}" for size in shape)
            raise GraphReferenceError(f"weight {op.weight} is declared [{dims}]: its rows (its last dimensions) do not "
                                      f"hold the {k:,} values of its input {op.input}")  # fmt: skip
        weights, n = self.rows(op.weight, k)
        blocks: np.ndarray | None = None
        if op.scale is not None and op.scale_kind == "block":
            if k % op.block:
                raise GraphReferenceError(
                    f"{k:,} columns are not whole blocks of {op.block}: the op graph's reference "
                    "takes a block that divides K (a reference.py may cut its last block short)"
                )
            blocks, scale_rows = self.rows(op.scale, k // op.block)
            if scale_rows != n:  # name the shape it needs: a wrong block reshapes the same values into other rows
                declared = ", ".join(f"{size:,}" for size in param_shape(self.params[op.scale]))
                raise GraphReferenceError(f"block scale {op.scale} is declared [{declared}], but blocks of {op.block} "
                                          f"over the weight's {n:,} rows of {k:,} columns need {n:,} x "
                                          f"{k // op.block:,} scales")  # fmt: skip
        period = weights.shape[0] if blocks is None else math.lcm(weights.shape[0], blocks.shape[0])
        period = min(period, n)
        distinct = np.empty(period, dtype=np.float64)
        step = max(1, CHUNK_VALUES // max(k, 1))
        for start in range(0, period, step):
            ids = np.arange(start, min(start + step, period))
            rows = weights[ids % weights.shape[0]].astype(np.float64)
            if blocks is not None:
                rows = rows * np.repeat(blocks[ids % blocks.shape[0]].astype(np.float64), op.block, axis=1)
            distinct[ids] = rows @ x
        y = distinct[np.arange(n) % period]
        if op.scale is not None and op.scale_kind == "row":
            scales, rows_of_scale = self.rows(op.scale, 1)
            if rows_of_scale != n:
                raise GraphReferenceError(f"row scale {op.scale} has {rows_of_scale:,} elements, the weight {n:,} rows")
            y = y * scales[np.arange(n) % scales.shape[0], 0].astype(np.float64)
        elif op.scale is not None and op.scale_kind == "tensor":
            y = y * self.scalar(op.scale)
        if op.global_scale is not None:
            y = y * self.scalar(op.global_scale)
        return y

    def rope(self, op: Rope) -> np.ndarray:
        heads = self.heads(op.input, op.head_dim)
        position = self.position(op.position)
        cos, sin = (self.table_row(name, position, op.head_dim) for name in (op.cos, op.sin))
        half = op.head_dim // 2
        swapped = np.concatenate([heads[:, half:], heads[:, :half]], axis=1)
        return (heads * cos + swapped * sin).reshape(-1)

    def table_row(self, name: str, position: int, width: int) -> np.ndarray:
        value = self.decoded(name)
        shape = param_shape(self.params[name])
        rows = shape[0] if shape else 1
        if not 0 <= position < rows:
            raise GraphReferenceError(f"position {position} is outside {name}'s {rows} rows")
        if isinstance(value, RopeTable):
            row = value[position]
        elif isinstance(value, Periodic):
            row = value.distinct[position % value.period]
        else:
            row = np.asarray(value).reshape(rows, -1)[position]
        if row.size != width:
            raise GraphReferenceError(f"{name} has rows of {row.size}, the heads are {width} wide")
        return np.asarray(row, dtype=np.float64).reshape(-1)

    # ---- writing ------------------------------------------------------------------------------------

    def store(self, name: str, value: np.ndarray) -> None:
        param = self.params[name]
        size = math.prod(param_shape(param))
        if value.size != size:
            raise GraphReferenceError(f"{value.size:,} elements for output {name} of {size:,}")
        self.written[name] = value.copy()

    def cache_write(self, op: CacheWrite, value: np.ndarray) -> None:
        param = self.params[op.cache]
        shape = param_shape(param)
        rows = shape[0] if shape else 1
        cache = self.written.get(op.cache)
        if cache is None:
            cache = self.vector(op.cache).copy() if op.cache in self.inputs else np.zeros(math.prod(shape))
        cache = cache.reshape(rows, -1)
        if value.size != cache.shape[1]:
            raise GraphReferenceError(f"{value.size:,} elements for rows of {op.cache} of {cache.shape[1]:,}")
        position = self.position(op.position)
        if not 0 <= position < rows:
            raise GraphReferenceError(f"position {position} is outside {op.cache}'s {rows} rows")
        cache[position] = value
        self.written[op.cache] = cache.reshape(-1)

    def outputs(self) -> Outputs:
        return {name: _as_stored(value, self.params[name]) for name, value in self.written.items()}


def _normed(x: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x) + eps) if x.size else x


def _activation(kind: str, x: np.ndarray) -> np.ndarray:
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(GELU_TANH * (x + 0.044715 * x**3)))
    if kind == "gelu":
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    with np.errstate(over="ignore"):  # exp(-x) of a very negative x is inf: x / inf is the 0 silu has there
        return x / (1.0 + np.exp(-x))


def _as_stored(value: np.ndarray, param: KernelParam) -> np.ndarray:
    """A value as its output parameter holds it, in the parameter's shape."""
    shape = param_shape(param)
    if param.dtype in ("i8", "i32"):
        return np.rint(value).astype(np.int8 if param.dtype == "i8" else np.int32).reshape(shape)
    narrow: Mapping[str, Callable[[np.ndarray], np.ndarray]] = {"bf16": bf16, "f8e4m3": f8, "f4e2m1": f4}
    values = value.astype(np.float32)
    return np.asarray(narrow.get(param.dtype, np.asarray)(values), dtype=np.float32).reshape(shape)
