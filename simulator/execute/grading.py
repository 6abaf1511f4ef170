"""Correctness of a program on fixture sets: draw the case's inputs, execute, compare with its
reference (docs/simrngd.md §9.4), for any kernel a `KernelCase` describes.

Results are cached per (source digest, case, toolchain, set): outputs do not depend on the chip's
timing, so a job resubmitted or re-measured is graded once.
"""

from __future__ import annotations

import hashlib
import math
from functools import lru_cache

import numpy as np

from chiplore.core.target import Correctness, TestResult
from chiplore.simulator.execute.cases import KernelCase, harness_case
from chiplore.simulator.execute.criterion import grade_outputs
from chiplore.simulator.execute.executor import ExecutionError, IndexOutOfRange, execute_program
from chiplore.simulator.execute.fixtures import fixture
from chiplore.simulator.execute.recipe import draw_inputs
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.execute.values import InputError, Inputs, Outputs, param_shape
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.harness import builtin_kernels
from chiplore.simulator.toolchain.placement import LoweringError

SMOKE_SET = "g0"


def case_inputs(case: KernelCase, fixture_set: str) -> Inputs:
    """The inputs of one fixture set (built-in kernels share the cached `fixture` sets)."""
    if case.key == f"harness:{case.name}" and case.name in builtin_kernels():
        return fixture(case.name, fixture_set)
    return _drawn(case, fixture_set)


def expected_outputs(case: KernelCase, fixture_set: str) -> Outputs:
    """The reference's outputs on one set (cached, read-only)."""
    return dict(_expected(case, fixture_set))


def grade_case(source: str, case: KernelCase, version: str, sets: tuple[str, ...]) -> Correctness:
    """The case's criterion over the sets; the worst element over all of them.

    Raises IndexOutOfRange (the device would hang), InputError (the program's parameters are not the
    kernel's), ExecutionError or LoweringError (the executor cannot run it): ungraded, not wrong."""
    _check_signature(source, case)
    digest = hashlib.sha256(source.encode()).hexdigest()
    results = [_graded(digest, case, version, fixture_set, source) for fixture_set in sets]
    failed = [r for r in results if not r.passed]
    graded = [r for r in results if r.worst is not None]
    worst = max(graded, key=lambda r: r.worst.abs_err / r.worst.tol, default=None)  # type: ignore[union-attr]
    message = "; ".join(r.message for r in failed) if failed else (worst.message if worst else "no outputs")
    return Correctness(passed=not failed, worst=worst.worst if worst else None, sets=sets, message=message)


def grade_program(source: str, kernel: str, version: str, sets: tuple[str, ...]) -> Correctness:
    """A built-in kernel's official criterion over the sets."""
    return grade_case(source, harness_case(kernel), version, sets)


def host_test(source: str, case: KernelCase, version: str, sets: tuple[str, ...] = (SMOKE_SET,)) -> TestResult:
    """Check, then execute and grade on the host (free, slower than the device): the Target's
    `host_test` for any kernel a case describes."""
    checked = check(source, version)
    base = {"kernel": case.name, "toolchain": checked.version, "diagnostics": checked.diagnostics}
    if not checked.ok:
        return TestResult(**base, compiled=False, message="the program does not compile")
    try:
        correctness = grade_case(source, case, checked.version, sets)
    except IndexOutOfRange as error:
        return TestResult(**base, compiled=True, correctness=Correctness(passed=False, message=str(error)),
                          message=f"would hang on the device: {error}")  # fmt: skip
    except (ExecutionError, LoweringError) as error:
        return TestResult(**base, compiled=True, message=f"not executed: {error}")
    return TestResult(**base, compiled=True, correctness=correctness, message=correctness.message)


def _check_signature(source: str, case: KernelCase) -> None:
    """The program must take the parameters the case draws (names, dtypes, element counts, `&mut`)."""
    program = kernel_signature(source)
    if program.name != case.name:
        raise InputError(f"the program's kernel is {program.name}, not {case.name}")
    wanted = {p.name: (p.dtype, math.prod(param_shape(p)), p.mutable) for p in case.signature.params}
    given = {p.name: (p.dtype, math.prod(param_shape(p)), p.mutable) for p in program.params}
    differ = sorted(n for n in set(wanted) | set(given) if wanted.get(n) != given.get(n))
    if differ:
        raise InputError(f"the program's parameters {', '.join(differ)} differ from kernel {case.name}'s signature")


@lru_cache(maxsize=64)
def _drawn(case: KernelCase, fixture_set: str) -> Inputs:
    values = draw_inputs(case.recipe, case.signature, fixture_set, seed=case.fixture_seed)
    for value in values.values():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    return values


@lru_cache(maxsize=64)
def _expected(case: KernelCase, fixture_set: str) -> tuple[tuple[str, np.ndarray], ...]:
    outputs = case.reference(case_inputs(case, fixture_set))
    frozen = []
    for name, value in outputs.items():
        array = np.array(value, dtype=np.float32)
        array.setflags(write=False)
        frozen.append((name, array))
    return tuple(frozen)


@lru_cache(maxsize=512)
def _graded(digest: str, case: KernelCase, version: str, fixture_set: str, source: str) -> Correctness:
    # ExecutionError propagates: a program the executor cannot run is ungraded, not wrong.
    outputs = execute_program(source, case_inputs(case, fixture_set), version)
    expected = {fixture_set: expected_outputs(case, fixture_set)}
    return grade_outputs({fixture_set: outputs}, expected, case.atol, case.rtol, case.graded)
