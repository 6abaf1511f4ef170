"""Correctness of a program on fixture sets: execute, compare with the reference (SIMULATOR.md 6.2).

Results are cached per (source digest, kernel, toolchain, set): outputs do not depend on the chip's
timing, so a job resubmitted or re-measured is graded once.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from chiplore.core.target import Correctness
from simulator.execute.executor import execute
from simulator.execute.reference import grade


def grade_program(source: str, kernel: str, version: str, sets: tuple[str, ...]) -> Correctness:
    """The official criterion over the sets; the worst element over all of them."""
    digest = hashlib.sha256(source.encode()).hexdigest()
    results = [_graded(digest, kernel, version, fixture_set, source) for fixture_set in sets]
    failed = [r for r in results if not r.passed]
    graded = [r for r in results if r.worst is not None]
    worst = max(graded, key=lambda r: r.worst.abs_err / r.worst.tol, default=None)  # type: ignore[union-attr]
    message = "; ".join(r.message for r in failed) if failed else (worst.message if worst else "no outputs")
    return Correctness(passed=not failed, worst=worst.worst if worst else None, sets=sets, message=message)


@lru_cache(maxsize=512)
def _graded(digest: str, kernel: str, version: str, fixture_set: str, source: str) -> Correctness:
    # ExecutionError propagates: a program the executor cannot run is ungraded, not wrong.
    return grade(kernel, {fixture_set: execute(source, kernel, fixture_set, version)})
