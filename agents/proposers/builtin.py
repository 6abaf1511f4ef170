"""The builtin proposers: programs from the target pack's design space, ranked by the calibrated
cost model (measured parameters, calibrated by the device runs so far). The architect searches the
space within a budget of predictions (`search`) and proposes the best few whole designs it found,
spread over the space's first knob; the refiner the best-ranked settings one knob step from BEST
(or a step the space refuses alone, taken with one other knob moved).
Deterministic from the seed (ties are broken by a seeded order)."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterable

from chiplore.agents.proposers.base import DesignProposal, KernelView, Role
from chiplore.agents.proposers.search import Priced, Search, SearchBudget, search_space, setting_key
from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Params, neighbours, repaired_steps, shuffled_points

PROGRESS_EVERY = 16  # designs priced between two progress notes


class BuiltinArchitect:
    role: Role = "architect"
    name = "builtin"

    def __init__(self, budget: SearchBudget | None = None) -> None:
        self.budget = budget or SearchBudget()

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        space = view.space
        if space is None:
            return []
        facts = view.knowledge.facts
        # a later architect round (a new branch far from the bound) searches from another seeded sample
        total = self.budget.predictions

        def priced(count: int) -> None:  # a large space's pricing takes minutes: say how far it is
            if count % PROGRESS_EVERY == 0:
                view.note(f"the architect has priced {count} of {total} designs")

        search = Search(space, facts, view.version, view.predicted, self.budget, on_priced=priced)
        priced = search_space(search, shuffled_points(space, facts, view.seed + view.architect_designs))
        fresh = _fresh(view, priced.values())
        if len(fresh) < count:  # the tree holds what the search found: the rest of the space, in seeded order
            rest = (p for p in shuffled_points(space, facts, view.seed + 1) if setting_key(p) not in priced)
            while len(fresh) < count and (batch := list(itertools.islice(rest, self.budget.predictions))):
                more = [Priced(p, src, view.predicted(src, p) or math.inf)
                        for p in batch for src in [space.source(p, facts, view.version)]]  # fmt: skip
                fresh += _fresh(view, more)
        order = {setting_key(p.params): i for i, p in enumerate(fresh)}
        ranked = [p.params for p in sorted(fresh, key=lambda p: (_rank(p.cycles), order[setting_key(p.params)]))]
        first = space.knobs[0].name
        chosen: list[Params] = []
        for p in ranked:  # the best of each value of the first knob, then the rest in rank order
            if all(q[first] != p[first] for q in chosen):
                chosen.append(p)
        chosen += [p for p in ranked if p not in chosen]
        return [_proposal(view, space, p, self.role, "whole design") for p in chosen[:count]]

    def why_empty(self, view: KernelView) -> str:
        if view.space is not None:
            return ""
        return f"the target pack has no design space for {view.kernel}" + (
            f": {view.no_space}" if view.no_space else ""
        )


class BuiltinRefiner:
    role: Role = "refiner"
    name = "builtin"

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        space, best = view.space, view.best_params
        if space is None or best is None:  # BEST is not a design of the space: nothing to step from
            return []
        facts = view.knowledge.facts
        # a step the space refuses alone may be valid with one other knob moved: those are moves too
        steps = itertools.chain(neighbours(space, best, facts), repaired_steps(space, best, facts))
        ranked = _ranked(view, space, steps)
        out = []
        for p in ranked[:count]:
            moved = [k for k in p if p[k] != best.get(k)]
            change = ", ".join(f"{k} {best.get(k)} -> {p[k]}" for k in moved)
            out.append(_proposal(view, space, p, self.role, change))
        return out

    def why_empty(self, view: KernelView) -> str:
        return ""


def _fresh(view: KernelView, priced: Iterable[Priced]) -> list[Priced]:
    """The priced settings whose programs the tree does not hold yet, in a seeded order."""
    found = list(priced)
    seen = view.tried(sorted({p.sha for p in found}))
    fresh = [p for p in found if p.sha not in seen]
    random.Random(view.seed).shuffle(fresh)
    return fresh


def _ranked(view: KernelView, space: DesignSpace, candidates: Iterable[Params]) -> list[Params]:
    facts = view.knowledge.facts
    sources = {json.dumps(p, sort_keys=True): (p, space.source(p, facts, view.version)) for p in candidates}
    seen = view.tried([content_sha(src) for _, src in sources.values()])
    unseen = [(key, p, src) for key, (p, src) in sources.items() if content_sha(src) not in seen]
    order = list(range(len(unseen)))
    random.Random(view.seed).shuffle(order)
    tie = {key: order[i] for i, (key, _, _) in enumerate(unseen)}
    price = {key: view.predicted(src, p) for key, p, src in unseen}
    return [p for key, p, _ in sorted(unseen, key=lambda item: (_rank(price[item[0]]), tie[item[0]]))]


def _rank(cycles: float | None) -> tuple[bool, int]:
    """Predicted cycles as a sort key: priced settings first, cheapest first; a setting the model cannot
    price (its program does not compile, say) last, where the screens record why."""
    if cycles is None or not math.isfinite(cycles):
        return True, 0
    return False, round(cycles)


def _proposal(view: KernelView, space: DesignSpace, p: Params, role: Role, change: str) -> DesignProposal:
    facts = view.knowledge.facts
    source = space.source(p, facts, view.version)
    predicted = view.predicted(source, p)
    used = tuple(key for key in (*space.consults, *view.model.reads) if key in view.knowledge.sources)
    rationale = "; ".join(filter(None, (space.rationale(p, facts, predicted or 0.0), view.bottleneck(source, p))))
    return DesignProposal(
        role=role, policy="builtin", source=source, rationale=rationale,
        change=change, params=p, predicted_cycles=predicted, consulted=tuple(view.knowledge.fact_ids(used)),
    )  # fmt: skip
