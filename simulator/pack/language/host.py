"""What SimRNGD's example kernels compute, stated in numpy, and a host run of any program.

The vendor docs say what each of their example kernels does ("This kernel doubles a vector": `scale`;
`gemv`, `gelu_ish`, `sum_of_squares`, ...); the pack's own examples (`op_<construct>`) do what their
construct does. A case draws inputs for the kernel's signature (seeded by the program's text, rounded
to each parameter's dtype, so numpy and the chip start from the same numbers) and states the outputs.
The run is the simulator's executor, the same one `host_test` grades kernels with."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.special import erf

from chiplore.core.pack import HostCase, HostRun
from chiplore.core.target import KernelParam
from chiplore.simulator.dsl.parser import FerriteSyntaxError
from chiplore.simulator.execute.executor import Executor, IndexOutOfRange
from chiplore.simulator.execute.factored import ExecutionError
from chiplore.simulator.execute.numerics import bf16, f4, f8
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.toolchain.placement import LoweringError

Arrays = dict[str, np.ndarray]
Expect = Callable[[Arrays], Arrays]
ROUND = {"bf16": bf16, "f8e4m3": f8, "f4e2m1": f4, "f32": lambda v: np.asarray(v, dtype=np.float32)}
POSITION = 3  # the run-time row an `.at(A = p)` example reads
POSITIVE = frozenset({"op_rsqrt", "op_recip"})  # defined for positive inputs only


def _same(source: str, output: str = "y") -> Expect:
    return lambda x: {output: x[source]}


def _map(fn: Callable[[np.ndarray], np.ndarray]) -> Expect:
    return lambda x: {"y": fn(x["x"])}


def _total(fn: Callable[[np.ndarray], float]) -> Expect:
    return lambda x: {"y": np.array([fn(x["x"])])}


def _gelu(v: np.ndarray) -> np.ndarray:
    return 0.5 * v * (1.0 + erf(v / np.sqrt(2.0)))


# kernel name -> (what it computes, the expected outputs)
STATED: dict[str, tuple[str, Expect]] = {
    # the vendor docs' examples, as their pages describe them
    "scale": ("y = 2 x: 'This kernel doubles a vector'", _map(lambda v: 2 * v)),
    "halves": ("y = x, copied in two tiles", _same("x")),
    "load": ("out = src, through DM", _same("src", "out")),
    "stream": ("out = src, four chunks through DM", _same("src", "out")),
    "widen_codes": ("y = x: each f8e4m3 code looked up as bf16", _same("x")),
    "scale_by": ("y = x * s", lambda x: {"y": x["x"] * x["s"]}),
    "gemv": ("y = W x", lambda x: {"y": x["w"] @ x["x"]}),
    "gelu_ish": ("y = x (1 + erf(x / sqrt 2)) / 2", _map(_gelu)),
    "sum_of_squares": ("y[0] = sum of x^2", _total(lambda v: float(np.sum(v * v)))),
    # the pack's examples of one construct each
    **{f"op_{name}": (f"y = {name}(x)", _map(fn)) for name, fn in {
        "exp": np.exp, "erf": erf, "tanh": np.tanh, "rsqrt": lambda v: 1 / np.sqrt(v), "recip": lambda v: 1 / v,
        "square": np.square, "neg": np.negative}.items()},
    **{f"op_{name}": (f"y = {name}(x, 1.5)", _map(fn)) for name, fn in {
        "add": lambda v: v + 1.5, "sub": lambda v: v - 1.5, "mul": lambda v: v * 1.5, "div": lambda v: v / 1.5,
        "max": lambda v: np.maximum(v, 1.5), "min": lambda v: np.minimum(v, 1.5)}.items()},
    "op_collect": ("y = exp(x), repacked into flits before the cast", _map(np.exp)),
    "op_stash": ("y = (x + 1) x: stash keeps x for the later mul(stash)", _map(lambda v: (v + 1) * v)),
    "op_sum_all": ("y[0] = sum of x", _total(np.sum)),
    "op_max_all": ("y[0] = max of x", _total(np.max)),
    "op_result_all": ("y[0] = sum of x, read from the fourth slice of the group", _total(np.sum)),
    "op_allreduce_slices": ("y[0] = sum of x, read from the fourth slice of the group", _total(np.sum)),
    "op_reduce_clusters": ("y[0] = sum of x over both clusters", _total(np.sum)),
    "op_sum_time": ("y[r, p] = sum over t of x[r, t, p]", lambda x: {"y": x["x"].sum(axis=1)}),
    "op_sum_packet": ("y[r, t] = sum over p of x[r, t, p]", lambda x: {"y": x["x"].sum(axis=2)}),
    "op_lut": ("y = x: each f8e4m3 code looked up as bf16", _same("x")),
    "op_f4e2m1": ("y = x: each f4e2m1 code looked up as f8e4m3", _same("x")),
    "op_fn": ("y = 2 x, computed in an inlined fn", _map(lambda v: 2 * v)),
    "op_at": ("y = table[pos]", lambda x: {"y": x["table"][int(x["pos"].reshape(-1)[0])]}),
    "op_rename": ("y = a followed by b", lambda x: {"y": np.concatenate([x["a"], x["b"]])}),
    "op_roll": ("y = x with its two halves swapped", _map(lambda v: np.roll(v, v.size // 2))),
    "op_fill": ("y = x with its first 16 values zero", _map(lambda v: np.concatenate([0 * v[:16], v[16:]]))),
    "op_dma_at": ("y = x", _same("x")),
    "op_at_addr": ("y = x", _same("x")),
}  # fmt: skip


def case(program: str) -> HostCase | None:
    """Inputs and expected outputs for a kernel whose result is stated above, else None."""
    try:
        signature = kernel_signature(program)
    except (ExecutionError, FerriteSyntaxError):
        return None
    stated = STATED.get(signature.name)
    if stated is None:
        return None
    statement, expect = stated
    rng = np.random.default_rng(zlib.crc32(program.encode()))
    inputs = {p.name: _draw(p, rng, positive=signature.name in POSITIVE) for p in signature.params}
    wide = {name: value.astype(np.float64) for name, value in inputs.items()}
    try:
        expected = expect(wide)
    except (KeyError, ValueError, IndexError):  # the program's parameters are not the stated kernel's
        return None
    outputs = {p.name for p in signature.outputs}
    if set(expected) != outputs:
        return None
    return HostCase(statement=statement, inputs=inputs, expected=expected, atol=1e-2, rtol=1e-2)


def _draw(param: KernelParam, rng: np.random.Generator, positive: bool) -> np.ndarray:
    shape = tuple(size for _, size in param.shape)
    if param.dtype in ("i8", "i32"):
        if param.name == "pos":
            return np.full(shape, POSITION, dtype=np.int64)
        return rng.integers(-8, 8, size=shape).astype(np.int64)
    low = 0.25 if positive else -2.0
    values = rng.uniform(low, 2.0, size=shape).astype(np.float32)
    return np.asarray(ROUND.get(param.dtype, bf16)(values), dtype=np.float32)


def run(program: str, inputs: Mapping[str, Any], version: str) -> HostRun:
    """The program's outputs on `inputs` (the executor), or why it could not run."""
    try:
        outputs = Executor(program, dict(inputs), version).run()
    except (ExecutionError, LoweringError, IndexOutOfRange, FerriteSyntaxError) as error:
        return HostRun(error=f"{type(error).__name__}: {error}")
    return HostRun(outputs={name: np.asarray(value) for name, value in outputs.items()})
