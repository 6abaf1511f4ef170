"""What `chiplore best` writes above a BEST's program (chiplore.results)."""

from __future__ import annotations

import pytest

from chiplore.results import BestProgram, LineageStep

pytestmark = pytest.mark.unit


def best(bound: float, ratio: float | None) -> BestProgram:
    return BestProgram(kernel="k", design="d1", toolchain="0.6.0", sha="s", best_cycles=2_832.0, best_ci_low=2_800.0,
                       best_ci_high=2_860.0, baseline_cycles=2_832.0, speedup_vs_baseline=1.0, ratio_to_bound=ratio,
                       bound_cycles=bound, baseline_design="d1",
                       lineage=[LineageStep(design="d1", role="baseline", change="", measured_cycles=2_832.0)],
                       source="kernel k() {}")  # fmt: skip


def test_the_header_states_the_bound_and_the_ratio_to_it() -> None:
    assert "speedup 1.00x; 1.250x the bound (2,266 cycles)" in best(2_265.6, 1.25).header()[2]


def test_a_kernel_that_moves_no_weights_has_no_bound_and_says_so() -> None:
    line = best(0.0, None).header()[2]  # it said "-x the bound (0 cycles)"
    assert line.endswith("speedup 1.00x; no bound (the kernel moves no weights)"), line


def test_a_baseline_an_upgrade_repaired_is_named_beside_a_lineage_that_starts_at_the_root() -> None:
    """After an upgrade the speedup is over the root's repair (553,296 cycles) while the lineage starts at
    the root (545,280): the header named neither, and the two figures did not match."""
    upgraded = best(2_265.6, 1.25).model_copy(update={"baseline_design": "r1234567890", "toolchain": "0.7.0"})
    line = upgraded.header()[2]
    assert line.startswith("baseline: 2,832 cycles (r123456789, the root as it runs under 0.7.0); speedup"), line
    assert "(d1" not in best(2_265.6, 1.25).header()[2]  # the root itself: nothing to name


def test_the_report_writes_measured_values_in_four_significant_digits() -> None:
    """Contradicted claims read "measured 491,520.0000 B" and "217.5115 B/cycle"."""
    from chiplore.report import significant

    assert [significant(v) for v in (491_520.0, 217.5115, 57.802, 0.0012346, 0.99995, -3.14159)] == [
        "491,520", "217.5", "57.80", "0.001235", "1.000", "-3.142"]  # fmt: skip
    assert (significant(None), significant(0.0), significant(float("inf"))) == ("-", "0", "inf")
