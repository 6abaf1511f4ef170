"""What `chiplore best` and `chiplore show` hand out: a design's program with what the graph knows
of it, and the header comment written above it (kernel, toolchain, cycles and their 95 % interval,
speedup, ratio to the bound, lineage). The header is written in the target's own comment syntax,
read from its Pygments lexer, and kept only where the target's compiler says the program means the
same with it as without it, so the written file always compiles as the graph's program does."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib.metadata import version

from pydantic import BaseModel

from chiplore.kg.models import DesignNode
from chiplore.kg.repo.progress import KernelProgress

COMMENT_PREFIXES = ("//", "#", "--", ";", "%")


class LineageStep(BaseModel):
    """One design on the accepted path from the baseline to BEST."""

    design: str
    role: str
    change: str
    measured_cycles: float | None


class DesignProgram(BaseModel):
    """A design and its program (`chiplore show`)."""

    kernel: str
    design: str
    role: str
    status: str
    change: str
    reason: str
    toolchain: str
    sha: str
    measured_cycles: float | None
    predicted_cycles: float | None
    parent: str | None
    source: str

    @classmethod
    def of(cls, node: DesignNode, *, toolchain: str, sha: str, source: str, parent: str | None) -> DesignProgram:
        return cls(kernel=node.kernel, design=node.id, role=node.role, status=node.status, change=node.change,
                   reason=node.reason, toolchain=toolchain, sha=sha, measured_cycles=node.measured_cycles,
                   predicted_cycles=node.predicted_cycles, parent=parent, source=source)  # fmt: skip

    def header(self) -> list[str]:
        """The header's lines, without comment markers."""
        lines = [
            f"{self.kernel}: design {self.design} ({self.role}, {self.status}), toolchain {self.toolchain}",
            # every ok run of it, its graded one and its A/B pairs' (docs/graph.md): not the graded run's median
            f"measured: {_num(self.measured_cycles)} cycles (the median of its device runs, graded and A/B); "
            f"predicted: {_num(self.predicted_cycles)} cycles",
            f"change: {self.change or '(the official baseline)'}",
        ]
        if self.parent:
            lines.append(f"parent: {self.parent}")
        if self.reason:
            lines.append(f"outcome: {self.reason}")
        lines.append(
            f"written by chiplore {version('chiplore')} (`chiplore show {self.design}`) from the knowledge graph"
        )
        return lines


class BestProgram(BaseModel):
    """A kernel's BEST (`chiplore best`): its program, where it stands (what `status` says of the
    kernel) and how the loop got there."""

    kernel: str
    design: str
    toolchain: str
    sha: str
    best_cycles: float | None
    best_ci_low: float | None
    best_ci_high: float | None
    baseline_cycles: float | None
    speedup_vs_baseline: float | None
    ratio_to_bound: float | None
    bound_cycles: float
    baseline_design: str | None
    lineage: list[LineageStep]
    source: str

    @classmethod
    def of(cls, program: DesignProgram, progress: KernelProgress, lineage: list[DesignNode],
           baseline_design: str | None) -> BestProgram:  # fmt: skip
        steps = [LineageStep(design=d.id, role=d.role, change=d.change, measured_cycles=d.measured_cycles)
                 for d in lineage]  # fmt: skip
        return cls(kernel=program.kernel, design=program.design, toolchain=program.toolchain, sha=program.sha,
                   best_cycles=progress.best_cycles, best_ci_low=progress.best_ci_low,
                   best_ci_high=progress.best_ci_high, baseline_cycles=progress.baseline_cycles,
                   speedup_vs_baseline=progress.speedup_vs_baseline, ratio_to_bound=progress.ratio_to_bound,
                   bound_cycles=progress.bound_cycles_true, baseline_design=baseline_design, lineage=steps,
                   source=program.source)  # fmt: skip

    def header(self) -> list[str]:
        """The header's lines, without comment markers."""
        cycles = (f"{self.best_cycles:,.0f} cycles [95 % CI {self.best_ci_low:,.0f}, {self.best_ci_high:,.0f}]"
                  if self.best_cycles is not None else "not measured under this toolchain yet")  # fmt: skip
        bound = (f"{_num(self.ratio_to_bound, 3)}x the bound ({self.bound_cycles:,.0f} cycles)"
                 if self.bound_cycles else "no bound (the kernel moves no weights)")  # fmt: skip
        # after an upgrade the baseline measured under this toolchain may be the root's repair, off the lineage
        moved = self.baseline_design and self.lineage and self.baseline_design != self.lineage[0].design
        which = f" ({self.baseline_design[:10]}, the root as it runs under {self.toolchain})" if moved else ""
        lines = [
            f"{self.kernel}: BEST design {self.design}, toolchain {self.toolchain}",
            f"cycles: {cycles}",
            f"baseline: {_num(self.baseline_cycles)} cycles{which}; speedup {_num(self.speedup_vs_baseline, 2)}x; "
            f"{bound}",
            "lineage (baseline first):",
        ]
        for step in self.lineage:
            measured = f", {step.measured_cycles:,.0f} cycles" if step.measured_cycles else ""
            lines.append(f"  {step.design[:10]} {step.role}{measured}: {step.change or '(the official baseline)'}")
        lines.append(
            f"written by chiplore {version('chiplore')} (`chiplore best {self.kernel}`) from the knowledge graph"
        )
        return lines


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def comment_prefix(lexer: object | None) -> str | None:
    """The line-comment marker of a language, as its Pygments lexer reads it (None when unknown)."""
    if lexer is None:
        return None
    from pygments.token import Comment

    for prefix in COMMENT_PREFIXES:
        tokens = [(kind, text) for kind, text in lexer.get_tokens(f"{prefix} chiplore\n") if text.strip()]  # type: ignore[attr-defined]
        if tokens and all(kind in Comment for kind, _ in tokens):
            return prefix
    return None


Check = Callable[[str], object]  # a program -> what the target's compiler says of it (comparable)


def with_header(source: str, header: list[str], prefix: str | None, check: Check) -> str | None:
    """`source` with the header as comments above it (or below its first line, where the first line
    must stay first, as a toolchain declaration may), or None when no placement leaves what the
    compiler says of the program unchanged."""
    if prefix is None:
        return None
    block = "".join(f"{prefix} {line}".rstrip() + "\n" for line in header)
    first, newline, rest = source.partition("\n")
    expected = check(source)
    for candidate in (block + source, first + newline + block + rest if newline else None):
        if candidate is not None and check(candidate) == expected:
            return candidate
    return None


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff of two programs (3 lines of context), empty when they are the same."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile=before_name, tofile=after_name))  # fmt: skip
