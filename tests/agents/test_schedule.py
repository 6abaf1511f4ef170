"""The one schedule every executor runs (chiplore.agents.schedule): which role proposes next, and when
a kernel stops. Far from the bound, patience opens new whole designs instead of ending the kernel."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from chiplore.agents.proposers import DesignProposal, KernelView
from chiplore.agents.runner import DeviceRunner
from chiplore.agents.schedule import ARCHITECT_ROUND, REFINER_ROUND, KernelSchedule, OptimizeConfig, Roles
from chiplore.core.errors import BudgetExhausted
from chiplore.simulator.target import SimRNGD

pytestmark = pytest.mark.unit


@dataclass
class Scripted:
    """A proposer that proposes `left` more designs, then nothing (and says why)."""

    role: str
    left: int = 10_000
    name: str = "scripted"
    asked: list[int] = field(default_factory=list)

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        self.asked.append(count)
        made = min(count, self.left)
        self.left -= made
        return [DesignProposal(role=self.role, policy="scripted", source=f"{self.role}{self.left + i}",  # type: ignore[arg-type]
                               rationale="", change="") for i in range(made)]  # fmt: skip

    def why_empty(self, view: KernelView) -> str:
        return f"the {self.role} has nothing left"


@dataclass
class Kernel:
    """The schedule's view of a kernel whose BEST stays at `ratio` of its bound."""

    ratio: float | None = 1.05
    roles_asked: list[str] = field(default_factory=list)

    def view(self) -> KernelView:
        return None  # type: ignore[return-value]  # the scripted proposers do not look

    def ratio_to_bound(self) -> float | None:
        return self.ratio

    def designing(self, role: str) -> None:
        self.roles_asked.append(role)


def run(schedule: KernelSchedule, outcome: bool = False, rounds: int = 1000) -> int:
    """Drive the schedule as an executor would, every proposal ending in `outcome`; the rounds run."""
    for done in range(rounds):
        batch = schedule.next_batch()
        if not batch:
            return done
        schedule.notify([outcome] * len(batch))
    return rounds


def test_the_architect_designs_first_then_the_refiner_until_patience() -> None:
    kernel = Kernel(ratio=1.05)
    architect, refiner = Scripted("architect"), Scripted("refiner")
    schedule = KernelSchedule(kernel, Roles(architect, refiner), OptimizeConfig(patience=7), architected=False,
                              since_accept=0)  # fmt: skip
    run(schedule)
    assert kernel.roles_asked[:3] == ["architect", "refiner", "refiner"]
    assert architect.asked == [ARCHITECT_ROUND] and set(refiner.asked) == {REFINER_ROUND}
    assert schedule.stopped == "no accepted change in 7 proposals" and schedule.proposals == 7


def test_a_resumed_run_that_had_its_architect_round_goes_on_with_the_refiner() -> None:
    kernel = Kernel()
    schedule = KernelSchedule(kernel, Roles(Scripted("architect"), Scripted("refiner")), OptimizeConfig(patience=3),
                              architected=True, since_accept=2)  # fmt: skip
    run(schedule)
    assert kernel.roles_asked == ["refiner"] and schedule.proposals == 2  # 2 + 2 >= 3


def test_far_from_the_bound_patience_opens_new_architect_branches_before_stopping() -> None:
    kernel = Kernel(ratio=2.5)
    architect, refiner = Scripted("architect"), Scripted("refiner")
    config = OptimizeConfig(patience=4, far_ratio=1.15, far_branches=2)
    schedule = KernelSchedule(kernel, Roles(architect, refiner), config, architected=False, since_accept=0)
    run(schedule)
    # first round, then each time patience runs out a new architect round, twice, then the stop
    assert kernel.roles_asked.count("architect") == 3
    assert schedule.stopped.startswith("no accepted change in")
    near = KernelSchedule(Kernel(ratio=1.10), Roles(Scripted("architect"), Scripted("refiner")), config,
                          architected=False, since_accept=0)  # fmt: skip
    run(near)
    assert near.proposals < schedule.proposals  # near the bound, patience ends it at once


def test_an_accepted_change_renews_patience_and_the_branches() -> None:
    kernel = Kernel(ratio=2.0)
    config = OptimizeConfig(patience=2, far_branches=1)
    schedule = KernelSchedule(kernel, Roles(Scripted("architect"), Scripted("refiner")), config, architected=False,
                              since_accept=0)  # fmt: skip
    schedule.next_batch()
    schedule.notify([False, False, False])  # patience spent, far: a branch
    assert schedule.branches == 1 and not schedule.stopped
    schedule.next_batch()
    schedule.notify([False, False, True])  # accepted: patience and branches anew
    assert schedule.branches == 0 and schedule.since_accept == 0 and not schedule.stopped


def test_the_target_ratio_ends_a_kernel() -> None:
    schedule = KernelSchedule(Kernel(ratio=1.01), Roles(Scripted("architect"), Scripted("refiner")),
                              OptimizeConfig(), architected=False, since_accept=0)  # fmt: skip
    run(schedule)
    assert schedule.stopped == "target reached: 1.010x of the measured bound"


def test_an_empty_refiner_falls_back_to_one_whole_design_then_the_space_is_exhausted() -> None:
    architect, refiner = Scripted("architect", left=4), Scripted("refiner", left=0)
    schedule = KernelSchedule(Kernel(), Roles(architect, refiner), OptimizeConfig(patience=100), architected=False,
                              since_accept=0)  # fmt: skip
    run(schedule)
    assert architect.asked == [3, 1, 1] and schedule.proposals == 4
    assert schedule.stopped == "the refiner has nothing left"


def test_a_stop_ends_the_kernel_with_its_reason() -> None:
    schedule = KernelSchedule(Kernel(), Roles(Scripted("architect"), Scripted("refiner")), OptimizeConfig(),
                              architected=False, since_accept=0)  # fmt: skip
    schedule.next_batch()
    schedule.notify([False, BudgetExhausted("device budget of 10 s spent")])
    assert schedule.stopped == "device budget of 10 s spent" and schedule.next_batch() == []


def test_a_spent_budget_names_this_runs_share_and_the_total_with_earlier_runs() -> None:
    """`optimize --budget 60` on a kernel that earlier runs spent 30 s on: the runner's limit is 90 s of
    the ledger, and its message says 60 (the user's) before the 90, not the 90 alone."""
    runner = DeviceRunner(SimRNGD(), lambda *args: "run", budget_s=90.0, spent_s=30.0, charged=lambda: 95.0)
    with pytest.raises(BudgetExhausted, match=r"^device budget of 60 s \(90 s with earlier runs'; another run on the "
                                              r"graph spent 65 s of it meanwhile\) spent$"):  # fmt: skip
        runner.run("sliding_attention_output", "sha", "kernel k() {}", "0.6.0")
    fresh = DeviceRunner(SimRNGD(), lambda *args: "run", budget_s=60.0, charged=lambda: 60.2)  # all by another run
    with pytest.raises(BudgetExhausted, match=r"^device budget of 60 s \(another run on the graph spent 60 s of it "
                                              r"meanwhile\) spent$"):  # fmt: skip
        fresh.run("sliding_attention_output", "sha", "kernel k() {}", "0.6.0")
    overdrawn = DeviceRunner(SimRNGD(), lambda *args: "run", budget_s=123.0, spent_s=128.0)  # never "of -5 s"
    with pytest.raises(BudgetExhausted, match=r"^device budget of 123 s \(earlier work spent 128 s of it\) spent$"):
        overdrawn.run("sliding_attention_output", "sha", "kernel k() {}", "0.6.0")
    small = DeviceRunner(SimRNGD(), lambda *args: "run", budget_s=6.1, spent_s=5.7, charged=lambda: 6.1)
    with pytest.raises(BudgetExhausted, match=r"^device budget of 0.4 s \(6 s with earlier runs'\) spent$"):
        small.run("sliding_attention_output", "sha", "kernel k() {}", "0.6.0")  # its share, not "all spent before"
