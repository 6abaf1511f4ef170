"""The refiner's repair of a program a toolchain refuses: a kernel's BEST that broke under a new
toolchain is rewritten, one diagnostic at a time, by the target pack's rewrites (a renamed
construct, a buffer too many), until the version compiles it or no rewrite applies any more. The
repaired program is then screened and run like any design. A design written from a design space is
regenerated from its knobs instead (see `chiplore.agents.revalidate`); this is for any other program, an
LLM's included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.core.pack import Repairs
from chiplore.core.target import CheckResult

ROUNDS = 4


@dataclass(frozen=True)
class Repair:
    source: str
    changes: tuple[str, ...]
    errors: tuple[str, ...]  # what the toolchain still refuses ("" when the repair compiles)

    @property
    def ok(self) -> bool:
        return not self.errors


def repair(source: str, version: str, check: Callable[[str, str], CheckResult], repairs: Repairs) -> Repair:
    """Rewrite `source` until `version` compiles it, or no rewrite applies any more."""
    changes: list[str] = []
    fixed = repairs.retarget(source, version)
    if fixed != source:
        changes.append(f"header -> {version}")
    for _ in range(ROUNDS):
        errors = [d for d in check(fixed, version).diagnostics if d.is_error]
        if not errors:
            return Repair(fixed, tuple(changes), ())
        before = fixed
        for diagnostic in errors:
            answer = repairs.rewrite(fixed, diagnostic)
            if answer is None:
                continue
            change, rewritten = answer
            if rewritten != fixed:
                fixed = rewritten
                if change not in changes:
                    changes.append(change)
        if fixed == before:
            break
    errors = [d for d in check(fixed, version).diagnostics if d.is_error]
    return Repair(fixed, tuple(changes), tuple(f"{d.code}: {d.message}" for d in errors))
