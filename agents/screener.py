"""The screener: free checks of a proposed design, cheapest first, each recorded as a Screening.

parse -> known rules (the graph's predicates over the design's features) -> compile -> host
correctness test -> cost estimate (the graph's model) -> skip when predicted slower than the best
by more than a margin. The first failing check stops the design."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from chiplore.core.ids import content_sha
from chiplore.core.target import Target
from kg.models import Activity, Screening
from kg.repo.runs import record_screening
from kg.store import GraphStore

SKIP_MARGIN = 0.10  # a design predicted this much slower than the best is not worth device time
PARSE_CODES = re.compile(r"^E01\d\d$")  # the toolchain's syntax and vocabulary codes


@dataclass(frozen=True)
class Verdict:
    passed: bool
    check: str
    detail: str = ""
    predicted_cycles: float | None = None


Features = dict[str, object]


def violated(predicate: dict[str, object], features: Features) -> str | None:
    """Why a design breaks a rule, or None when it keeps it (or the rule names nothing it has)."""
    quantity = str(predicate.get("quantity", ""))
    op = predicate.get("op")
    if op == "unavailable" and quantity.startswith("construct."):
        construct = quantity.removeprefix("construct.")
        used = features.get("constructs", ())
        if isinstance(used, (set, frozenset, list, tuple)) and construct in used:
            instead = predicate.get("instead") or "another construct"
            return f"uses `{construct}`, which this toolchain does not have (use {instead})"
        return None
    value = features.get(quantity)
    if value is None:
        return None
    limit = predicate.get("stated", predicate.get("value"))
    if op == "<=" and isinstance(value, (int, float)) and isinstance(limit, (int, float)) and value > limit:
        return f"{quantity} = {value:g} is over the limit {limit:g}"
    if op == "not_in" and isinstance(limit, list):
        values = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
        bad = sorted(str(v) for v in values if v in limit)
        if bad:
            return f"{quantity} {', '.join(bad)} is refused"
    return None


def constructs(source: str) -> frozenset[str]:
    """The method-call constructs a program uses (`.cast(`, `.reduce_slices(`, ...)."""
    return frozenset(re.findall(r"\.([a-z_]+)\(", source))


class Screener:
    def __init__(self, store: GraphStore, target: Target, version: str, activity: Activity,
                 rules: list[tuple[str, str, dict[str, object]]]) -> None:  # fmt: skip
        self.store, self.target, self.version, self.activity, self.rules = store, target, version, activity, rules

    def screen(self, design_id: str, kernel: str, source: str, features: Features,
               predict: Callable[[], float | None], best_cycles: float | None) -> Verdict:  # fmt: skip
        """`features` are what the design's family knows of it; the constructs come from any source."""
        features = {"constructs": constructs(source), **features}
        checked = self.target.check(source, self.version)
        errors = [d for d in checked.diagnostics if d.is_error]
        syntax = [d for d in errors if PARSE_CODES.match(d.code)]
        if syntax:
            return self._record(design_id, Verdict(False, "parse", _first(syntax)))
        self._record(design_id, Verdict(True, "parse"))
        for fact, code, predicate in self.rules:
            why = violated(predicate, features)
            if why:
                return self._record(design_id, Verdict(False, "rules", f"{code}: {why} (rule {fact})"))
        self._record(design_id, Verdict(True, "rules", f"{len(self.rules)} rules"))
        if errors:
            return self._record(design_id, Verdict(False, "compile", _first(errors)))
        self._record(design_id, Verdict(True, "compile", f"{len(checked.diagnostics)} notes or warnings"))
        tested = self.target.host_test(source, kernel, self.version)
        if tested.correctness is None or not tested.correctness.passed:
            detail = tested.correctness.message if tested.correctness else tested.message
            return self._record(design_id, Verdict(False, "host_test", detail or "not executed"))
        self._record(design_id, Verdict(True, "host_test", tested.correctness.message))
        predicted = predict()
        if predicted is not None and best_cycles is not None and predicted > best_cycles * (1 + SKIP_MARGIN):
            return self._record(
                design_id,
                Verdict(
                    False, "estimate", f"predicted {predicted:,.0f} cycles, the best is {best_cycles:,.0f}", predicted
                ),
            )
        return self._record(design_id, Verdict(True, "estimate", "" if predicted is None else
                                               f"predicted {predicted:,.0f} cycles", predicted))  # fmt: skip

    def _record(self, design_id: str, verdict: Verdict) -> Verdict:
        record_screening(
            self.store,
            Screening(id=content_sha(f"{design_id}|{verdict.check}")[:32], design=design_id, check=verdict.check,
                      passed=verdict.passed, detail=verdict.detail[:500], predicted_cycles=verdict.predicted_cycles),
            activity=self.activity,
        )  # fmt: skip
        return verdict


def _first(diagnostics: list) -> str:
    d = diagnostics[0]
    return f"{d.code}: {d.message}" + (f" (+{len(diagnostics) - 1} more)" if len(diagnostics) > 1 else "")
