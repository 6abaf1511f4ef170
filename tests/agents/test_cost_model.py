"""The loop's cost model keeps what it priced in the graph: a search a killed run began is not priced
again by the next run (each price may cost a compile), and the calibration applies on top."""

from __future__ import annotations

import pytest

from chiplore.agents.cost_model import (
    KEEP_EVERY,
    CalibratedCostModel,
    GraphPredictionMemory,
    calibration,
    model_error,
)
from chiplore.agents.screens import SKIP_MARGIN, TIGHT_MARGIN, Candidate, EstimateScreen, skip_margin
from chiplore.core.pack import CostModel, Facts, Params
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore


class Counted(CostModel):
    """A model that prices a program by its length and counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        self.asked += 1
        return None if "broken" in source else 1000.0 + len(source)


def test_a_later_run_recalls_the_prices_a_killed_run_found(store: GraphStore) -> None:
    ensure_schema(store)
    first = Counted()
    model = CalibratedCostModel(first, GraphPredictionMemory(store))
    priced = [model.predict("k", f"program {i}", {"knob": i}, {"bw": 1.0}) for i in range(20)]
    assert model.predict("k", "broken", None, {}) is None
    # killed here: the first 16 were kept on the way, the rest at the next decision
    model.update("k", [])
    later = Counted()
    again = CalibratedCostModel(later, GraphPredictionMemory(store))
    assert [again.predict("k", f"program {i}", {"knob": i}, {"bw": 1.0}) for i in range(20)] == priced
    assert again.predict("k", "broken", None, {}) is None and later.asked == 0
    # another kernel, other facts or other knobs are other prices
    again.predict("k", "program 0", {"knob": 0}, {"bw": 2.0})
    again.predict("other", "program 0", {"knob": 0}, {"bw": 1.0})
    assert later.asked == 2
    # the calibration applies to recalled prices too
    again.update("k", [(1000.0, 1500.0)])
    assert again.predict("k", "program 1", {"knob": 1}, {"bw": 1.0}) == 1.5 * priced[1]  # type: ignore[operator]


def test_a_run_killed_mid_search_without_a_decision_has_kept_its_prices_every_few(store: GraphStore) -> None:
    """The architect's search is long and decides nothing: what it priced is written on the way, every
    KEEP_EVERY predictions, so a kill loses at most the last few."""
    ensure_schema(store)
    model = CalibratedCostModel(Counted(), GraphPredictionMemory(store))
    count = 2 * KEEP_EVERY + 5
    priced = [model.predict("k", f"program {i}", {"knob": i}, {"bw": 1.0}) for i in range(count)]
    # killed here: no update, no keep(); the first 2 * KEEP_EVERY are in the graph
    later = Counted()
    again = CalibratedCostModel(later, GraphPredictionMemory(store))
    assert [again.predict("k", f"program {i}", {"knob": i}, {"bw": 1.0}) for i in range(count)] == priced
    assert later.asked == 5


def test_the_calibration_is_fitted_on_the_models_own_prices_so_it_does_not_undo_itself(store: GraphStore) -> None:
    """A design records the pack's raw price beside the calibrated one; fitted on those, a model off by a
    factor stays corrected as designs priced after the first calibration are measured (fitted on the
    calibrated prices, the second fit would see no error and fall back to the raw model)."""
    ensure_schema(store)
    model = CalibratedCostModel(Counted(), GraphPredictionMemory(store))
    off = 0.6  # the device runs everything at 0.6 of the model's price (its facts are stale, say)
    baseline = model.raw("k", "baseline", None, {})
    assert baseline is not None
    model.update("k", [(baseline, off * baseline)])
    designs = [f"design {i}" for i in range(5)]
    raw = [model.raw("k", d, {"i": i}, {}) for i, d in enumerate(designs)]
    calibrated = [model.predict("k", d, {"i": i}, {}) for i, d in enumerate(designs)]
    assert calibrated == [pytest.approx(off * r) for r in raw if r is not None]
    model.update("k", [(baseline, off * baseline), *((r, off * r) for r in raw if r is not None)])
    assert model.factors["k"] == pytest.approx(off)


def test_a_design_the_model_ranks_ahead_of_best_is_priced_ahead_of_best_whatever_the_median_says() -> None:
    """The model's error differs between designs (stale facts: the baseline runs at 0.65 of its price,
    BEST at 0.5): the median would price a design the model ranks 5 % ahead of BEST at 1.2x BEST's cycles,
    and the estimate screen would never let it run. Against BEST's own ratio it is priced ahead of BEST."""
    baseline, best = (35_000.0, 22_750.0), (28_000.0, 14_000.0)
    assert calibration([baseline, best]) == pytest.approx((0.65 + 0.5) / 2)
    factor = calibration([baseline, best], best)
    assert factor == pytest.approx(0.5)
    assert 0.95 * best[0] * factor < best[1]
    # where BEST's ratio is the higher, the median (the model's error over every run design) serves
    assert calibration([baseline, best], (20_000.0, 19_000.0)) == pytest.approx((0.65 + 0.5) / 2)
    assert calibration([], None) == 1.0 and calibration([], best) == pytest.approx(0.5)


def test_the_estimate_screens_out_at_the_models_observed_error_once_it_is_known() -> None:
    """A design predicted x slower than BEST can be the faster one only when the model's error differs
    by more than x between them: the screen's margin is that spread, within [2 %, 10 %], 10 % until
    MIN_PAIRS designs ran."""
    assert model_error([(100.0, 101.0), (200.0, 199.0)]) is None  # too few to say
    close = [(100.0, 101.0), (200.0, 199.0), (300.0, 303.0)]
    assert model_error(close) == pytest.approx(1.01 / 0.995 - 1)
    assert skip_margin(model_error(close)) == TIGHT_MARGIN  # within the noise: the least margin
    assert skip_margin(None) == SKIP_MARGIN and skip_margin(0.3) == SKIP_MARGIN
    assert skip_margin(0.05) == pytest.approx(0.05)

    def candidate() -> Candidate:
        return Candidate("d", "k", "src", {}, {"knob": 1}, best_cycles=10_000.0, margin=skip_margin(0.04))

    assert EstimateScreen(lambda c: 10_300.0).check(candidate()).passed  # 3 % slower: within the model's 4 %
    slower = EstimateScreen(lambda c: 10_500.0).check(candidate())
    assert not slower.passed and "margin 4%" in slower.detail
    # without a kernel margin the screen keeps its own
    assert EstimateScreen(lambda c: 10_500.0).check(Candidate("d", "k", "src", {}, {}, 10_000.0)).passed


class Faulty(CostModel):
    """A pack's model with a bug: it raises on some programs (an index past an array, say)."""

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        if "odd" in source:
            raise IndexError("index 512 is out of bounds for axis 1 with size 512")
        return 1000.0


def test_a_design_the_packs_model_fails_on_is_unpriced_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    """optimize stopped with a traceback when the pack's model raised on the baseline; a design it
    cannot price is screened like one it has no price for, and the fault is logged for the pack's author."""
    model = CalibratedCostModel(Faulty())
    assert model.predict("k", "odd program", None, {}) is None and model.raw("k", "odd program", None, {}) is None
    assert model.predict("k", "even program", None, {}) == 1000.0
    assert "IndexError: index 512 is out of bounds" in caplog.text
