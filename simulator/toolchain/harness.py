"""E0102, harness part: a kernel the harness runs must take exactly the parameters it passes.

The harness signature of each kernel is the one its official baseline declares (docs/simrngd.md §3.1):
parameter names, `&`/`&mut`, dtypes, and the HBM layout down to atom digits and axis sizes. A
program whose kernel has another name is not run by the harness (a probe, a test) and is not held
to a signature.

The harness runs the built-in kernels (the packs `simulator/kernels/packs/harness.toml` names, each
`packs/<name>/baseline.fe`) and those a target loads from other packs (`register_kernel`, called by
`chiplore.simulator.kernels.registry`): one process serves one target's kernels, so the compiler holds them
in one table.
"""

from __future__ import annotations

import difflib
import threading
import tomllib
from functools import cache, lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import parse
from chiplore.simulator.dsl.printer import print_mapping
from chiplore.simulator.toolchain.digits import AxisSystem, normalise
from chiplore.simulator.toolchain.env import axis_system, term_digit

BUILTIN_PACKS = Path(__file__).resolve().parents[1] / "kernels" / "packs"
OFFERED = BUILTIN_PACKS / "harness.toml"  # which of the shipped packs are the built-in kernels
PACK_BASELINE = "baseline.fe"

_registered: dict[str, str] = {}  # kernels loaded from elsewhere: name -> baseline source
_lock = threading.Lock()


@cache
def builtin_kernels() -> tuple[str, ...]:
    """The built-in kernels, in offering order: the packs `packs/harness.toml` names."""
    return tuple(tomllib.loads(OFFERED.read_text(encoding="utf-8"))["offered"])


@cache
def builtin_baselines() -> dict[str, str]:
    """Each built-in kernel and its pack's baseline source (the pack's folder is named after it)."""
    return {name: (BUILTIN_PACKS / name / PACK_BASELINE).read_text(encoding="utf-8") for name in builtin_kernels()}


def harness_baseline(kernel: str) -> str | None:
    """The baseline whose signature the harness passes to `kernel`; None for a kernel it does not run."""
    return builtin_baselines().get(kernel) or _registered.get(kernel)


def register_kernel(kernel: str, baseline: str) -> bool:
    """Run `kernel` with `baseline`'s signature from now on; whether that changed anything (the
    caller then drops results checked under the old table)."""
    if builtin_baselines().get(kernel) == baseline:
        return False
    with _lock:
        changed = _registered.get(kernel) != baseline
        _registered[kernel] = baseline
    return changed


class ParamSignature(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    ref: str
    dtype: str
    written: str  # the mapping as the baseline writes it, for messages
    digits: tuple[tuple[str, int, int, int], ...] | None  # (atom, stride, size, atom size), row-major

    def text(self) -> str:
        ref = f"{self.ref} " if self.ref == "&mut" else self.ref
        return f"{self.name}: {ref}hbm<{self.dtype}>{self.written}"


def signature(kernel: ir.KernelDecl, axes: AxisSystem) -> list[ParamSignature]:
    out: list[ParamSignature] = []
    for param in kernel.params:
        if not isinstance(param, ir.TensorParam) or not isinstance(param.type, ir.HbmType):
            continue
        terms = param.type.mapping.terms
        found = [term_digit(t, axes) for t in terms if t.kind == "axis"]
        digits = None
        if all(d is not None for d in found):
            atoms = normalise([d for d in found if d is not None], axes)
            digits = tuple((d.axis, d.stride, d.size, axes.size(d.axis)) for d in atoms)
        out.append(
            ParamSignature(
                name=param.name,
                ref=param.ref,
                dtype=param.type.dtype,
                written=print_mapping(param.type.mapping),
                digits=digits,
            )
        )
    return out


def harness_signature(kernel: str) -> tuple[ParamSignature, ...] | None:
    """The parameters the harness passes to `kernel`; None for a kernel it does not run."""
    baseline = harness_baseline(kernel)
    return None if baseline is None else _signature_of(kernel, baseline)


@lru_cache(maxsize=64)
def _signature_of(kernel: str, baseline: str) -> tuple[ParamSignature, ...] | None:
    program = parse(baseline)
    decl = next((k for k in program.kernels if k.name == kernel), None)
    return None if decl is None else tuple(signature(decl, axis_system(program)))


def check_harness_signature(program: ir.Program) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    axes = axis_system(program)
    for kernel in program.kernels:
        expected = harness_signature(kernel.name)
        if expected is None:
            continue
        wanted = {p.name: p for p in expected}
        given = {p.name: p for p in signature(kernel, axes)}
        spans = {p.name: p.span for p in kernel.params}
        for name, param in given.items():
            if name not in wanted:
                close = difflib.get_close_matches(name, list(wanted), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                out.append(_e0102(f"unknown parameter '{name}' of kernel {kernel.name}: the harness does not pass "
                                  f"it{hint}", spans.get(name)))  # fmt: skip
            elif (
                param.ref != wanted[name].ref
                or param.dtype != wanted[name].dtype
                or (param.digits is not None and param.digits != wanted[name].digits)
            ):
                out.append(_e0102(f"parameter '{name}' of kernel {kernel.name} differs from the harness signature "
                                  f"'{wanted[name].text()}' ({_sizes(wanted[name])})", spans.get(name)))  # fmt: skip
        for name, param in wanted.items():
            if name not in given:
                out.append(_e0102(f"kernel {kernel.name} lacks parameter '{param.text()}' that the harness passes",
                                  kernel.span))  # fmt: skip
        order = [n for n in given if n in wanted]
        if not out and order != [p.name for p in expected]:
            out.append(_e0102(f"parameters of kernel {kernel.name} are out of the harness order: "
                              f"{', '.join(p.name for p in expected)}", kernel.span))  # fmt: skip
    return out


def _sizes(param: ParamSignature) -> str:
    atoms = dict.fromkeys(f"{atom} = {size}" for atom, _, _, size in param.digits or ())
    return ", ".join(atoms) or "no axes"


HARNESS_NOTE = "the harness runs this kernel with the parameters its registered signature declares"


def _e0102(message: str, span: ir.Span | None) -> Diagnostic:
    return Diagnostic(code="E0102", severity="error", message=message, span=span, notes=(HARNESS_NOTE,))


def harness_mismatch(diagnostic: Diagnostic) -> bool:
    """Whether a diagnostic is this module's (it carries HARNESS_NOTE): a kernel whose parameters differ
    from the signature the harness registered for its name, not an unknown name (also E0102)."""
    return diagnostic.code == "E0102" and HARNESS_NOTE in diagnostic.notes
