"""The builtin architect's search of a design space: it spends no more of the cost model than its
budget, finds the space's best setting when the budget lets it climb there, is deterministic from
the seed, and never proposes a program the tree holds."""

from __future__ import annotations

import itertools
import math

from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.knowledge import Knowledge
from chiplore.agents.proposers import BuiltinArchitect, KernelView
from chiplore.agents.proposers.builtin import PROGRESS_EVERY
from chiplore.agents.proposers.search import Search, SearchBudget, search_space, setting_key
from chiplore.core.ids import content_sha
from chiplore.core.pack import Params, nearest_points, points, repaired_steps, settings, shuffled_points
from tests.toy.pack.params import LANE_BUFFER
from tests.toy.target import ToyChip

FACTS = {LANE_BUFFER.key: 65536.0}


def _toy() -> tuple[ToyChip, KernelView]:
    chip = ToyChip()
    [spec] = chip.kernels()
    pack = chip.pack()
    version = chip.default_toolchain()
    view = KernelView(spec=spec, version=version, knowledge=Knowledge(version, dict(FACTS)),
                      space=pack.design_space(spec), model=CalibratedCostModel(pack.cost_model), seed=3)  # fmt: skip
    return chip, view


def test_the_search_prices_no_more_settings_than_its_budget() -> None:
    _, view = _toy()
    assert view.space is not None
    valid = list(points(view.space, FACTS))
    calls: list[Params] = []

    def predict(source: str, params: Params) -> float | None:
        calls.append(params)
        return view.predicted(source, params)

    priced = search_space(
        Search(view.space, FACTS, view.version, predict, SearchBudget(predictions=5)),
        shuffled_points(view.space, FACTS, 0),
    )
    assert len(priced) == len(calls) == 5 < len(valid)
    assert len({setting_key(p) for p in calls}) == 5  # nothing priced twice


def test_the_architect_says_how_far_its_pricing_is() -> None:
    """A user's FFN on a 16-lane chip priced designs for 70-150 s under a line that said only "the
    architect designs": the view's note now hears every PROGRESS_EVERY designs priced."""
    _, view = _toy()
    heard: list[str] = []
    view.note = heard.append
    budget = SearchBudget(predictions=PROGRESS_EVERY + 3)
    BuiltinArchitect(budget).propose(view, 1)
    assert heard == [f"the architect has priced {PROGRESS_EVERY} of {budget.predictions} designs"]


def test_with_budget_enough_the_climb_ends_at_the_best_setting_and_is_the_same_for_a_seed() -> None:
    _, view = _toy()
    assert view.space is not None
    valid = list(points(view.space, FACTS))
    exhaustive = min(valid, key=lambda p: view.predicted(view.space.source(p, FACTS, view.version), p) or math.inf)  # type: ignore[union-attr]
    budget = SearchBudget(predictions=len(valid) - 1, sample_share=0.2)
    space = view.space
    found = [search_space(Search(space, FACTS, view.version, view.predicted, budget), shuffled_points(space, FACTS, 7))
             for _ in range(2)]  # fmt: skip
    assert list(found[0]) == list(found[1])  # the same settings, priced in the same order
    best = min(found[0].values(), key=lambda p: p.cycles)
    assert best.params == exhaustive


def test_the_architect_proposes_only_programs_the_tree_does_not_hold() -> None:
    _, view = _toy()
    first = BuiltinArchitect(SearchBudget(predictions=6)).propose(view, 3)
    assert len(first) == 3
    held = {content_sha(p.source) for p in first}
    view.tried = lambda shas: {sha for sha in shas if sha in held}
    again = BuiltinArchitect(SearchBudget(predictions=6)).propose(view, 3)
    assert again and not {content_sha(p.source) for p in again} & held


def test_the_seeded_order_holds_every_valid_setting_once_and_a_sample_checks_only_what_it_draws() -> None:
    _, view = _toy()
    space = view.space
    assert space is not None
    drawn = list(shuffled_points(space, FACTS, 5))
    assert sorted(map(setting_key, drawn)) == sorted(map(setting_key, points(space, FACTS)))
    assert drawn == list(shuffled_points(space, FACTS, 5)) != list(shuffled_points(space, FACTS, 6))
    checked: list[Params] = []
    valid = space.valid

    def counted(setting: Params, facts: dict[str, float]) -> bool:
        checked.append(setting)
        return valid(setting, facts)

    space.valid = counted  # type: ignore[method-assign]
    first = list(itertools.islice(shuffled_points(space, FACTS, 5), 3))
    assert first == drawn[:3] and len(checked) < len(list(settings(space))) // 2


def test_the_nearest_valid_settings_are_those_a_whole_scan_finds() -> None:
    _, view = _toy()
    space = view.space
    assert space is not None
    every = list(settings(space))
    valid = list(points(space, FACTS))
    first_knob = space.knobs[0].name
    for params in [*every, {k: v for k, v in every[0].items() if k != first_knob}, {**every[-1], first_knob: -1}]:

        def moved(p: Params, params: Params = params) -> int:
            return sum(1 for k in p if p[k] != params.get(k))

        fewest = min(map(moved, valid))
        assert nearest_points(space, params, FACTS) == [p for p in valid if moved(p) == fewest]


def test_a_step_the_space_refuses_alone_is_taken_with_one_other_knob_moved() -> None:
    """The refiner's repaired steps are, for every valid setting of the toy space, exactly what a whole
    scan finds: valid settings that take a one-knob step that is invalid alone and move one other knob."""
    _, view = _toy()
    space = view.space
    assert space is not None
    valid = list(points(space, FACTS))
    found = 0
    for params in valid:
        expected = []
        for p in valid:
            moved = [k for k in p if p[k] != params[k]]
            if len(moved) != 2:
                continue
            for knob in space.knobs:
                if knob.name not in moved:
                    continue
                i = knob.values.index(params[knob.name])
                if abs(knob.values.index(p[knob.name]) - i) == 1 and not space.valid(
                    {**params, knob.name: p[knob.name]}, FACTS
                ):
                    expected.append(p)
                    break
        steps = list(repaired_steps(space, params, FACTS))
        assert sorted(map(setting_key, steps)) == sorted(map(setting_key, expected)), params
        found += len(steps)
    assert found  # the toy space has steps it refuses alone
