"""How the builtin architect searches a design space it cannot price whole.

A prediction costs what the pack's cost model costs: microseconds for a model over knobs, a compile
for one over a program's statistics, and a generated space holds hundreds to thousands of valid
settings. So a search prices a bounded number of them (`SearchBudget`), the way a tuner's search
strategy spends its cost model: a seeded sample of the valid settings first (drawn, never listed:
`shuffled_points`), then hill climbs from the best sampled setting of each value of the space's first
knob (its most structural choice), each step moving one knob to whichever of its values prices best,
while that improves. A setting is priced once per search; the tree's known programs are priced too
(a climb may pass through them) but never proposed again. Deterministic from the seed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Facts, Params, one_knob_moves


@dataclass(frozen=True)
class SearchBudget:
    """How much of the cost model one architect call may spend."""

    # settings priced per call, sample and climbs together: a climb step prices every one-knob move
    # (~20 in a generated space), so 96 ended after a few steps and a seed could end its kernel 10 %
    # from the space's best (benchmarks/any_kernel.py: GQA 1.225x at 96, 1.109x at 192)
    predictions: int = 192
    sample_share: float = 0.25  # of them spent on the seeded sample before the climbs


def setting_key(params: Params) -> str:
    return json.dumps(params, sort_keys=True)


@dataclass
class Priced:
    """A setting with its program and predicted cycles (inf: the model cannot price it)."""

    params: Params
    source: str
    cycles: float

    @property
    def sha(self) -> str:
        return content_sha(self.source)


@dataclass
class Search:
    """One search of a space: every setting it priced, by key."""

    space: DesignSpace
    facts: Facts
    version: str
    predict: Callable[[str, Params], float | None]
    budget: SearchBudget
    priced: dict[str, Priced] = field(default_factory=dict)
    on_priced: Callable[[int], None] | None = None  # told how many settings are priced, after each

    @property
    def spent(self) -> bool:
        return len(self.priced) >= self.budget.predictions

    def price(self, params: Params) -> float:
        """The setting's predicted cycles (inf when unpriced and the budget is spent)."""
        key = setting_key(params)
        if key not in self.priced:
            if self.spent:
                return math.inf
            source = self.space.source(params, self.facts, self.version)
            cycles = self.predict(source, params)
            self.priced[key] = Priced(params, source, math.inf if cycles is None else cycles)
            if self.on_priced is not None:
                self.on_priced(len(self.priced))
        return self.priced[key].cycles

    def climb(self, start: Params) -> None:
        """Steepest descent over one-knob moves from `start`, until no move improves or the budget ends."""
        here, value = start, self.price(start)
        while not self.spent:
            better = min(
                ((self.price(m), i, m) for i, m in enumerate(one_knob_moves(self.space, here, self.facts))),
                default=None,
            )
            if better is None or better[0] >= value:
                return
            value, _, here = better


def search_space(search: Search, candidates: Iterable[Params]) -> dict[str, Priced]:
    """Price a sample of `candidates` (valid settings in a seeded order: `shuffled_points`), then climb
    from the best sampled setting of each value of the first knob, best first; every setting `search`
    priced, by key."""
    space, budget = search.space, search.budget
    sample = max(1, int(budget.predictions * budget.sample_share))
    for params in itertools.islice(candidates, sample):
        search.price(params)
    first = space.knobs[0].name if space.knobs else None
    starts: dict[object, Priced] = {}
    for found in search.priced.values():
        value = found.params.get(first) if first else None
        if value not in starts or found.cycles < starts[value].cycles:
            starts[value] = found
    for start in sorted(starts.values(), key=lambda p: p.cycles):
        if search.spent:
            break
        search.climb(start.params)
    return search.priced
