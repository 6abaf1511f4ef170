"""A kernel's harness signature as the generator needs it: the axes it declares and its parameters.

Read from the kernel's baseline (or any program with the kernel's signature) with the Ferrite parser.
A generated program must declare exactly these parameters (E0102), so it reprints them as written; it
may declare more axes, and names the vector axis of a multi-term parameter (`[Ns, Gs, Ds]`) by the
composite the baseline declares for it, or by a composite of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import parse
from chiplore.simulator.dsl.printer import print_mapping


class SignatureError(ValueError):
    """The signature text is not one kernel over declared axes."""


@dataclass(frozen=True)
class Dim:
    """One term of a parameter's shape: `axis` divided by `divisor` (`H / 16` is ("H", 16)); a unit
    term (`[1]`) has axis None."""

    axis: str | None
    divisor: int = 1


@dataclass(frozen=True)
class Param:
    name: str
    mutable: bool
    dtype: str
    dims: tuple[Dim, ...]
    text: str  # the parameter as the signature writes it: `x: &hbm<bf16>[H]`


@dataclass
class Signature:
    """The kernel's name, its axes (atoms and composites, in declaration order) and its parameters."""

    kernel: str
    atoms: dict[str, int]
    composites: dict[str, tuple[str, ...]]
    params: tuple[Param, ...]
    extra_atoms: dict[str, int] = field(default_factory=dict)
    extra_composites: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def param(self, name: str) -> Param:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(f"kernel {self.kernel} has no parameter {name!r}")

    def size(self, axis: str) -> int:
        atoms = {**self.atoms, **self.extra_atoms}
        if axis in atoms:
            return atoms[axis]
        parts = {**self.composites, **self.extra_composites}[axis]
        return math.prod(atoms[p] for p in parts)

    def dim_size(self, dim: Dim) -> int:
        return 1 if dim.axis is None else math.ceil(self.size(dim.axis) / dim.divisor)

    def elements(self, name: str) -> int:
        return math.prod(self.dim_size(d) for d in self.param(name).dims)

    def fresh(self, stem: str) -> str:
        """An axis name no declaration uses yet."""
        taken = {*self.atoms, *self.composites, *self.extra_atoms, *self.extra_composites,
                 *(p.name for p in self.params), self.kernel}  # fmt: skip
        name, index = stem, 0
        while name in taken:
            index += 1
            name = f"{stem}{index}"
        return name

    def add_atom(self, stem: str, size: int) -> str:
        name = self.fresh(stem)
        self.extra_atoms[name] = size
        return name

    def add_composite(self, stem: str, parts: tuple[str, ...]) -> str:
        name = self.fresh(stem)
        self.extra_composites[name] = parts
        return name

    def axis_of(self, dims: tuple[Dim, ...]) -> str:
        """One axis naming these plain terms flattened row-major (a declared composite when one fits)."""
        if any(d.divisor != 1 or d.axis is None for d in dims) or not dims:
            raise SignatureError(f"{dims} are not whole axes")
        if len(dims) == 1:
            return str(dims[0].axis)
        atoms = tuple(self._atoms(str(d.axis)) for d in dims)
        flat = tuple(a for part in atoms for a in part)
        for name, parts in {**self.composites, **self.extra_composites}.items():
            if parts == flat:
                return name
        return self.add_composite("V", flat)

    def _atoms(self, axis: str) -> tuple[str, ...]:
        if axis in self.atoms or axis in self.extra_atoms:
            return (axis,)
        return {**self.composites, **self.extra_composites}[axis]

    def axes_text(self) -> str:
        """The `axes!` declaration: the signature's axes, then the generator's own."""
        atoms = {**self.atoms, **self.extra_atoms}
        parts = [f"{n} = {s}" for n, s in atoms.items()]
        parts += [f"{n} = ({', '.join(p)})" for n, p in {**self.composites, **self.extra_composites}.items()]
        lines, line = [], ""
        for part in parts:
            if line and len(line) + len(part) > 100:
                lines.append(line.rstrip())
                line = ""
            line += part + ", "
        lines.append(line.rstrip(", ") + ",")
        return "axes! {\n" + "".join(f"    {text}\n" for text in lines) + "}"

    def params_text(self) -> str:
        return "".join(f"    {p.text},\n" for p in self.params)


def read_signature(source: str, kernel: str | None = None) -> Signature:
    """The signature of `kernel` (or the file's one kernel) in a Ferrite program."""
    program = parse(source)
    kernels = [k for k in program.kernels if kernel is None or k.name == kernel]
    if len(kernels) != 1:
        raise SignatureError(f"expected one kernel{f' named {kernel}' if kernel else ''}, found {len(kernels)}")
    atoms: dict[str, int] = {}
    composites: dict[str, tuple[str, ...]] = {}
    for item in program.items:
        if isinstance(item, ir.AxesDecl):
            for axis in item.axes:
                if isinstance(axis, ir.AxisAtom):
                    atoms[axis.name] = axis.size
                else:
                    composites[axis.name] = axis.parts
    params = []
    for param in kernels[0].params:
        if not isinstance(param, ir.TensorParam) or not isinstance(param.type, ir.HbmType):
            raise SignatureError(f"parameter {getattr(param, 'name', '?')} is not an HBM tensor")
        dims = tuple(_dim(term, atoms, composites) for term in param.type.mapping.terms)
        ref = "&mut " if param.ref == "&mut" else param.ref
        text = f"{param.name}: {ref}hbm<{param.type.dtype}>{print_mapping(param.type.mapping)}"
        params.append(Param(param.name, param.ref == "&mut", param.type.dtype, dims, text))
    return Signature(kernels[0].name, atoms, composites, tuple(params))


def _dim(term: ir.Term, atoms: dict[str, int], composites: dict[str, tuple[str, ...]]) -> Dim:
    if term.kind == "unit":
        return Dim(None)
    if term.kind != "axis" or term.axis not in {**atoms, **composites}:
        raise SignatureError(f"shape term {term} is not a declared axis")
    if not term.ops:
        return Dim(str(term.axis))
    if len(term.ops) == 1 and term.ops[0][0] == "/" and isinstance(term.ops[0][1], int):
        return Dim(str(term.axis), term.ops[0][1])
    raise SignatureError(f"shape term {term} is neither an axis nor an axis over a block")
