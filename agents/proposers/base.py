"""The proposer interface: who designs the next programs of a kernel.

A proposer plays one role: the **architect** proposes whole designs (new branches of the tree),
the **refiner** small changes to BEST. The loop asks it for a few proposals at a time with the
kernel's current view; an empty answer ends the role's turn, and `why_empty` says why (the loop
records it as the kernel's stop reason). Each role has a builtin proposer (deterministic from a
seed, no network) and an LLM one; both answer with `DesignProposal`s that the screens and the judge
treat alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.knowledge import Knowledge
from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Params
from chiplore.core.target import KernelSpec
from chiplore.kg.models import DesignNode

Role = Literal["architect", "refiner"]


@dataclass(frozen=True)
class DesignProposal:
    """A program a proposer wants tried, and why."""

    role: Role
    policy: str
    source: str
    rationale: str
    change: str
    params: Params | None = None  # the knobs of a design-space program
    predicted_cycles: float | None = None
    consulted: tuple[str, ...] = ()  # fact ids the proposal relied on (CONSULTED links)
    error: str = ""  # the proposer could not produce a legal program: the loop records a failed design
    activities: tuple[str, ...] = ()  # the model calls behind it (LLM proposers)

    @property
    def sha(self) -> str:
        return content_sha(self.source)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True) if self.params is not None else ""


@dataclass
class KernelView:
    """What a proposer sees of one kernel: its spec, the knowledge of the version, its design space
    (when the pack has one), the calibrated cost model, which sources were tried already, and BEST."""

    spec: KernelSpec
    version: str
    knowledge: Knowledge
    space: DesignSpace | None
    model: CalibratedCostModel
    seed: int
    tried: Callable[[Sequence[str]], set[str]] = lambda shas: set()  # which of these shas the tree has
    best: DesignNode | None = None
    architect_designs: int = 0  # whole designs the architect proposed for the kernel under this version
    no_space: str = ""  # why the pack has no design space for the kernel (when it has none and can say)
    note: Callable[[str], None] = lambda text: None  # progress words from a long step (the architect's pricing)

    @property
    def kernel(self) -> str:
        return self.spec.name

    @property
    def best_params(self) -> Params | None:
        return json.loads(self.best.params) if self.best is not None and self.best.params else None

    @property
    def best_cycles(self) -> float | None:
        return self.best.measured_cycles if self.best is not None else None

    def predicted(self, source: str, params: Params | None) -> float | None:
        return self.model.predict(self.kernel, source, params, self.knowledge.facts)

    def bottleneck(self, source: str, params: Params | None) -> str:
        """What bounds the design, as the cost model says ("" when it cannot say)."""
        return self.model.explain(self.kernel, source, params, self.knowledge.facts)


class Proposer(Protocol):
    """One role's policy: `propose` is called once per round of the role, with the kernel's view."""

    role: Role
    name: str  # the policy, recorded on each design ("builtin", "llm")

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        """Up to `count` new designs; none when the role has nothing left to propose."""
        ...

    def why_empty(self, view: KernelView) -> str:
        """Why the last `propose` returned nothing ("" when the design space is simply exhausted)."""
        ...
