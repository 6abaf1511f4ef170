"""What the DSL summary says of one construct under one version, decided from the checks of its
examples, the legality rules in force and the docs' claims:

- **availability**: `unavailable` when the compiler refuses it (a "use X instead"
  diagnostic on an example, or a construct rule in force), `deprecated` when it accepts it with a
  deprecation, else `available`;
- **verdict**: `contradicted` when the docs' own example of it fails under the docs' version (does
  not compile, draws another diagnostic than the docs say, or computes something else), when the
  pack's program of it fails for any reason but the version's refusal, or when the compiler refutes
  a doc claim about it; `confirmed` when an example did what it is said to; else `unverified`;
- **fingerprint**: the availability and the constraints that are not numbers (rule code, key and
  predicate), which is what an upgrade compares: numbers change with measurements, not the language.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from chiplore.core.pack import Construct
from chiplore.core.rules import Avoid, Unavailable, predicate_of
from chiplore.ingest.dsl_examples import Outcome
from chiplore.kg.models import Availability, EntryChange, EntryVerdict, LanguageExample


@dataclass(frozen=True)
class Standing:
    """A construct's availability and constraints under one version: what two versions are compared on."""

    availability: Availability
    instead: str
    constraints: tuple[str, ...]  # "<rule code> <rule key> <op> <value>", sorted

    @property
    def fingerprint(self) -> str:
        return "; ".join([self.availability, *self.constraints])


def matches(rule_key: str, keys: Sequence[str]) -> bool:
    """Whether a rule's key is one of a construct's (a key ending in "." names every rule under it)."""
    base = rule_key.split("/", 1)[0]
    return any(base == key or (key.endswith(".") and base.startswith(key)) for key in keys)


def standing(construct: Construct, outcomes: Sequence[Outcome], rules: Sequence[dict[str, object]]) -> Standing:
    """Availability from what the compiler said of its examples, then from the construct rules in force;
    constraints from the rules on its keys whose predicates are not numbers."""
    name = construct.name
    refused = next((o.unavailable[name] for o in outcomes if name in o.unavailable), None)
    old = next((o.deprecated[name] for o in outcomes if name in o.deprecated), None)
    constraints: set[str] = set()
    for rule in rules:
        if not matches(str(rule["key"]), construct.rule_keys):
            continue
        predicate = predicate_of(str(rule["predicate"]))
        if isinstance(predicate, Unavailable):
            refused = refused if refused is not None else predicate.instead
            continue
        value = None if isinstance(predicate, Avoid) else predicate.value
        if isinstance(value, int | float) and not isinstance(value, bool):
            continue  # a number: measured and re-measured, not what the language is
        shown = "" if value is None else f" {json.dumps(value, sort_keys=True)}"
        constraints.add(f"{rule['code']} {rule['key']} {predicate.op}{shown}")
    if refused is not None:
        return Standing("unavailable", refused, tuple(sorted(constraints)))
    if old is not None:
        return Standing("deprecated", old, tuple(sorted(constraints)))
    return Standing("available", "", tuple(sorted(constraints)))


@dataclass(frozen=True)
class Verdict:
    verdict: EntryVerdict
    why: str


def verdict(name: str, version: str, examples: Sequence[LanguageExample], outcomes: dict[str, Outcome],
            refused_claims: Sequence[tuple[str, str]]) -> Verdict:  # fmt: skip
    """The verdict on a construct under `version`, from its doc and pack examples written for that
    version (`outcomes` by example id) and the doc claims about it the compiler refutes (text, diagnostic)."""
    own = [x for x in examples if x.version == version and x.origin in ("doc", "pack") and x.id in outcomes]
    passing = {c for x in own if not outcomes[x.id].failed for c in x.constructs}
    for example in own:
        outcome = outcomes[example.id]
        if not outcome.failed or name not in _blame(example, outcome, passing):
            continue
        if example.origin == "pack" and set(outcome.unavailable) and not outcome.blamed:
            continue  # the version refuses it: that is its availability, not a contradiction
        where = "the docs' example" if example.origin == "doc" else "the pack's program of it (the docs' syntax)"
        return Verdict("contradicted", f"{where} {_failure(example, outcome)}")
    for text, diagnostic in refused_claims:
        return Verdict("contradicted", f"the compiler refutes the docs' '{text}': {diagnostic}")
    if any(not outcomes[x.id].failed or name in outcomes[x.id].unavailable for x in own):
        return Verdict("confirmed", "")  # did what it is said to, or the compiler refuses it as the entry says
    return Verdict("unverified", "no example of it did what it is said to")


def _blame(example: LanguageExample, outcome: Outcome, passing: set[str]) -> set[str]:
    """The constructs a failure points at: those the version refuses or its errors' lines use; for a
    failure without a line (a wrong result, a diagnostic that did not come), those no passing example
    of the version uses (all of the example's when every one does)."""
    pointed = set(outcome.unavailable) | set(outcome.blamed)
    if pointed:
        return pointed
    return (set(example.constructs) - passing) or set(example.constructs)


def _failure(example: LanguageExample, outcome: Outcome) -> str:
    if outcome.host == "failed":
        return f"computes something else under {outcome.version} ({example.statement}): {outcome.host_detail}"
    said = f"draw {example.expects}" if example.expects else "compile"
    first = outcome.detail.splitlines()[0] if outcome.detail else "no diagnostic at all"
    return f"is said to {said} under {outcome.version} but does not: {first}"


def change(before: Standing, after: Standing, renamed_to: Sequence[str]) -> tuple[EntryChange, str]:
    """How a construct changed between two versions, and in what (`renamed_to`: the available
    constructs the compiler's "instead" names)."""
    if before.fingerprint == after.fingerprint:  # the compiler's wording of "instead" may change: not the language
        return "unchanged", ""
    if before.availability == "unavailable" and after.availability != "unavailable":
        return "added", f"now {after.availability}" + (f" ({after.instead})" if after.instead else "")
    if after.availability == "unavailable":
        if renamed_to:
            return "renamed", f"-> {', '.join(renamed_to)}: {after.instead}"
        return "removed", after.instead
    if after.availability == "deprecated" and before.availability == "available":
        return "deprecated", after.instead
    gone = sorted(set(before.constraints) - set(after.constraints))
    new = sorted(set(after.constraints) - set(before.constraints))
    parts = [f"no longer {c}" for c in gone] + [f"now {c}" for c in new]
    if before.availability != after.availability:
        parts.insert(0, f"{before.availability} -> {after.availability}")
    return "changed", "; ".join(parts)
