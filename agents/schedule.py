"""One kernel's optimization schedule, written once for every executor.

The shape is TVM MetaSchedule's search strategy: the executor asks the schedule for its next batch of
proposals (`next_batch`), runs them (one after another, or side by side on many devices) and tells
it the results (`notify`); the schedule decides which role proposes next, how many, and when the
kernel stops. The architect proposes whole designs first; then the refiner steps from BEST, falling
back to one new whole design when it has nothing left. A kernel stops when a proposer has nothing
new (and says why), when `patience` proposals in a row brought no accepted change, or when BEST is
within `target_ratio` of the bound chiplore measured. Far from that bound (beyond `far_ratio`),
patience does not end the kernel: the architect opens new branches instead, up to `far_branches`
rounds in a row without an accepted change, since one-knob steps rarely cross the distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from chiplore.agents.judge import Judge, SequentialJudge
from chiplore.agents.proposers import BuiltinArchitect, BuiltinRefiner, DesignProposal, KernelView, Proposer
from chiplore.agents.screens import Screen
from chiplore.core.settings import MAX_SEED

DEFAULT_BUDGET_S = 5400.0  # device seconds for all kernels; the stop rules usually end far sooner
PATIENCE = 8  # proposals without an accepted change before a kernel stops
TARGET_RATIO = 1.02  # stop a kernel once BEST is this close to the bound chiplore measured
FAR_RATIO = 1.15  # beyond this factor of the bound, patience opens new whole designs instead of stopping
FAR_BRANCHES = 3  # architect rounds in a row without an accepted change, far from the bound, before stopping
ARCHITECT_ROUND, REFINER_ROUND = 3, 2  # proposals per round of each role


class OptimizeConfig(BaseModel):
    """What one `chiplore optimize` is asked to do; every executor reads the same fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    kernels: tuple[str, ...] | None = None  # None: every kernel the target offers
    budget_s: float = Field(DEFAULT_BUDGET_S, gt=0)  # device seconds for all the kernels together
    seed: int = Field(0, ge=0, le=MAX_SEED)  # of the builtin policies; the settings' range
    patience: int = Field(PATIENCE, ge=1)
    target_ratio: float = Field(TARGET_RATIO, ge=1.0)
    far_ratio: float = Field(FAR_RATIO, ge=1.0)
    far_branches: int = Field(FAR_BRANCHES, ge=0)


@dataclass(frozen=True)
class Roles:
    """Who designs, screens and judges: the builtin policies unless a caller passes others. `screens`
    run after the standard ones (parse, rules, compile, host test, estimate), in order."""

    architect: Proposer = field(default_factory=BuiltinArchitect)
    refiner: Proposer = field(default_factory=BuiltinRefiner)
    judge: Judge = field(default_factory=SequentialJudge)
    screens: tuple[Screen, ...] = ()


class KernelProgress(Protocol):
    """What the schedule reads of its kernel between rounds (the executor's kernel implements it)."""

    def view(self) -> KernelView:
        """The proposers' view after the last decision."""
        ...

    def ratio_to_bound(self) -> float | None:
        """BEST's measured cycles over the bound chiplore measured (None until both are known)."""
        ...

    def designing(self, role: str) -> None:
        """A role is about to design (a search may take a while: the user hears of it)."""
        ...


Result = bool | BaseException  # a proposal became BEST, did not, or a stop (budget, lost devices) ended it


class KernelSchedule:
    """Which role proposes next and how many, and why the kernel stopped ("" while it goes on)."""

    def __init__(self, kernel: KernelProgress, roles: Roles, config: OptimizeConfig, *, architected: bool,
                 since_accept: int) -> None:  # fmt: skip
        self.kernel, self.roles, self.config = kernel, roles, config
        # a resumed run keeps the schedule: whole designs only until the architect has had its round
        self.architect_next = not architected
        self.since_accept = since_accept
        self.branches = 0  # architect rounds opened far from the bound since the last accepted change
        self.proposals = self.accepted = 0
        self.stopped = ""

    def next_batch(self) -> list[DesignProposal]:
        """The next round's proposals; empty once the kernel stopped (`stopped` says why)."""
        if self.stopped:
            return []
        architect, refiner = self.roles.architect, self.roles.refiner
        proposer, count = (architect, ARCHITECT_ROUND) if self.architect_next else (refiner, REFINER_ROUND)
        view = self.kernel.view()
        self.kernel.designing(proposer.role)
        batch = proposer.propose(view, count)
        if not batch and proposer is refiner:  # nothing left next to BEST: a new whole design
            batch = architect.propose(self.kernel.view(), 1)
        if not batch:
            self.stopped = proposer.why_empty(view) or "the design space is exhausted"
        self.architect_next = False
        return batch

    def notify(self, results: Sequence[Result]) -> None:
        """The round's outcomes, in the order proposed; decides whether the kernel goes on."""
        for result in results:
            self.proposals += 1
            if isinstance(result, BaseException):
                self.stopped = self.stopped or str(result)
            elif result:
                self.accepted += 1
                self.since_accept = self.branches = 0
            else:
                self.since_accept += 1
        if self.stopped:
            return
        ratio = self.kernel.ratio_to_bound()
        if self.since_accept >= self.config.patience:
            if ratio is not None and ratio > self.config.far_ratio and self.branches < self.config.far_branches:
                self.branches += 1  # far from the bound: a new branch of whole designs, and patience anew
                self.architect_next = True
                self.since_accept = 0
            else:
                self.stopped = f"no accepted change in {self.since_accept} proposals"
        if not self.stopped and ratio is not None and ratio <= self.config.target_ratio:
            self.stopped = f"target reached: {ratio:.3f}x of the measured bound"
