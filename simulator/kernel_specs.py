"""The kernels the harness runs (SIMULATOR.md 2.6, 6.2, 9): signature, tolerances, weight bytes,
the true weight-movement bound, and the official baseline source.

Only the baseline programs are handed out; the optimised examples under kernels/examples are the
simulator's own test fixtures.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

from chiplore.core.target import KernelParam, KernelSpec
from simulator.cost.bound import weight_bound_cycles
from simulator.dsl import ir
from simulator.dsl.parser import FerriteSyntaxError, parse
from simulator.dsl.printer import print_mapping
from simulator.toolchain.env import axis_system, term_digit
from simulator.toolchain.harness import BASELINES, HARNESS_KERNELS

DESCRIPTIONS = {
    "sliding_project_qkv": "Gemma decode QKV projection: input RMS norm, f8 q/k/v projections with row scales, "
    "per-head norms, RoPE, q out and one k/v cache row",
    "sliding_attention_output": "Gemma decode attention output: f8 projection with row scale, post-attention RMS "
    "norm, residual add",
    "decoder_feedforward": "Gemma decode feed-forward: RMS norm, f4 up/gate with f8 block scales, GeGLU, f4 down, "
    "post-FF norm, residual and layer scalar",
}
LABELS = {"sliding_project_qkv": "QKV", "sliding_attention_output": "O", "decoder_feedforward": "FFN"}
TOLERANCES = {  # (atol, rtol), the official criterion (6.2)
    "sliding_project_qkv": (0.04, 1e-2),
    "sliding_attention_output": (0.05, 1e-2),
    "decoder_feedforward": (0.01, 1e-2),
}
WEIGHT_SUFFIXES = ("_weight", "_weight_packed", "_weight_scale", "_global_scale")


def is_weight(name: str) -> bool:
    """Weight codes and their scales count towards the bound; norm weights do not (section 9)."""
    return name.endswith(WEIGHT_SUFFIXES) and "rms" not in name


def kernel_specs() -> list[KernelSpec]:
    return [_spec(name) for name in HARNESS_KERNELS]


def kernel_spec(name: str) -> KernelSpec:
    if name not in HARNESS_KERNELS:
        raise KeyError(f"unknown kernel {name!r}; the harness runs {', '.join(HARNESS_KERNELS)}")
    return _spec(name)


def _spec(name: str) -> KernelSpec:
    source, params, axes = _signature(name)
    weight_bytes = sum(_bytes(p) for p in params if is_weight(p.name))
    atol, rtol = TOLERANCES[name]
    return KernelSpec(
        name=name,
        description=DESCRIPTIONS[name],
        label=LABELS[name],
        params=params,
        axes=axes,
        atol=atol,
        rtol=rtol,
        weight_bytes=weight_bytes,
        bound_cycles=weight_bound_cycles(weight_bytes),
        baseline_source=source,
    )


@cache
def _signature(name: str) -> tuple[str, tuple[KernelParam, ...], dict[str, int]]:
    source = (BASELINES / HARNESS_KERNELS[name]).read_text()
    program = parse(source)
    system = axis_system(program)
    kernel = next(k for k in program.kernels if k.name == name)
    params: list[KernelParam] = []
    for param in kernel.params:
        if not isinstance(param, ir.TensorParam) or not isinstance(param.type, ir.HbmType):
            continue
        shape = []
        for term in param.type.mapping.terms:
            digit = term_digit(term, system) if term.kind == "axis" else None
            label = print_mapping(ir.Mapping(terms=(term,))).strip("[]")
            shape.append((label, digit.size if digit is not None else term.value or 1))
        ref = "&mut " if param.ref == "&mut" else param.ref
        params.append(
            KernelParam(
                name=param.name,
                type=f"{ref}hbm<{param.type.dtype}>{print_mapping(param.type.mapping)}",
                mutable=param.ref == "&mut",
                dtype=param.type.dtype,
                shape=tuple(shape),
            )
        )
    axes = {a: system.size(a) for a in (*system.atoms, *system.composites)}
    return source, tuple(params), axes


def _bytes(param: KernelParam) -> int:
    return math.ceil(math.prod(size for _, size in param.shape) * ir.DTYPE_BYTES[param.dtype])


def input_bytes(kernel: str, source: str) -> int:
    """Bytes a job uploads per fixture set: every HBM parameter of the program's kernel."""
    if kernel in HARNESS_KERNELS:
        _, params, _ = _signature(kernel)
        return sum(_bytes(p) for p in params)
    try:
        program = parse(source)
    except FerriteSyntaxError:
        return 0  # a program that does not parse never reaches the device
    system = axis_system(program)
    total = 0.0
    for decl in program.kernels:
        for param in decl.params:
            if isinstance(param, ir.TensorParam) and isinstance(param.type, ir.HbmType):
                digits = [term_digit(t, system) for t in param.type.mapping.terms if t.kind == "axis"]
                total += math.prod(d.size for d in digits if d is not None) * ir.DTYPE_BYTES.get(param.type.dtype, 1)
    return math.ceil(total)


def baseline_path(name: str) -> Path:
    return BASELINES / HARNESS_KERNELS[name]
