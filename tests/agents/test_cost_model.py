"""The loop's cost model keeps what it priced in the graph: a search a killed run began is not priced
again by the next run (each price may cost a compile), and the calibration applies on top."""

from __future__ import annotations

from chiplore.agents.cost_model import KEEP_EVERY, CalibratedCostModel, GraphPredictionMemory
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
