"""The built-in kernels as the harness offers them (docs/simrngd.md §3.1, §9.1, §11): signature, tolerances,
weight bytes, the true weight-movement bound and the official baseline source, each read from its
kernel pack (simulator/kernels/packs/<name>/). A target's own kernels (packs from the user's paths
too) are `chiplore.simulator.kernels.registry.KernelRegistry`'s.

Only the baseline programs are handed out; the optimised examples the tests use live under
tests/simulator/programs, outside the product.
"""

from __future__ import annotations

import math
from pathlib import Path

from chiplore.core.target import KernelSpec
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.kernels.builtin import builtin_pack, builtin_packs
from chiplore.simulator.kernels.manifest import BASELINE
from chiplore.simulator.kernels.pack import KernelPack, param_bytes
from chiplore.simulator.toolchain.env import axis_system, term_digit


def kernel_specs() -> list[KernelSpec]:
    """The built-in kernels, the Gemma decode layer first."""
    return [pack.spec for pack in builtin_packs().values()]


def kernel_spec(name: str) -> KernelSpec:
    """One built-in kernel (a KeyError naming the built-in kernels for any other name)."""
    return builtin_pack(name).spec


def input_bytes(kernel: str, source: str) -> int:
    """Bytes a job uploads per fixture set, for the built-in kernels (`packed_input_bytes`)."""
    return packed_input_bytes(builtin_packs().get(kernel), source)


def packed_input_bytes(pack: KernelPack | None, source: str) -> int:
    """Bytes a job uploads per fixture set: every HBM parameter of the kernel (the pack's signature;
    for a program of no pack, a probe, what its own parameters declare)."""
    if pack is not None:
        return sum(param_bytes(p) for p in pack.signature.params)
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
    """Where a built-in kernel's official baseline lives."""
    return builtin_pack(name).folder / BASELINE
