"""The pass criterion (docs/simrngd.md §9.4): outputs against expected outputs with atol and rtol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from chiplore.core.target import Correctness, WorstElement

OutputsBySet = Mapping[str, Mapping[str, np.ndarray]]


def grade_outputs(
    got: OutputsBySet, expected: OutputsBySet, atol: float, rtol: float, graded: Sequence[str] | None = None
) -> Correctness:
    """No NaN and |got - expected| <= atol + rtol |expected| at every element of every graded output
    (`graded`: those names; default every output `expected` has) on every set of `got`. The worst
    element is the one with the largest error relative to its tolerance; an output the program did
    not produce, or of another size, fails."""
    worst: WorstElement | None = None
    worst_ratio = -1.0
    failed: list[str] = []
    for fixture_set, outputs in got.items():
        wanted = expected[fixture_set]
        for name in graded if graded is not None else list(wanted):
            want_flat = np.asarray(wanted[name], dtype=np.float32).reshape(-1)
            value = outputs.get(name)
            got_flat = np.asarray(value, dtype=np.float32).reshape(-1) if value is not None else None
            if got_flat is None or got_flat.size != want_flat.size:
                failed.append(f"{fixture_set}:{name} ({'missing' if got_flat is None else 'wrong size'})")
                continue
            tol = atol + rtol * np.abs(want_flat)
            err = np.where(np.isnan(got_flat), np.inf, np.abs(got_flat - want_flat))
            ratio = err / tol
            index = int(np.argmax(ratio)) if ratio.size else 0
            if ratio.size and ratio[index] > worst_ratio:
                worst_ratio = float(ratio[index])
                worst = WorstElement(fixture=fixture_set, output=name, index=index,
                                     abs_err=float(err[index]), tol=float(tol[index]))  # fmt: skip
            if ratio.size and ratio[index] > 1:
                failed.append(f"{fixture_set}:{name}")
    return Correctness(passed=not failed, worst=worst, sets=tuple(got), message=_message(failed, worst, worst_ratio))


def _message(failed: list[str], worst: WorstElement | None, ratio: float) -> str:
    """One line on the grade: what failed, or the worst element's error beside its tolerance (an exact
    design reads exact, not "0.00 of the tolerance")."""
    if failed:
        return f"fails on {', '.join(failed)}"
    if worst is None:
        return "nothing graded"
    if worst.abs_err == 0:
        return "exact on every graded element"
    where = f"{worst.fixture}:{worst.output}, element {worst.index} (flat)"
    return f"worst error {worst.abs_err:.3g} at {where}, {ratio:.3g} of its tolerance {worst.tol:.3g}"
