"""Legality rules from the compiler: compile the target pack's probes under a toolchain version and
turn each diagnostic into a LegalityRule with a machine-checkable predicate, linked to the
diagnostic, the probe program and the toolchain. Compiling is free: no device time.

The probes are written for the chip's structure (its shape), which the pack's compile-only structure
searches find first: a probe written for another shape would draw shape diagnostics beside the one
it is about, and a limit measured through them would be off by the probe's own frame.

A rule is a fact about the compiler, not about one version: when a later version's probe draws the
same diagnostic code with the same predicate, the existing rule gains a HOLDS_UNDER link (confirmed)
instead of a twin. A rule whose predicate or code changes is a new rule; `reconcile_rules` links it
to the one it SUPERSEDES (the same probe's rule under the version before) and retires old rules no
probe finds any more.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.errors import TargetError
from chiplore.core.ids import content_sha
from chiplore.core.probes import LimitProbe, RuleProbes, Vocabulary, largest_accepted
from chiplore.core.rules import AtMost, Avoid, Forbidden, Predicate, Unavailable
from chiplore.core.target import CheckResult, Target
from chiplore.core.target import Diagnostic as TargetDiagnostic
from chiplore.ingest.fits import CompileBench
from chiplore.kg.models import Activity, Check, Diagnostic, LegalityRule, ProbeProgram, Toolchain
from chiplore.kg.repo.knowledge import (
    RUNNING,
    confirm_rule,
    ended_if_raised,
    finish_activity,
    record_activity,
    record_rule,
)
from chiplore.kg.repo.measurements import claims_about
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.repo.rules import retire_unreplaced_rules, same_rule, supersede_changed_rules
from chiplore.kg.store import GraphStore


class RulesSummary(BaseModel):
    version: str
    probes: int  # programs compiled
    rules: int  # rules recorded (new or confirmed)
    limits: dict[str, float]  # quantity -> the largest value the compiler accepts
    structure: dict[str, float] = {}  # what the probes were written for (the structure searches' values)
    structure_error: str = ""  # why the structure searches found nothing (the probes assumed the docs')


def probe_structure(target: Target, version: str) -> dict[str, float]:
    """What the compile probes are written for: the values of the pack's structure searches
    (`RuleProbes.structure`), compile only, each search's program written for what the ones before
    it found. Raises TargetError when a search finds no consistent answer."""
    pack = target.pack()
    fits = {fit.id: fit for fit in pack.fits}
    bench = CompileBench(target)
    found: dict[str, float] = {}
    for fit_id in pack.rule_probes.structure:
        fit = fits.get(fit_id)
        if fit is None or fit.search is None:
            raise TargetError(f"structure probe {fit_id}: the pack has no compile-only search of that id")
        templates = {probe.id: probe for probe in target.microbenchmarks_for(found)}
        try:
            found |= fit.search(templates[fit.template], version, bench)
        except (KeyError, ValueError) as error:
            raise TargetError(f"structure probe {fit_id}: {error}") from error
    return found


def learn_rules(store: GraphStore, target: Target, version: str) -> RulesSummary:
    probes = target.pack().rule_probes
    activity = record_activity(store, Activity(id=f"rules-{target.name}-{version}-{_probe_set(probes)}",
                                               role="librarian", policy="builtin-probes", outcome=RUNNING))  # fmt: skip
    with ended_if_raised(store, activity.id):  # Ctrl-C: it reads interrupted, not `ok` with no end
        return _learn_rules(store, target, version, activity)


def _learn_rules(store: GraphStore, target: Target, version: str, activity: Activity) -> RulesSummary:
    pack = target.pack()
    probes, vocabulary = pack.rule_probes, pack.compiler
    compiled = 0
    rules = 0
    try:
        structure, structure_error = probe_structure(target, version), ""
    except TargetError as error:  # the rules are still worth probing, written for the documented structure
        structure, structure_error = {}, str(error)

    def compile_(source: str) -> CheckResult:
        nonlocal compiled
        compiled += 1
        return target.check(source, version)

    def record(key: str, source: str, purpose: str, diagnostic: TargetDiagnostic, predicate: Predicate) -> None:
        nonlocal rules
        body = predicate.with_quantity(key, vocabulary.stated_bound(diagnostic)).json_body()
        evidence = Diagnostic(id=content_sha(f"{version}|{diagnostic.code}|{diagnostic.message}")[:32],
                              code=diagnostic.code, severity=diagnostic.severity, message=diagnostic.message,
                              toolchain=version)  # fmt: skip
        program = ProbeProgram(sha=content_sha(source), source=source, purpose=purpose)
        same = same_rule(store, target.name, key, diagnostic.code, body)
        if same is not None:  # the rule an earlier version taught: it holds here too
            confirm_rule(store, same, diagnostic=evidence, probe=program, target=target.name, version=version,
                         slot=f"{key}|{purpose}")  # fmt: skip
        else:
            record_rule(
                store,
                LegalityRule(id=content_sha(f"{target.name}|{version}|{diagnostic.code}|{body}")[:32], key=key,
                             code=diagnostic.code, predicate=body, description=diagnostic.message,
                             probe=f"{key}|{purpose}", toolchain=version),
                diagnostic=evidence, probe=program, activity=activity, target=target.name,
            )  # fmt: skip
        rules += 1

    available: dict[str, bool] = {}
    written_for = probes.vocabulary({}, structure)
    for probe in probes.constructs:  # the version's vocabulary first: the other probes are written in it
        source = probe.program(version, written_for)
        refused = [(d, missing) for d in compile_(source).diagnostics if (missing := vocabulary.unavailable(d))]
        available[probe.construct] = not refused
        for diagnostic, missing in refused[:1]:
            record(f"construct.{probe.construct}", source, f"is `{probe.construct}` available",
                   diagnostic, Unavailable(instead=missing.instead))  # fmt: skip
    names = probes.vocabulary(available, structure)
    for pair in probes.pairs:
        breaking, fixed = pair.breaking(version, names), pair.fixed(version, names)
        clean = {d.code for d in compile_(fixed).diagnostics}
        found = [d for d in compile_(breaking).diagnostics if d.code not in clean]
        for index, diagnostic in enumerate(found):  # the first is the probe's rule; others come along
            key = pair.key if index == 0 else f"{pair.key}/{diagnostic.code}"
            record(key, breaking, pair.purpose, diagnostic, pair.predicate if index == 0 else Avoid())
        if found and isinstance(pair.predicate, Forbidden):  # a yes/no fact the compiler just answered "no"
            _judge_flag(store, version, pair.key, found[0], target.name, activity)
    limits: dict[str, float] = {}
    for limit in probes.limits:
        largest, first_refused = _bisect(limit, names, compile_, version)
        if first_refused is None:
            continue
        source, diagnostic = first_refused
        limits[limit.key] = largest * limit.step + limit.frame
        record(limit.key, source, limit.purpose, diagnostic, AtMost(value=limits[limit.key]))
    finish_activity(store, activity.id, utc_now(), f"{compiled} probe(s) compiled, {rules} rule(s) recorded")
    return RulesSummary(version=version, probes=compiled, rules=rules, limits=limits, structure=structure,
                        structure_error=structure_error)  # fmt: skip


class RuleChanges(BaseModel):
    superseded: int  # old rules a changed rule replaced
    retired: int  # old rules no probe finds under the new version


def reconcile_rules(store: GraphStore, target: str, previous: str, version: str) -> RuleChanges:
    """After probing `version`: link each new rule to the rule of the same probe it replaces under
    `previous` (SUPERSEDES; the old one becomes `superseded`), and retire the old rules nothing
    replaces. Idempotent: a second call finds nothing left to link."""
    return RuleChanges(superseded=supersede_changed_rules(store, target, previous, version),
                       retired=retire_unreplaced_rules(store, target, previous, version))  # fmt: skip


def _bisect(limit: LimitProbe, names: Vocabulary, compile_: Callable[[str], CheckResult], version: str
            ) -> tuple[int, tuple[str, TargetDiagnostic] | None]:  # fmt: skip
    """The largest knob value that compiles as cleanly as the smallest, and the program and the new
    diagnostic of the next one (None: no limit within the range probed). Where the probe names the
    diagnostics that mark its limit and another refuses first (a small DM overflows under the TRF
    probe's staging buffer), the search goes on above it for a marked one; a marked one that the
    other hides at the top of the range (the bank-run note where DM overflows) is found first."""
    baseline = {d.code for d in compile_(limit.program(version, names, limit.low)).diagnostics}

    def refused(value: int) -> list[TargetDiagnostic]:
        return [d for d in compile_(limit.program(version, names, value)).diagnostics if d.code not in baseline]

    def marked(value: int) -> list[TargetDiagnostic]:
        return [d for d in refused(value) if limit.marks is None or limit.marks(d.code)]

    if not refused(limit.high):
        return limit.high, None
    largest = largest_accepted(limit.low, limit.high, refused)
    first = marked(largest + 1)
    if not first:  # another rule's refusal: the limit, if any, is where a marked diagnostic joins it
        if not marked(limit.high):
            return limit.high, None
        largest = largest_accepted(largest, limit.high, marked)
        first = marked(largest + 1)
    return largest, (limit.program(version, names, largest + 1), first[0])


def _judge_flag(store: GraphStore, version: str, key: str, diagnostic: TargetDiagnostic, target: str,
                activity: Activity) -> None:  # fmt: skip
    """Claims that the compiler's refusal answers: "yes" claims are contradicted, "no" ones confirmed.
    The evidence is the diagnostic itself (a Check of method `probe` records the verdict)."""
    evidence = Ref("Diagnostic", content_sha(f"{version}|{diagnostic.code}|{diagnostic.message}")[:32])
    for claim in claims_about(store, key, version):
        verdict = "contradicts" if float(claim["value"]) else "confirms"
        check = Check(id=content_sha(f"{claim['id']}|{evidence.key}")[:32], method="probe", verdict=verdict,
                      detail=f"{diagnostic.code}: {diagnostic.message}")  # fmt: skip
        upsert(store, [check])
        link(store, [
            Link(Ref("Claim", claim["id"]), "CHECKED_BY", Ref.to(check)), Link(Ref.to(check), "USED", evidence),
            Link(Ref.to(check), "CREATED_BY", Ref.to(activity)),
            Link(Ref.to(check), "UNDER", Ref("Toolchain", Toolchain.id_of(target, version))),
            Link(evidence, "CONTRADICTS" if verdict == "contradicts" else "CONFIRMS", Ref("Claim", claim["id"])),
        ])  # fmt: skip


def _probe_set(probes: RuleProbes) -> str:
    """Which probes a learning run used (so a rerun with the same probes is the same activity)."""
    keys = [p.construct for p in probes.constructs] + [p.key for p in probes.pairs] + [p.key for p in probes.limits]
    return content_sha("|".join(keys))[:12]
