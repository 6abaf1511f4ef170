"""estimate(program, version) -> CostReport: check, lower, schedule (docs/simrngd.md §7.1).

Harness-only: agents never see a CostReport, only device measurements. Deterministic, and
cached per (source hash, toolchain, truth) because cycles do not depend on input values.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from chiplore.simulator._truth import ChipTruth, load_truth, truth_key
from chiplore.simulator.cost.scheduler import schedule
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.lower import lower
from chiplore.simulator.toolchain.lowered import LoweredProgram
from chiplore.simulator.toolchain.ordering import Ordering
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION, SPECS


class OpCost(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    queue: str
    start: float
    end: float
    bound_by: str
    line: int | None = None


class BankFault(BaseModel):
    """A pass that breaks the bank-run rule while DMA may write its cluster (0.5.0 faults on it)."""

    model_config = ConfigDict(frozen=True)

    label: str
    cluster: int
    cycle: float


class CostReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    kernel: str
    version: str
    cycles: float  # launch + makespan
    per_queue_busy: dict[str, float]
    per_op: tuple[OpCost, ...]
    bytes_moved: int
    warnings: tuple[Diagnostic, ...] = ()
    bank_faults: tuple[BankFault, ...] = ()


class NotCompiled(ValueError):
    """The program has compile errors: there is nothing to estimate."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...]) -> None:
        self.diagnostics = diagnostics
        first = next(d for d in diagnostics if d.is_error)
        super().__init__(f"{first.code}: {first.message}")


def estimate(source: str, version: str | None = None, truth: ChipTruth | None = None) -> CostReport:
    """Cycles of one kernel run on the true chip (noise-free); raises NotCompiled on errors."""
    chosen = version or _header_version(source)
    chip = truth if truth is not None else load_truth(chosen if chosen in SPECS else DEFAULT_VERSION)
    digest = hashlib.sha256(source.encode()).hexdigest()
    return _estimate(digest, chosen, truth_key(chip), source, chip)


@lru_cache(maxsize=256)
def _estimate(digest: str, version: str, key: str, source: str, truth: ChipTruth) -> CostReport:
    # Keyed by (source digest, toolchain, chip): a repeated job costs nothing the second time.
    result = check(source, version)
    if not result.ok:
        raise NotCompiled(result.diagnostics)
    program = lower(source, result.version)
    return estimate_lowered(program, truth, tuple(d for d in result.diagnostics if not d.is_error))


def _header_version(source: str) -> str:
    try:
        return parse(source).toolchain or DEFAULT_VERSION
    except FerriteSyntaxError:
        return DEFAULT_VERSION  # check() reports the syntax error


def estimate_lowered(program: LoweredProgram, truth: ChipTruth, warnings: tuple[Diagnostic, ...] = ()) -> CostReport:
    faults, exclusive = _bank_runs(program, truth)
    timeline = schedule(program, truth, exclusive)
    starts = {t.label: t.start for t in timeline.timings}
    return CostReport(
        kernel=program.kernel,
        version=program.version or DEFAULT_VERSION,
        cycles=truth.launch_cycles + timeline.makespan,
        per_queue_busy=timeline.busy,
        per_op=tuple(OpCost(**vars(t)) for t in timeline.timings),
        bytes_moved=program.bytes_moved(),
        warnings=warnings,
        bank_faults=tuple(
            BankFault(label=f.label, cluster=f.cluster, cycle=truth.launch_cycles + starts[f.label]) for f in faults
        ),
    )


def _bank_runs(program: LoweredProgram, truth: ChipTruth) -> tuple[list[BankFault], frozenset[str]]:
    """Passes over the bank-run limit with DMA into their cluster able to overlap: 0.6.0 runs them
    exclusively; 0.5.0 runs them as written and the device faults (docs/simrngd.md §7.5, §8.5)."""
    risky = [op for op in program.passes if op.shape.bank_run >= truth.bank_run_limit]
    if not risky:
        return [], frozenset()
    ordering = Ordering(program)
    faults: list[BankFault] = []
    exclusive: set[str] = set()
    for op in risky:
        overlapping = ordering.concurrent_dmas_into(op)
        if not overlapping:
            continue
        if program.version == "0.5.0":
            faults.append(BankFault(label=op.label, cluster=overlapping[0][1], cycle=0.0))
        else:
            exclusive.add(op.id)
    return faults, frozenset(exclusive)
