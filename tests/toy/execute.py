"""The host executor: a Toyl program run in numpy on a fixture's inputs, and graded against the
kernel's reference (what `host_test` and the device's grader report)."""

from __future__ import annotations

import numpy as np

from chiplore.core.target import Correctness, WorstElement
from tests.toy.compiler import Program
from tests.toy.kernel import OUTPUTS, SIGNATURE, fixture, reference
from tests.toy.versions import MULTIPLIES


def execute(program: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of a program that compiled (loads and stores move data; they compute nothing)."""
    values = {name: inputs[name] for name, t in program.tensors.items() if not t.output}
    for s in program.statements:
        if s.op in MULTIPLIES:
            values[s.args[0]] = (values[s.args[1]] @ values[s.args[2]]).astype(np.float32)
        elif s.op == "scale":
            values[s.args[0]] = (values[s.args[1]] * np.float32(s.args[2])).astype(np.float32)
    return {name: values[name] for name, t in program.tensors.items() if t.output}


def signature_problem(program: Program, kernel: str) -> str | None:
    """Why the program is not a `kernel` the harness can run, or None."""
    if program.kernel != kernel:
        return f"the program is kernel `{program.kernel}`, not `{kernel}`"
    shapes = {name: t.shape for name, t in program.tensors.items()}
    if shapes != SIGNATURE:
        return f"its tensors {shapes} are not the kernel's {SIGNATURE}"
    return None


def grade(program: Program, kernel: str, sets: tuple[str, ...], atol: float, rtol: float) -> Correctness:
    """Every output of every fixture set within atol + rtol * |reference|; the worst element otherwise."""
    problem = signature_problem(program, kernel)
    if problem is not None:
        return Correctness(passed=False, sets=sets, message=problem)
    worst: WorstElement | None = None
    for name in sets:
        inputs = fixture(name)
        got, want = execute(program, inputs), reference(inputs)
        for output in OUTPUTS:
            tol = atol + rtol * np.abs(want[output])
            excess = np.abs(got[output] - want[output]) - tol
            index = int(np.argmax(excess))
            if excess[index] > 0 and (worst is None or excess[index] > worst.abs_err - worst.tol):
                worst = WorstElement(fixture=name, output=output, index=index,
                                     abs_err=float(abs(got[output][index] - want[output][index])),
                                     tol=float(tol[index]))  # fmt: skip
    if worst is not None:
        return Correctness(passed=False, worst=worst, sets=sets,
                           message=f"{worst.output}[{worst.index}] off by {worst.abs_err:.3g} (tolerance "
                                   f"{worst.tol:.3g}) on {worst.fixture}")  # fmt: skip
    return Correctness(passed=True, sets=sets, message=f"all outputs within tolerance on {', '.join(sets)}")
