"""What a decode kernel computes, as a small graph over a fixed vocabulary of ops.

A kernel declares its computation once (a kernel pack's `kernel.toml` holds it as `[[ops]]`); a
target's design generator writes programs from it, and a reference checks them. Values are named:
an op reads kernel inputs (HBM parameters, by name) or earlier ops' outputs, and writes a new name;
`store` and `cache_write` write a value into an output parameter. Every vector is 1-D; a matrix is
a 2-D HBM parameter `[N, K]` (rows are outputs). Arithmetic is f32 unless a rounding says otherwise
(`round_bf16` on ops whose result a reference rounds), so a generator knows where narrowing is
exact and where it is not.

Rounding points: every op that defines a value takes `round_bf16` (default false). When true, the
value is rounded to bf16 (round to nearest even, chiplore.simulator.execute.numerics.bf16) once the
op has computed it in full, scales included; later ops read the rounded value. A value written to a
bf16 output parameter is rounded there as well (a `store` or `cache_write` rounds to its output's
dtype). A reference derived from the graph (SimRNGD's is chiplore.simulator.execute.graph_reference)
accumulates in f64 between these points: the ideal a device approximates, within the kernel's tolerances.

Semantics, with `x` the op's input:
- `rms_norm`:   x / sqrt(mean(x^2) + eps) [* weight]
- `head_norm`:  rms_norm applied to each contiguous block of `head_dim` elements [* weight, per block]
- `matvec`:     y[n] = sum_k W[n, k] x[k], W decoded by its dtype; `scale` is per row ([N]), per block
                of `block` along K ([N, K / block]) or per tensor ([1]); `global_scale` multiplies all
- `rope`:       per head of `head_dim`: x * cos[p] + swap_halves(x) * sin[p], p = the `position`
                input's value; the sign convention is the table's (a table whose low half is negated
                gives the usual rotation)
- `gelu_tanh`:  element-wise, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
- `gelu`:       element-wise, 0.5 x (1 + erf(x / sqrt(2)))
- `silu`:       element-wise, x / (1 + exp(-x))
- `mul`, `add`: element-wise on two values of one length (`b` may be a length-1 input: a scalar)
- `scale`:      x * `by` (a number)
- `store`:      the value written to an output parameter of the same length
- `cache_write`: the value written to row `position` of a 2-D (or more) output cache
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Op(BaseModel):
    # strict: a pack's `round_bf16 = "yes"` or `head_dim = "256"` is refused, not read as true or 256
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def reads(self) -> tuple[str, ...]:
        """The names this op reads (kernel inputs or earlier outputs)."""
        return ()

    def writes(self) -> str | None:
        """The value this op defines (None for a write to an output parameter)."""
        return getattr(self, "out", None)


class RmsNorm(_Op):
    op: Literal["rms_norm"] = "rms_norm"
    input: str
    weight: str | None = None
    eps: float = 1e-6
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.input, *([self.weight] if self.weight else []))


class HeadNorm(_Op):
    op: Literal["head_norm"] = "head_norm"
    input: str
    head_dim: int = Field(gt=0)
    weight: str | None = None  # [head_dim], the same for every head
    eps: float = 1e-6
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.input, *([self.weight] if self.weight else []))


class MatVec(_Op):
    op: Literal["matvec"] = "matvec"
    input: str
    weight: str  # [N, K] (f4e2m1 packs two codes per byte along K)
    scale: str | None = None
    scale_kind: Literal["row", "block", "tensor"] | None = None  # required with `scale`
    block: int = Field(16, gt=0)  # elements of K per block scale
    global_scale: str | None = None  # a [1] input
    out: str
    round_bf16: bool = False

    @model_validator(mode="after")
    def _scaled(self) -> MatVec:
        if (self.scale is None) != (self.scale_kind is None):
            raise ValueError(f"matvec {self.out}: give both scale and scale_kind, or neither")
        return self

    def reads(self) -> tuple[str, ...]:
        return (self.input, self.weight, *(n for n in (self.scale, self.global_scale) if n))


class Rope(_Op):
    op: Literal["rope"] = "rope"
    input: str
    cos: str  # [positions, head_dim]
    sin: str
    position: str  # an i32 [1] input
    head_dim: int = Field(gt=0)
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.input, self.cos, self.sin, self.position)


class Activation(_Op):
    op: Literal["gelu_tanh", "gelu", "silu"]
    input: str
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.input,)


class Elementwise(_Op):
    op: Literal["mul", "add"]
    a: str
    b: str
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.a, self.b)


class Scale(_Op):
    op: Literal["scale"] = "scale"
    input: str
    by: float
    out: str
    round_bf16: bool = False

    def reads(self) -> tuple[str, ...]:
        return (self.input,)


class Store(_Op):
    op: Literal["store"] = "store"
    input: str
    to: str  # an output parameter

    def reads(self) -> tuple[str, ...]:
        return (self.input,)


class CacheWrite(_Op):
    op: Literal["cache_write"] = "cache_write"
    input: str
    cache: str  # an output parameter [positions, ...]
    position: str  # an i32 [1] input

    def reads(self) -> tuple[str, ...]:
        return (self.input, self.position)


Op = Annotated[
    RmsNorm | HeadNorm | MatVec | Rope | Activation | Elementwise | Scale | Store | CacheWrite,
    Field(discriminator="op"),
]


class OpGraph(BaseModel):
    """A kernel's computation: ops in an order where every name is defined before it is read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ops: tuple[Op, ...]

    def check(self, inputs: set[str], outputs: set[str]) -> list[str]:
        """What is wrong with the graph against a kernel's parameters (empty when nothing is)."""
        problems: list[str] = []
        defined = set(inputs)
        written: dict[str, int] = {}  # output -> the op (1-based) that writes it
        for index, op in enumerate(self.ops):
            for name in op.reads():
                if name not in defined:
                    problems.append(
                        f"op {index + 1} ({op.op}) reads {name!r}, which is neither an input nor defined above"
                    )
            out = op.writes()
            if out is not None:
                if out in defined:
                    problems.append(f"op {index + 1} ({op.op}) redefines {out!r}")
                defined.add(out)
            target = getattr(op, "to", None) or getattr(op, "cache", None)
            if target is not None:
                if target not in outputs:
                    problems.append(f"op {index + 1} ({op.op}) writes {target!r}: not an output parameter")
                elif target in written:  # each writes the whole output: the later one would hide the first
                    problems.append(f"op {index + 1} ({op.op}) writes {target!r} again (op {written[target]} wrote it)")
                written.setdefault(target, index + 1)
        problems += [f"output {name!r} is never written" for name in sorted(outputs - set(written))]
        return problems
