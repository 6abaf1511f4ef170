"""The builtin proposers: programs from the target pack's design space, ranked by the calibrated
cost model (measured parameters, calibrated by the device runs so far). The architect proposes the
best few whole designs, spread over the space's first knob; the refiner the best-ranked settings one
knob step from BEST. Deterministic from the seed (ties are broken by a seeded order)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable

from agents.proposers.base import DesignProposal, KernelView, Role
from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Params, neighbours, points


class BuiltinArchitect:
    role: Role = "architect"
    name = "builtin"

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        space = view.space
        if space is None:
            return []
        ranked = _ranked(view, space, points(space, view.knowledge.facts))
        first = space.knobs[0].name
        chosen: list[Params] = []
        for p in ranked:  # the best of each value of the first knob, then the rest in rank order
            if all(q[first] != p[first] for q in chosen):
                chosen.append(p)
        chosen += [p for p in ranked if p not in chosen]
        return [_proposal(view, space, p, self.role, "whole design") for p in chosen[:count]]

    def why_empty(self, view: KernelView) -> str:
        return "" if view.space is not None else f"the target pack has no design space for {view.kernel}"


class BuiltinRefiner:
    role: Role = "refiner"
    name = "builtin"

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        space, best = view.space, view.best_params
        if space is None or best is None:  # BEST is not a design of the space: nothing to step from
            return []
        ranked = _ranked(view, space, neighbours(space, best, view.knowledge.facts))
        out = []
        for p in ranked[:count]:
            moved = [k for k in p if p[k] != best.get(k)]
            change = ", ".join(f"{k} {best.get(k)} -> {p[k]}" for k in moved)
            out.append(_proposal(view, space, p, self.role, change))
        return out

    def why_empty(self, view: KernelView) -> str:
        return ""


def _ranked(view: KernelView, space: DesignSpace, candidates: Iterable[Params]) -> list[Params]:
    facts = view.knowledge.facts
    sources = {json.dumps(p, sort_keys=True): (p, space.source(p, facts, view.version)) for p in candidates}
    seen = view.tried([content_sha(src) for _, src in sources.values()])
    unseen = [(key, p, src) for key, (p, src) in sources.items() if content_sha(src) not in seen]
    order = list(range(len(unseen)))
    random.Random(view.seed).shuffle(order)
    tie = {key: order[i] for i, (key, _, _) in enumerate(unseen)}
    price = {key: view.predicted(src, p) for key, p, src in unseen}
    return [p for key, p, _ in sorted(unseen, key=lambda item: (round(price[item[0]] or 0.0), tie[item[0]]))]


def _proposal(view: KernelView, space: DesignSpace, p: Params, role: Role, change: str) -> DesignProposal:
    facts = view.knowledge.facts
    source = space.source(p, facts, view.version)
    predicted = view.predicted(source, p)
    used = tuple(key for key in space.consults if key in view.knowledge.sources)
    return DesignProposal(
        role=role, policy="builtin", source=source, rationale=space.rationale(p, facts, predicted or 0.0),
        change=change, params=p, predicted_cycles=predicted, consulted=tuple(view.knowledge.fact_ids(used)),
    )  # fmt: skip
