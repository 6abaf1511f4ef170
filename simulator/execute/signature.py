"""A program's kernel signature as the executor sees it: its HBM parameters, their dtypes and shapes.

`kernel_signature(source)` is what `execute_program` checks inputs against and what `draw_inputs`
draws them for; a kernel pack declares the same thing through its baseline program.
"""

from __future__ import annotations

import functools

from pydantic import BaseModel, ConfigDict

from chiplore.core.target import KernelParam
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import parse
from chiplore.simulator.dsl.printer import print_mapping
from chiplore.simulator.execute.factored import ExecutionError
from chiplore.simulator.toolchain.env import axis_system, term_digit


class KernelSignature(BaseModel):
    """One kernel's name, its HBM parameters in declaration order, and its axes' sizes."""

    model_config = ConfigDict(frozen=True)

    name: str
    params: tuple[KernelParam, ...]
    axes: dict[str, int]

    @property
    def outputs(self) -> tuple[KernelParam, ...]:
        return tuple(p for p in self.params if p.mutable)

    def param(self, name: str) -> KernelParam:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"kernel {self.name} has no parameter {name!r}")


def kernel_signature(source: str) -> KernelSignature:
    """The signature of the one kernel in `source` (an ExecutionError when there is not exactly one,
    or a parameter's shape depends on an undeclared axis)."""
    return _signature(source)


@functools.lru_cache(maxsize=128)
def _signature(source: str) -> KernelSignature:
    program = parse(source)
    if len(program.kernels) != 1:
        raise ExecutionError(f"a Ferrite file holds one kernel, found {len(program.kernels)}")
    kernel = program.kernels[0]
    system = axis_system(program)
    params: list[KernelParam] = []
    for param in kernel.params:
        if not isinstance(param, ir.TensorParam) or not isinstance(param.type, ir.HbmType):
            continue
        shape = []
        for term in param.type.mapping.terms:
            digit = term_digit(term, system) if term.kind == "axis" else None
            if term.kind == "axis" and digit is None:
                raise ExecutionError(f"parameter {param.name}: {term.axis} is not a declared axis")
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
    return KernelSignature(name=kernel.name, params=tuple(params), axes=axes)
