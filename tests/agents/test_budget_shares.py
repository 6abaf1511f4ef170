"""One optimize run's device budget among its kernels (chiplore.agents.budget_shares)."""

from __future__ import annotations

import pytest

from chiplore.agents.budget_shares import BudgetShares

pytestmark = pytest.mark.unit


def test_a_kernel_that_stops_early_leaves_its_share_to_the_kernels_after_it() -> None:
    shares = BudgetShares.split(60.0, 2)
    first = shares.take()
    shares.give_back(first, spent_s=5.0)  # no design space: it stopped after its baseline
    assert (first, shares.take()) == (30.0, 55.0)  # was 30 s: the run spent 35 of its 60


def test_what_is_carried_is_split_among_the_kernels_still_waiting() -> None:
    shares = BudgetShares.split(90.0, 3)
    shares.give_back(shares.take(), spent_s=0.0)
    assert shares.take() == pytest.approx(45.0) and shares.take() == pytest.approx(30.0 + 15.0)


def test_kernels_that_start_together_get_equal_shares_and_overspending_carries_nothing() -> None:
    shares = BudgetShares.split(90.0, 3)
    assert [shares.take() for _ in range(3)] == [30.0, 30.0, 30.0]  # on many devices, all at once
    shares.give_back(30.0, spent_s=41.0)  # a job that started finishes past the budget
    assert shares.carried_s == 0.0
