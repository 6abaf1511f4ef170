"""The free screens of a design on a CPU worker: the worker runs the standard screens (parse, rules,
compile, host test, estimate) with its own copy of the target; the driver records each result, in
order, as the local screener would."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from chiplore.agents.knowledge import Rule
from chiplore.agents.proposers import KernelView
from chiplore.agents.scale.engine import Engine, ScreenRequest
from chiplore.agents.screens import Candidate, Screen, Screener, ScreenResult, standard_screens
from chiplore.core.target import Target


def screen_here(target: Target, request: ScreenRequest) -> list[ScreenResult]:
    """The standard screens of one candidate, with this process's target: what a CPU worker runs.
    The estimate is the pack's cost model times the kernel's calibration, as the loop's own."""
    pack = target.pack()
    rules = [rule for rule in request.rules if isinstance(rule, Rule)]

    def predict(candidate: Candidate) -> float | None:
        if candidate.params is None:
            return None
        raw = pack.cost_model.predict(candidate.kernel, candidate.source, candidate.params, request.facts)
        return None if raw is None else raw * request.calibration

    results: list[ScreenResult] = []
    screens = standard_screens(target, request.version, pack.compiler, rules, predict)
    Screener(screens, [lambda _design, result: results.append(result)]).screen(request.candidate)
    return results


class RemoteScreener(Screener):
    """A kernel's screener whose screens run on the engine's CPU workers; each result is reported to
    the callbacks here (the graph's Screening), as `Screener` reports them."""

    def __init__(self, engine: Engine, view: KernelView, on_result: list[Callable[[str, ScreenResult], None]],
                 local: Sequence[Screen] = ()) -> None:  # fmt: skip
        super().__init__(list(local), on_result)  # `local`: screens run here once the worker's have passed
        self.engine, self.view = engine, view

    def screen(self, candidate: Candidate) -> ScreenResult:
        view = self.view
        request = ScreenRequest(candidate, view.version, tuple(view.knowledge.rules), dict(view.knowledge.facts),
                                view.model.factors.get(view.kernel, 1.0))  # fmt: skip
        results = self.engine.screen(request)
        for result in results:
            for callback in self.on_result:
                callback(candidate.design_id, result)
        if results and not results[-1].passed:
            return results[-1]
        if self.screens:
            return super().screen(candidate)
        return results[-1] if results else ScreenResult(True, "none")
