"""The three judges of a program and the class of their verdict.

* `ferc check`: accepted, or refused with codes;
* the executor: outputs, or why it could not run (run twice: the same bytes both times);
* the numpy interpretation, where the program has one.

The invariants (issue 20): a program the compiler accepts never reads outside a tensor (the executor
reads NaN there), never turns finite inputs into NaN, computes the same on every run and agrees with
numpy; a program refused by a placement or coverage rule, executed anyway, is wrong or undefined
(if it computes the right answer, the rule is over-strict). Every verdict gets a class; the classes
in DISAGREEMENTS are bugs unless `explained` says why they are intended.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from chiplore.simulator.execute.difftest.mutate import default_recipe
from chiplore.simulator.execute.difftest.program import Generated
from chiplore.simulator.execute.executor import IndexOutOfRange, execute_program
from chiplore.simulator.execute.factored import ExecutionError
from chiplore.simulator.execute.recipe import draw_inputs
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.execute.values import InputError, InputValue, Outputs, decode
from chiplore.simulator.toolchain.check import _check_guarded
from chiplore.simulator.toolchain.placement import LoweringError

# Rules about where data lives and whether all of it is there: a program they refuse, run anyway,
# must compute garbage or nothing (hardware-shape, type and capacity rules are not judged this way).
PLACEMENT_RULES = ("0204", "0205", "0207", "0404", "0710", "0801")
# Warnings that say a program reads what nothing wrote: NaN from it is what the compiler announced.
UNDEFINED_WARNINGS = ("N0206", "W0205", "W0801", "W0410")
RTOL = 1e-2

# Rules whose refusal says nothing about values (the program's text is not a program): not run.
FRONT_END = ("0101", "0102", "0103", "0104", "0501")
# Rules about the hardware's units and limits, which the executor does not model (it computes values
# only): a program they refuse may well compute the right numbers when run anyway.
NOT_MODELLED = {
    "0110": "a conversion the fetch adapter or cast engine cannot do (the executor converts anything)",
    "0120": "the Tensor Unit's stage order (the executor applies stages in the order written)",
    "0201": "cluster/slice/lane position counts of the hardware (the executor indexes logically)",
    "0301": "DM capacity", "0302": "TRF capacity", "0303": "VRF capacity", "0310": "sequencer loop depth",
    "0312": "fetch packet contiguity and word size", "0320": "DMA packet size", "0321": "HBM alignment",
    "0323": "DMA engine numbers", "0324": "a DMA copies bytes (the executor converts values)",
    "0401": "contraction lanes", "0402": "contraction packet size", "0403": "the contraction's operand types",
    "0405": "stages the sub context lacks", "0410": "a commit without a cast (0.5.0 reinterprets bits)",
    "0411": "the vector engine's input type", "0412": "the vector chain length", "0413": "the commit trim",
    "0420": "the switch stays in its cluster", "0430": "the reducer's group shape", "0520": "the DM bank rule",
}  # fmt: skip

AGREEMENTS = {
    "accepted-correct": "accepted; runs, deterministic, finite, equal to numpy",
    "accepted-runs": "accepted; runs, deterministic, finite (no numpy meaning: a mutant)",
    "refused-wrong": "refused by a placement/coverage rule; run anyway it is wrong or NaN",
    "refused-undefined": "refused by a placement/coverage rule; the executor cannot run it either",
    "refused-other": "refused by a front-end or hardware rule; run anyway it is wrong, NaN or cannot run",
    "refused-unmodelled": "refused by a hardware rule the executor does not model (NOT_MODELLED); the values are right",
    "unparsable": "not Ferrite (a mutant): E0101",
    "checked-only": "a full-size shipped kernel's mutant: only the compiler judged it (it answered)",
    "warned-undefined": "accepted with a note or warning that its values are undefined (N0206: read before written; "
    "0.5.0's W0205/W0801 holes and W0410 reinterpreted bits); NaN there is what was announced",
}
DISAGREEMENTS = {
    "accepted-nan": "accepted, yet NaN from finite inputs (a read outside a tensor or of unwritten data)",
    "accepted-wrong": "accepted, finite, yet different from numpy",
    "accepted-unrunnable": "accepted, yet the executor cannot run it",
    "accepted-nondeterministic": "accepted, yet two runs differ",
    "refused-yet-correct": "refused by a placement/coverage rule (or one not in NOT_MODELLED), yet it computes the "
    "numpy answer",
    "internal-error": "the compiler crashed (E0100)",
    "executor-crash": "the executor raised something other than a clean refusal",
}


@dataclass
class Verdict:
    program: Generated
    cls: str
    codes: tuple[str, ...] = ()
    detail: str = ""
    judged: dict[str, str] = field(default_factory=dict)  # judge -> what it said, for the report

    @property
    def disagrees(self) -> bool:
        return self.cls in DISAGREEMENTS


def judge(program: Generated) -> Verdict:
    """Run the three judges on one program and classify what they say."""
    result = _check_guarded(program.source, program.version)
    codes = tuple(sorted({d.code for d in result.diagnostics if d.is_error}))
    warned = any(d.code in UNDEFINED_WARNINGS for d in result.diagnostics)
    judged = {"ferc": "accepted" if result.ok else f"refused {' '.join(codes)}"}
    if "E0100" in codes:
        return Verdict(program, "internal-error", codes, next(d.message for d in result.diagnostics), judged)
    if "E0101" in codes:
        return Verdict(program, "unparsable", codes, judged=judged)
    placement_only = bool(codes) and all(code[1:] in PLACEMENT_RULES for code in codes)
    if codes and not placement_only and (program.meaning is None or any(c[1:] in FRONT_END for c in codes)):
        return Verdict(program, "refused-other", codes, judged=judged)
    if program.recipe is None:
        return Verdict(program, "checked-only", codes, judged=judged)
    try:
        signature = kernel_signature(program.source)
        try:
            inputs = draw_inputs(program.recipe, signature, "g0", seed=f"difftest/{program.seed}")
        except InputError:  # a mutant changed the signature: draw for the one it has
            inputs = draw_inputs(default_recipe(signature), signature, "g0", seed=f"difftest/{program.seed}")
        decoded = {p.name: decode(inputs[p.name], p) for p in signature.params}
    except (ExecutionError, LoweringError, ValueError) as error:
        return _unrunnable(program, codes, judged, f"inputs: {error}")
    first = _run(program, inputs)
    judged["executor"] = first if isinstance(first, str) else "ran"
    if isinstance(first, str):
        return _unrunnable(program, codes, judged, first)
    expected = _expected(program, decoded)
    if expected is not None:
        judged["numpy"] = "computed"
    problem = _compare(first, expected)
    if codes and not placement_only:  # a rule about the hardware, which the executor does not model
        unexplained = [c for c in codes if c[1:] not in NOT_MODELLED and c[1:] not in PLACEMENT_RULES]
        if problem is None and unexplained:
            return Verdict(program, "refused-yet-correct", codes, f"equal to numpy ({', '.join(unexplained)})", judged)
        return Verdict(program, "refused-unmodelled" if problem is None else "refused-other", codes, problem or "",
                       judged)  # fmt: skip
    if codes:  # refused by placement/coverage rules only
        if problem is None and expected is not None:
            return Verdict(program, "refused-yet-correct", codes, "equal to numpy", judged)
        return Verdict(program, "refused-wrong", codes, problem or "no numpy meaning", judged)
    if problem is not None and problem.startswith("NaN") and warned:
        return Verdict(program, "warned-undefined", codes, problem, judged)
    if problem is not None:
        return Verdict(program, "accepted-nan" if problem.startswith("NaN") else "accepted-wrong", codes, problem,
                       judged)  # fmt: skip
    second = _run(program, inputs)
    if isinstance(second, str) or any(not np.array_equal(first[k], second[k], equal_nan=True) for k in first):
        return Verdict(program, "accepted-nondeterministic", codes, "a second run differs", judged)
    return Verdict(program, "accepted-correct" if expected is not None else "accepted-runs", codes, "", judged)


def _run(program: Generated, inputs: dict[str, InputValue]) -> Outputs | str:
    """The outputs, or one line saying why the executor did not produce them."""
    try:
        return execute_program(program.source, inputs, program.version)
    except (ExecutionError, LoweringError, IndexOutOfRange) as error:
        return f"not run: {type(error).__name__}: {error}"
    except Exception as error:
        return f"crash: {type(error).__name__}: {error}"


def _unrunnable(program: Generated, codes: tuple[str, ...], judged: dict[str, str], why: str) -> Verdict:
    if why.startswith("crash") and not (codes and not all(c[1:] in PLACEMENT_RULES for c in codes)):
        return Verdict(program, "executor-crash", codes, why, judged)
    if codes and not all(c[1:] in PLACEMENT_RULES for c in codes):
        return Verdict(program, "refused-other", codes, why, judged)
    return Verdict(program, "refused-undefined" if codes else "accepted-unrunnable", codes, why, judged)


def _expected(program: Generated, decoded: dict[str, InputValue]) -> Outputs | None:
    if program.meaning is None:
        return None
    return program.meaning(decoded)


def _compare(got: Outputs, expected: Outputs | None) -> str | None:
    """None when the outputs are finite and (where numpy has a meaning) equal to it."""
    for name, value in got.items():
        values = np.asarray(value, dtype=np.float32)
        if np.isnan(values).any():
            return f"NaN in {name} at {int(np.flatnonzero(np.isnan(values.reshape(-1)))[0])}"
        if expected is None or name not in expected:
            continue
        want = np.asarray(expected[name], dtype=np.float32).reshape(values.shape)
        scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
        if not np.allclose(values, want, rtol=RTOL, atol=1e-3 * scale):
            index = int(np.argmax(np.abs(values - want).reshape(-1)))
            return f"{name}[{index}] = {values.reshape(-1)[index]:.6g}, numpy says {want.reshape(-1)[index]:.6g}"
    return None
