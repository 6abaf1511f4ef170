"""The screens: free checks of a proposed design, cheapest first, each one small object.

parse -> known rules (the graph's predicates over the design's features) -> compile -> host
correctness test -> cost estimate (skip a design predicted slower than BEST by more than a
margin). The `Screener` runs them in order, stops at the first that fails, and reports every
result to its callbacks (one records each as a Screening in the graph).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chiplore.agents.knowledge import Rule
from chiplore.core.pack import CompilerVocabulary, Params
from chiplore.core.target import CheckResult, Diagnostic, Target

SKIP_MARGIN = 0.10  # a design predicted this much slower than the best is not worth device time
TIGHT_MARGIN = 0.02  # the least margin, however well the model has done: two medians' noise
Features = dict[str, object]


@dataclass
class Candidate:
    """A design on its way through the screens; the screens share what they learn of it."""

    design_id: str
    kernel: str
    source: str
    features: Features
    params: Params | None = None
    best_cycles: float | None = None
    checked: CheckResult | None = None  # the compiler's answer, asked once
    predicted_cycles: float | None = None
    margin: float | None = None  # the estimate screen's for this kernel (None: the screen's own)


@dataclass(frozen=True)
class ScreenResult:
    passed: bool
    check: str  # the screen's name
    detail: str = ""
    predicted_cycles: float | None = None


class Screen:
    """One free check; `check` is called once per candidate that passed the screens before it.
    Subclass it: `name` and `check` are required."""

    name: str

    def check(self, candidate: Candidate) -> ScreenResult:
        raise NotImplementedError


@dataclass
class ParseScreen(Screen):
    """The program parses and names only what the language has (the compiler's syntax codes)."""

    target: Target
    version: str
    vocabulary: CompilerVocabulary
    name: str = "parse"

    def check(self, candidate: Candidate) -> ScreenResult:
        candidate.checked = candidate.checked or self.target.check(candidate.source, self.version)
        syntax = [d for d in candidate.checked.diagnostics if d.is_error and self.vocabulary.is_syntax(d)]
        return ScreenResult(False, self.name, first(syntax)) if syntax else ScreenResult(True, self.name)


@dataclass
class RuleScreen(Screen):
    """The design keeps every learnt rule its features or its constructs can be checked against."""

    rules: Sequence[Rule]
    vocabulary: CompilerVocabulary
    name: str = "rules"

    def check(self, candidate: Candidate) -> ScreenResult:
        features = {"constructs": self.vocabulary.constructs(candidate.source), **candidate.features}
        for rule in self.rules:
            why = rule.predicate.violated_by(features)
            if why:
                return ScreenResult(False, self.name, f"{rule.code}: {why} (rule {rule.fact})")
        return ScreenResult(True, self.name, f"{len(self.rules)} rules")


@dataclass
class CompileScreen(Screen):
    """The compiler accepts it (warnings and notes allowed)."""

    target: Target
    version: str
    name: str = "compile"

    def check(self, candidate: Candidate) -> ScreenResult:
        candidate.checked = candidate.checked or self.target.check(candidate.source, self.version)
        errors = [d for d in candidate.checked.diagnostics if d.is_error]
        if errors:
            return ScreenResult(False, self.name, first(errors))
        return ScreenResult(True, self.name, f"{len(candidate.checked.diagnostics)} notes or warnings")


@dataclass
class HostTestScreen(Screen):
    """It computes the right thing on the host's smoke fixtures (the slowest free check)."""

    target: Target
    version: str
    name: str = "host_test"

    def check(self, candidate: Candidate) -> ScreenResult:
        tested = self.target.host_test(candidate.source, candidate.kernel, self.version)
        if tested.correctness is None or not tested.correctness.passed:
            detail = tested.correctness.message if tested.correctness else tested.message
            return ScreenResult(False, self.name, detail or "not executed")
        return ScreenResult(True, self.name, tested.correctness.message)


@dataclass
class EstimateScreen(Screen):
    """Not predicted slower than BEST by more than `margin` (a design the model cannot price passes)."""

    predict: Callable[[Candidate], float | None]
    margin: float = SKIP_MARGIN
    name: str = "estimate"

    def check(self, candidate: Candidate) -> ScreenResult:
        predicted = candidate.predicted_cycles = self.predict(candidate)
        best = candidate.best_cycles
        margin = self.margin if candidate.margin is None else candidate.margin
        if predicted is not None and best is not None and predicted > best * (1 + margin):
            return ScreenResult(False, self.name, f"predicted {predicted:,.0f} cycles, the best is {best:,.0f} "
                                f"(margin {margin:.0%})", predicted)  # fmt: skip
        return ScreenResult(True, self.name, "" if predicted is None else f"predicted {predicted:,.0f} cycles",
                            predicted)  # fmt: skip


@dataclass
class CheckSetScreen(Screen):
    """Right on the kernel's check sets, on the host, once a design of the kernel has run wrong on them on
    the device (`armed`; a rounding the generator does not keep, say): its later designs stop here, free,
    instead of after their A/B pairs. After the estimate: the executor is the slowest check."""

    target: Target
    version: str
    sets: tuple[str, ...]
    armed: Callable[[], bool]
    name: str = "check_sets"

    def check(self, candidate: Candidate) -> ScreenResult:
        if not self.armed():
            return ScreenResult(True, self.name, "on the device before BEST (no design has run wrong on them)")
        tested = self.target.host_check(candidate.source, candidate.kernel, self.version, self.sets)
        if tested is None:
            return ScreenResult(True, self.name, "on the device before BEST (the target cannot test them here)")
        if tested.correctness is None or not tested.correctness.passed:
            detail = (tested.correctness.message if tested.correctness else tested.message) or "not executed"
            return ScreenResult(False, self.name, f"wrong on the host: {detail}")
        return ScreenResult(True, self.name, tested.correctness.message)


def skip_margin(error: float | None) -> float:
    """How much slower than BEST a design may be predicted and still reach the device: the model's
    observed error on the kernel (a design predicted x slower than BEST can be faster only when the model
    is off by more than x between them), within [TIGHT_MARGIN, SKIP_MARGIN]; SKIP_MARGIN while unknown."""
    return SKIP_MARGIN if error is None else min(SKIP_MARGIN, max(TIGHT_MARGIN, error))


@dataclass
class Screener:
    """Runs the screens in order; the first failure stops the design. Every result is reported to
    `on_result` (the graph's Screening record, progress)."""

    screens: Sequence[Screen]
    on_result: list[Callable[[str, ScreenResult], None]] = field(default_factory=list)

    def screen(self, candidate: Candidate) -> ScreenResult:
        result = ScreenResult(True, "none")
        for screen in self.screens:
            result = screen.check(candidate)
            for callback in self.on_result:
                callback(candidate.design_id, result)
            if not result.passed:
                break
        return result


def first(diagnostics: list[Diagnostic]) -> str:
    """The first diagnostic, and how many more there are."""
    d = diagnostics[0]
    return f"{d.code}: {d.message}" + (f" (+{len(diagnostics) - 1} more)" if len(diagnostics) > 1 else "")


def standard_screens(target: Target, version: str, vocabulary: CompilerVocabulary, rules: Sequence[Rule],
                     predict: Callable[[Candidate], float | None], check_sets: tuple[str, ...] = (),
                     armed: Callable[[], bool] = lambda: False) -> list[Screen]:  # fmt: skip
    """The loop's screens, cheapest first (the check sets on the host once `armed` says so)."""
    screens: list[Screen] = [
        ParseScreen(target, version, vocabulary),
        RuleScreen(rules, vocabulary),
        CompileScreen(target, version),
        HostTestScreen(target, version),
        EstimateScreen(predict),
    ]
    if check_sets:
        screens.append(CheckSetScreen(target, version, check_sets, armed))
    return screens
