"""When a re-measurement confirms the measurement it re-checks (chiplore.ingest.remeasure.consistent)."""

from __future__ import annotations

import pytest

from chiplore.ingest.fits import Estimate
from chiplore.ingest.remeasure import consistent
from chiplore.kg.models import Measurement

pytestmark = pytest.mark.unit


def measured(value: float, low: float, high: float) -> Measurement:
    return Measurement(id="m", param="noc.chip_bytes_per_cycle", value=value, ci_low=low, ci_high=high, n=30,
                       fit="MB06", unit="B/cycle", toolchain="0.6.0")  # fmt: skip


def test_the_same_value_with_no_interval_confirms_whatever_its_last_bits() -> None:
    """A chip with no noise gives intervals of width 0: the same fitted value, read back from the graph, was
    'changed' (300.050362457077 -> 300.050362457077 in the upgrade's output)."""
    old = measured(300.050362457077, 300.050362457077, 300.050362457077)
    again = 300.050362457077 * (1 + 1e-15)
    assert consistent(old, Estimate(value=again, low=again, high=again), exact=True)
    # a search's exact limit: any move is a change
    assert not consistent(old, Estimate(value=301.0, low=301.0, high=301.0), exact=True)


def test_a_fitted_value_of_a_quiet_device_that_moved_a_little_confirms() -> None:
    """On a chip with no noise an upgrade reported six fitted values 'changed' that moved by 1e-8 to 0.2 %
    (0.499970025777831 -> 0.499970000599988), superseding them and flagging the designs that read them."""
    old = measured(0.499970025777831, 0.499970025777831, 0.499970025777831)
    assert consistent(old, Estimate(value=0.499970000599988, low=0.499970000599988, high=0.499970000599988))
    assert consistent(old, Estimate(value=0.5009, low=0.5009, high=0.5009))  # 0.2 %
    assert not consistent(old, Estimate(value=0.6, low=0.6, high=0.6))  # past the 10 % floor


def test_a_fitted_value_within_three_standard_errors_or_a_tenth_confirms() -> None:
    old = measured(100.0, 98.0, 102.0)
    assert consistent(old, Estimate(value=109.0, low=107.0, high=111.0))  # the 10 % floor
    assert not consistent(old, Estimate(value=125.0, low=123.0, high=127.0))
