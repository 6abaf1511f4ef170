"""Policies: who proposes designs. The builtin policy writes programs from a design family and the
graph's knowledge only: the cost model (measured parameters, calibrated by the device runs so far)
ranks the family's settings; the architect proposes the best few whole designs, spread over the
family's first knob; the refiner proposes the best-ranked settings one knob step from BEST.
Deterministic from the seed (ties are broken by a seeded order)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from agents.cost_model import DEFAULTS, engine_rate, param, predict
from agents.knowledge import Knowledge
from agents.space.family import Family, Params
from chiplore.core.ids import content_sha

# What a builtin design is decided from: the cost model's parameters and the families' sizing facts.
# (a capability's fact is the rule that refuses it, where one does: `vocab.<construct>`, `contract.<dtype>`)
CONSULTS = (*DEFAULTS, "dm.usable_bytes_per_slice", "vocab.widen", "vocab.allreduce_slices", "vocab.reduce_clusters",
            "contract.f8e4m3", "contract.f4e2m1", "decode.bytes_per_cycle")  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    role: str
    policy: str
    source: str
    rationale: str
    change: str
    params: Params | None = None
    predicted_cycles: float | None = None
    consulted: tuple[str, ...] = ()
    error: str = ""  # the policy could not produce a legal program: the loop records a failed design
    activities: tuple[str, ...] = ()  # the model calls behind it (LLM policies)

    @property
    def sha(self) -> str:
        return content_sha(self.source)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True) if self.params is not None else ""


@dataclass
class Context:
    """What a policy sees of one kernel's state."""

    kernel: str
    family: Family
    knowledge: Knowledge
    version: str
    seed: int
    calibration: float = 1.0
    known: set[str] = field(default_factory=set)  # shas of every source already in the tree
    best_params: Params | None = None
    best_cycles: float | None = None

    def predicted(self, p: Params) -> float:
        return predict(self.family.workload(p, self.knowledge.facts), self.knowledge.facts) * self.calibration


class Policy(Protocol):
    name: str

    def propose(self, ctx: Context, count: int) -> list[Proposal]: ...


class BuiltinArchitect:
    name = "builtin"
    role = "architect"

    def propose(self, ctx: Context, count: int) -> list[Proposal]:
        ranked = _ranked(ctx, ctx.family.points(ctx.knowledge.facts))
        first = ctx.family.knobs[0].name
        chosen: list[Params] = []
        for p in ranked:  # the best of each value of the first knob, then the rest in rank order
            if all(q[first] != p[first] for q in chosen):
                chosen.append(p)
        chosen += [p for p in ranked if p not in chosen]
        return [_proposal(ctx, p, self.role, "whole design") for p in chosen[:count]]


class BuiltinRefiner:
    name = "builtin"
    role = "refiner"

    def propose(self, ctx: Context, count: int) -> list[Proposal]:
        if ctx.best_params is None:  # BEST is the official baseline: nothing of ours to refine yet
            return []
        ranked = _ranked(ctx, ctx.family.neighbours(ctx.best_params, ctx.knowledge.facts))
        out = []
        for p in ranked[:count]:
            moved = [k for k in p if p[k] != ctx.best_params.get(k)]
            change = ", ".join(f"{k} {ctx.best_params.get(k)} -> {p[k]}" for k in moved)
            out.append(_proposal(ctx, p, self.role, change))
        return out


def _ranked(ctx: Context, points: Iterable[Params]) -> list[Params]:
    unseen = [p for p in points if content_sha(ctx.family.source(p, ctx.knowledge.facts, ctx.version)) not in ctx.known]
    order = list(range(len(unseen)))
    random.Random(ctx.seed).shuffle(order)
    tie = {json.dumps(p, sort_keys=True): order[i] for i, p in enumerate(unseen)}
    return sorted(unseen, key=lambda p: (round(ctx.predicted(p)), tie[json.dumps(p, sort_keys=True)]))


def _proposal(ctx: Context, p: Params, role: str, change: str) -> Proposal:
    facts = ctx.knowledge.facts
    work = ctx.family.workload(p, facts)
    main = max(work.streams, key=lambda s: s.bytes_per_cluster)
    port = param(facts, "noc.cluster_port_bytes_per_cycle")
    rate = engine_rate(main, facts)
    predicted = ctx.predicted(p)
    rationale = (
        f"{json.dumps(p, sort_keys=True)}: {main.engines} engine(s) per cluster x {rate:.0f} B/cycle at "
        f"{main.packet_bytes} B packets against a {port:.0f} B/cycle cluster port; {work.chunks} chunk(s), "
        f"depth {work.depth}; {ctx.family.dm_bytes(p, facts):,} B of DM per slice; predicted {predicted:,.0f} cycles"
    )
    used = tuple(key for key in CONSULTS if key in ctx.knowledge.sources)
    return Proposal(
        role=role, policy="builtin", source=ctx.family.source(p, facts, ctx.version), rationale=rationale,
        change=change, params=p, predicted_cycles=predicted, consulted=tuple(ctx.knowledge.fact_ids(used)),
    )  # fmt: skip
