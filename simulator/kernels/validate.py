"""A kernel pack validated with the compiler and the executor (docs/kernels.md, "Validation").

On top of what reading checks (`pack.read_pack`): the toolchain is one this ferc has; the baseline
compiles under it; the reference (reference.py, or the op graph's where the pack has none) runs on
the smoke fixtures and returns, for every output it grades, an array of the output's shape and kind;
the baseline passes that reference on the smoke fixtures; and where the target has a design space
for the kernel, the program written from its first point passes too. Each failure is one
`PackProblem` line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from chiplore.core.errors import Terminated
from chiplore.core.pack import DesignSpace, Facts, points
from chiplore.core.target import KernelSpec
from chiplore.simulator import TOOLCHAIN_VERSIONS
from chiplore.simulator.execute.executor import ExecutionError, IndexOutOfRange
from chiplore.simulator.execute.factored import MAX_ELEMENTS, TooDense
from chiplore.simulator.execute.grading import SMOKE_SET, case_inputs, grade_case
from chiplore.simulator.execute.values import InputError, param_shape
from chiplore.simulator.kernels import limits
from chiplore.simulator.kernels.manifest import BASELINE, PackProblem
from chiplore.simulator.kernels.pack import KernelPack
from chiplore.simulator.toolchain.check import check, documented_shape
from chiplore.simulator.toolchain.harness import harness_mismatch
from chiplore.simulator.toolchain.placement import LoweringError

SpaceFor = Callable[[KernelSpec, Facts], DesignSpace | None]
FactsFor = Callable[[str], Facts]
INTEGER_DTYPES = ("i8", "i32")


def validate_pack(pack: KernelPack, space_for: SpaceFor | None = None, facts_for: FactsFor | None = None) -> None:
    """Raise a PackProblem for the first thing wrong with `pack`; return when it is a kernel the
    target can offer. `space_for` gives the target's design space for the kernel (None: none), and
    `facts_for(version)` the facts its first point is written from (default: none, the documented
    values)."""
    toolchain = pack.manifest.toolchain
    if toolchain not in TOOLCHAIN_VERSIONS:
        raise PackProblem(f"toolchain {toolchain!r} is not one of this ferc's: {', '.join(TOOLCHAIN_VERSIONS)}")
    # A baseline is written for a chip: on one of another shape (a truth file's [shape]) it may not
    # compile, as the shipped kernels' do not. There the pack is what its op graph generates: its first
    # design must compile and pass, and the loop's root is that design (it says why).
    refused = _compile_problem(pack.baseline, toolchain, BASELINE)
    if refused and documented_shape():
        raise PackProblem(refused)
    check_reference(pack)
    if not refused:
        _passes(pack, pack.baseline, BASELINE)
    facts = facts_for(toolchain) if facts_for is not None else {}
    space = space_for(pack.spec, facts) if space_for is not None else None  # for the chip's shape
    if space is None and refused:
        raise PackProblem(f"{refused}, and the target has no design space for kernel {pack.name} to stand in")
    if space is not None:
        first = next(iter(points(space, facts)), None)
        if first is None:
            why = getattr(space, "why_empty", None)  # the generated space says what refuses its settings
            reason = f": {why(facts)}" if why is not None else ""
            also = f"{refused}; " if refused else ""
            raise PackProblem(f"{also}the design space of kernel {pack.name} has no valid point under {toolchain}"
                              f"{reason}")  # fmt: skip
        source = space.source(first, facts, toolchain)
        what = "the program generated from its op graph (the design space's first point)"
        _compiles(source, toolchain, what)
        _passes(pack, source, what)


def check_reference(pack: KernelPack) -> None:
    """The reference on the smoke fixtures: every graded output there, in its parameter's shape, a
    finite array of numbers (integers for an integer output), and nothing that is not an output."""
    inputs = drawn_inputs(pack, SMOKE_SET)
    for fixture_set in sorted({name for recipe in pack.manifest.fixtures.inputs.values() for name in recipe.sets}):
        drawn_inputs(pack, fixture_set)  # what a set changes is drawn once here, not first met while grading
    label = pack.reference_label
    try:
        # a reference that overflows is judged by what it returns, below
        with np.errstate(all="ignore"), limits.time_limit(limits.REFERENCE_LIMIT_S):
            outputs = pack.reference(inputs)
    except limits.OutOfTime:
        raise PackProblem(f"{label} does not return within {limits.REFERENCE_LIMIT_S:.0f} s on the smoke "
                          "fixtures") from None  # fmt: skip
    except Terminated:
        raise
    except (Exception, SystemExit) as error:  # the pack's own code: whatever it raises is the pack's problem
        raise PackProblem(f"{label} raises {type(error).__name__} on the smoke fixtures: {error}") from None
    if not isinstance(outputs, Mapping):
        raise PackProblem(f"{label}: reference returns {type(outputs).__name__}, not a dict of outputs")
    params = {p.name: p for p in pack.signature.outputs}
    strangers = sorted(str(name) for name in outputs if name not in params)
    if strangers:
        raise PackProblem(f"{label} returns {', '.join(strangers)}, not an output of kernel {pack.name} "
                          f"(outputs: {', '.join(params)})")  # fmt: skip
    missing = [name for name in pack.manifest.graded or params if name not in outputs]
    if missing and pack.manifest.graded is not None:
        raise PackProblem(f"{label} does not return graded output {', '.join(missing)}")
    if not outputs:
        raise PackProblem(f"{label} returns no output")
    for name, value in outputs.items():
        param = params[name]
        array = np.asarray(value)
        if array.shape != param_shape(param):
            raise PackProblem(f"{label}: output {name} has shape {array.shape}, but the baseline declares "
                              f"{param.type} of shape {param_shape(param)}")  # fmt: skip
        integer = param.dtype in INTEGER_DTYPES
        if not (np.issubdtype(array.dtype, np.integer) if integer else np.issubdtype(array.dtype, np.floating)):
            kind = "integers" if integer else "floats"
            raise PackProblem(f"{label}: output {name} is {array.dtype}, but {param.dtype} holds {kind}")
        if not integer and not np.isfinite(array).all():
            raise PackProblem(f"{label}: output {name} holds NaN or infinity on the smoke fixtures")


def drawn_inputs(pack: KernelPack, fixture_set: str) -> dict[str, object]:
    """The pack's inputs of one fixture set, or one line saying why its recipe cannot draw them (a code
    distribution for another dtype, a RoPE table for a parameter of another shape, a row index past its axis)."""
    try:
        with np.errstate(all="ignore"):  # huge offsets overflow to infinity, which the recipe's checks refuse
            return dict(case_inputs(pack.case, fixture_set))
    except (InputError, ValueError, ArithmeticError) as error:
        raise PackProblem(f"fixtures: set {fixture_set}: {error}") from None


def _compiles(source: str, toolchain: str, what: str) -> None:
    problem = _compile_problem(source, toolchain, what)
    if problem:
        raise PackProblem(problem)


def _compile_problem(source: str, toolchain: str, what: str) -> str:
    """Why `source` does not compile, in one line ("" when it does)."""
    # E0102 holds a program to the signature the harness passes, and the pack's baseline declares it:
    # only another pack's registration of this kernel could make it differ, and this pack replaces that.
    # An unknown name (a dtype `f16`) is E0102 too, and the pack's own: it reached the executor, which
    # raised KeyError in every command while the pack was on CHIPLORE_KERNELS.
    errors = [d for d in check(source, toolchain).diagnostics if d.is_error and not harness_mismatch(d)]
    if not errors:
        return ""
    first = errors[0]
    where = f" (line {first.span.line})" if first.span is not None else ""
    more = f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return f"{what} does not compile under {toolchain}: error[{first.code}]{where}: {first.message}{more}"


def _passes(pack: KernelPack, source: str, what: str) -> None:
    try:
        result = grade_case(source, pack.case, pack.manifest.toolchain, (SMOKE_SET,))
    except (InputError, ExecutionError, IndexOutOfRange, LoweringError) as error:
        raise PackProblem(f"{what} cannot be run on the smoke fixtures: {error}{_dense_hint(pack, error)}") from None
    if not result.passed:
        worst = result.worst
        detail = (f"; worst: {worst.output}[{worst.index}] off by {worst.abs_err:.4g} (tolerance {worst.tol:.4g})"
                  if worst is not None else "")  # fmt: skip
        raise PackProblem(f"{what} fails its reference on the smoke fixtures ({result.message}{detail})")


def _dense_hint(pack: KernelPack, error: Exception) -> str:
    """Which inputs to give `distinct_rows` when the executor refused a tensor too large to hold densely
    (it names the program's tensor, not the input the pack draws whole)."""
    if not isinstance(error, TooDense):
        return ""
    recipes = pack.case.recipe.inputs
    dense = [p.name for p in pack.case.signature.params
             if not p.mutable and p.name in recipes and recipes[p.name].distinct_rows is None
             and math.prod(param_shape(p)) > MAX_ELEMENTS]  # fmt: skip
    if not dense:
        return ""
    return (f" (input {', '.join(dense)} is drawn whole, every row distinct: give it distinct_rows, and the executor "
            "holds it by row)")  # fmt: skip
