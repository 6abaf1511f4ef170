"""The DSL summary of a toolchain version: one checked entry per construct the version's docs name or
show, written to the graph (`chiplore.kg.repo.language`), for a model that has never seen the language to
program from.

`summarise` gathers the docs' code blocks (completed by the pack's `LanguageGuide`), adds the
guide's program for a construct no block shows (completions and programs both written for the chip's
structure as the pack's compile-only structure searches find it, `probe_structure`), and, when the
graph holds an earlier version's summary, that summary's examples: every program is compiled, and
run on the host where the guide states what it computes (`chiplore.ingest.dsl_examples`). Each
construct's entry then gets its syntax, its meaning (the docs' sentences that name it, cited; or an
LLM librarian's prose, kept only when an example of its own backs it), its availability, its
constraints (the legality rules on its keys), its verdict and, against the earlier version, how it
changed (`chiplore.ingest.dsl_entries`). Learning runs it after the rules; an upgrade runs it on the
new version. Idempotent: ids are content hashes and an entry is per construct and version, so a
second run rewrites the same nodes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.errors import TargetError
from chiplore.core.pack import Construct, LanguageGuide, language_guide
from chiplore.core.target import Target
from chiplore.ingest.chunks import chunk_page
from chiplore.ingest.dsl_entries import Standing, change, matches, standing, verdict
from chiplore.ingest.dsl_examples import Checker, Outcome, doc_examples, make_example
from chiplore.ingest.librarian import Librarian, sentences
from chiplore.ingest.rules import probe_structure
from chiplore.kg.models import Activity, LanguageEntry, LanguageExample
from chiplore.kg.repo.knowledge import RUNNING, ended_if_raised, finish_activity, record_activity
from chiplore.kg.repo.language import (
    EntryLinks,
    ExampleCheck,
    claims_under,
    entries_under,
    entry_examples,
    previous_with_entries,
    record_entries,
    record_examples,
    rules_under,
)
from chiplore.kg.store import GraphStore

MEANING_SENTENCES = 2
MEANING_CHARS = 400


class ConstructDraft(BaseModel):
    """What a summary writer is shown of one construct: the builtin entry and the docs behind it."""

    name: str
    kind: str
    syntax: str
    availability: str
    instead: str
    meaning: str
    paragraphs: list[str]  # the docs' paragraphs that name it
    example: str  # a program of it that did what it is said to ("" when none did)


class WrittenStatement(BaseModel):
    text: str  # one thing the construct does or requires
    example: str  # a whole program that shows it
    expects: str | None = None  # the diagnostic code the program draws, when it shows a refusal


class WrittenEntry(BaseModel):
    name: str
    meaning: str
    statements: list[WrittenStatement]


class LanguageSummary(BaseModel):
    version: str
    constructs: int  # the docs name or show
    entries: int
    examples: int  # programs checked under the version
    compiled: int  # entries with at least one program compiled under the version
    contradicted: dict[str, str]  # construct -> why
    unavailable: list[str]
    compared_with: str | None = None
    changed: dict[str, str] = {}  # construct -> "renamed: -> widen, narrow: ..."
    statements_kept: int = 0  # a writer's statements whose example did what it said
    statements_dropped: int = 0


class Evidence:
    """A version's examples, by construct, and what became of each under each version checked."""

    def __init__(self, checker: Checker) -> None:
        self.checker = checker
        self.by_construct: dict[str, list[LanguageExample]] = defaultdict(list)
        self.cites: list[tuple[str, str]] = []

    def add(self, example: LanguageExample, names: Sequence[str] | None = None) -> None:
        for name in names if names is not None else example.constructs:
            if all(known.id != example.id for known in self.by_construct[name]):
                self.by_construct[name].append(example)

    def outcomes(self, name: str, version: str) -> dict[str, Outcome]:
        return {x.id: self.checker.outcome(x, version) for x in self.by_construct.get(name, [])}


def summarise(store: GraphStore, target: Target, version: str, *, previous: str | None = None,
              writer: Librarian | None = None, structure: Mapping[str, float] | None = None,
              ) -> LanguageSummary:  # fmt: skip
    """Write the summary of `version` (compared with `previous`, or the latest earlier version the graph
    has a summary of). A pack without a language guide has no summary: nothing is written. `structure`:
    what the pack's structure searches found under `version` (the rules' `RulesSummary.structure`;
    searched again when not given)."""
    began = utc_now()
    pack = target.pack()
    guide = language_guide(pack)
    if guide is None:
        return LanguageSummary(version=version, constructs=0, entries=0, examples=0, compiled=0, contradicted={},
                               unavailable=[])  # fmt: skip
    if structure is None:  # a fragment completed, or a program written, for another shape draws its diagnostics
        try:
            structure = probe_structure(target, version)
        except TargetError:  # the searches found nothing consistent: written for the documented structure
            structure = {}
    guide = guide.written_for(structure)
    known = {c.name: c for c in guide.constructs}
    previous = previous or previous_with_entries(store, target.name, version)
    evidence = Evidence(Checker(target, pack, guide, host_under=version))
    docs = doc_examples(target, version, guide)
    for example in docs.examples:
        evidence.add(example)
        evidence.cites += [(example.id, sha) for sha in docs.chunks[example.id]]
    prose = _prose(target, version, guide)
    named = {name for paragraph in prose for name in paragraph.names} | set(evidence.by_construct)
    constructs = sorted(name for name in named if name in known)
    carried = entry_examples(store, previous) if previous else {}
    for name, examples in carried.items():
        for example in examples:
            evidence.add(example, [name])
    names = sorted(set(constructs) | (set(carried) & set(known)))
    for name in names:  # the pack's program where no example of the docs shows it compiling as it should
        shown = [x for x in evidence.by_construct.get(name, []) if x.version == version and not x.expects]
        if all(evidence.checker.outcome(x, version).failed for x in shown):
            program = guide.example(name, version)
            if program is not None:
                evidence.add(make_example(guide, "pack", version, program, statement=f"the pack's program of {name}"))
    rules = rules_under(store, version)
    claims = claims_under(store, version)
    entries = _entries(store, target.name, version, previous, names, known, evidence, prose, rules, claims, guide)
    summary = _summary(version, constructs, entries, previous)
    written = _written(store, target, version, guide, writer, entries, evidence, prose, summary) if writer else None
    summary = written or summary
    activity = record_activity(store, Activity(id=f"dsl-summary-{target.name}@{version}", role="librarian",
                                               policy=writer.policy if writer and written else "builtin",
                                               started_at=began, outcome=RUNNING))  # fmt: skip
    with ended_if_raised(store, activity.id):
        _write(store, target.name, evidence, entries, activity)
    finish_activity(store, activity.id, utc_now(), f"{summary.entries} construct(s) summarised")
    return summary


class Paragraph(BaseModel):
    """A prose chunk that names constructs, with its sentences and the constructs each names."""

    sha: str
    names: frozenset[str]
    sentences: list[tuple[str, frozenset[str]]]


Prose = list[Paragraph]  # in reading order: the pages as the target lists them, each from the top
TEMPLATE = re.compile(r"\{\w+\}")  # a message template ("{construct} is not available"), not prose


def _prose(target: Target, version: str, guide: LanguageGuide) -> Prose:
    out: Prose = []
    for page in target.docs(version):
        for chunk in chunk_page(page.text):
            if not chunk.code and (names := guide.named_in(chunk.text)):
                said = [(s, guide.named_in(s)) for s in sentences(chunk.text)]
                out.append(Paragraph(sha=chunk.sha, names=names, sentences=[(s, n) for s, n in said if n]))
    return out


Entries = dict[str, tuple[LanguageEntry, EntryLinks]]


def _entries(store: GraphStore, target: str, version: str, previous: str | None, names: list[str],
             known: dict[str, Construct], evidence: Evidence, prose: Prose, rules: list[dict[str, object]],
             claims: list[dict[str, object]], guide: LanguageGuide) -> Entries:  # fmt: skip
    before = {entry.name: entry for entry in entries_under(store, previous)} if previous else {}
    old_rules = rules_under(store, previous) if previous else []
    available = set()
    standings: dict[str, Standing] = {}
    for name in names:
        outcomes = list(evidence.outcomes(name, version).values())
        standings[name] = standing(known[name], outcomes, rules)
        if standings[name].availability != "unavailable":
            available.add(name)
    out: Entries = {}
    for name in names:
        construct, now = known[name], standings[name]
        examples = evidence.by_construct.get(name, [])
        outcomes = evidence.outcomes(name, version)
        stated = [c for c in claims if name in guide.named_in(str(c["text"]))]
        refused = [(str(c["text"]), str(c["refused"])) for c in stated if c["refused"]]
        judged = verdict(name, version, examples, outcomes, refused)
        cited = [p.sha for p in prose if name in p.names]
        cited += [sha for x in examples if x.version == version for ex, sha in evidence.cites if ex == x.id]
        checks = {c.id for x in examples for c in evidence.checker.checks.get((x.id, version), [])}
        links = EntryLinks(chunks=set(cited), rules={str(r["id"]) for r in rules if _on(construct, r)},
                           claims={str(c["id"]) for c in stated}, checks=checks)  # fmt: skip
        entry = LanguageEntry(
            id=LanguageEntry.id_of(target, version, name), name=name, version=version, kind=construct.kind,
            syntax=construct.syntax, meaning=_meaning(name, prose), availability=now.availability,
            instead=now.instead, verdict=judged.verdict, why=judged.why, examples=len(outcomes),
            fingerprint=now.fingerprint, toolchain=version,
        )  # fmt: skip
        if previous:
            then = standing(construct, list(evidence.outcomes(name, previous).values()), old_rules)
            renamed = [n for n in sorted(available) if any(_names(s, now.instead) for s in known[n].spellings)]
            kind, detail = change(then, now, renamed)
            entry = entry.model_copy(update={"change": kind, "change_from": previous, "change_detail": detail,
                                             "before": then.fingerprint if kind != "unchanged" else ""})  # fmt: skip
            old = before.get(name)
            if old is not None and kind != "unchanged":
                links.supersedes = old.id
        out[name] = (entry, links)
    return out


def _names(spelling: str, instead: str) -> bool:
    """Whether the compiler's "instead" names a construct by this spelling, bare or quoted in a sentence."""
    return instead.strip() == spelling or f"'{spelling}'" in instead


def _on(construct: Construct, rule: dict[str, object]) -> bool:
    return matches(str(rule["key"]), construct.rule_keys)


def _meaning(name: str, prose: Prose) -> str:
    """The docs' first sentences that name the construct, in reading order, those that name it early first
    (message templates left out)."""
    word = re.split(r"[._]", name)[-1]
    found = [(s.find(word), s) for p in prose for s, names in p.sentences if name in names and not TEMPLATE.search(s)]
    picked: list[str] = []
    for _, sentence in sorted(enumerate(found), key=lambda item: (not 0 <= item[1][0] <= 40, item[0])):
        if sentence[1] not in picked:
            picked.append(sentence[1])
        if len(picked) == MEANING_SENTENCES:
            break
    return " ".join(picked)[:MEANING_CHARS]


def _summary(version: str, constructs: list[str], entries: Entries, previous: str | None) -> LanguageSummary:
    values = [entry for entry, _ in entries.values()]
    return LanguageSummary(
        version=version, constructs=len(constructs), entries=len(values),
        examples=len({check for _, links in entries.values() for check in links.checks}),
        compiled=sum(1 for entry in values if entry.examples), unavailable=sorted(
            e.name for e in values if e.availability == "unavailable"),
        contradicted={e.name: e.why for e in values if e.verdict == "contradicted"}, compared_with=previous,
        changed={e.name: f"{e.change}: {e.change_detail}" for e in values if e.change not in ("", "unchanged")},
    )  # fmt: skip


def _written(store: GraphStore, target: Target, version: str, guide: LanguageGuide, writer: Librarian,
             entries: Entries, evidence: Evidence, prose: Prose, summary: LanguageSummary,
             ) -> LanguageSummary | None:  # fmt: skip
    """The writer's prose and examples: each example checked; a meaning kept only with a kept statement.
    None when the librarian writes no summary."""
    done = {e.name for e in entries_under(store, version) if e.policy == writer.policy}
    drafts = [_draft(entry, evidence, prose, version) for entry, _ in entries.values() if entry.name not in done]
    answer = writer.write_summary(target.pack().language, version, drafts) if drafts else []
    if answer is None:
        return None
    kept = dropped = 0
    for written in answer:
        if written.name not in entries:
            continue
        entry, links = entries[written.name]
        backed = False
        for statement in written.statements:
            example = make_example(guide, "llm", version, statement.example, statement.expects or "", statement.text)
            evidence.add(example, [written.name])
            outcome = evidence.checker.outcome(example, version)
            links.checks |= {c.id for c in evidence.checker.checks[(example.id, version)]}
            backed |= not outcome.failed
            kept, dropped = kept + (not outcome.failed), dropped + outcome.failed
        if backed and written.meaning.strip():
            entries[written.name] = (entry.model_copy(update={"meaning": written.meaning.strip(),
                                                               "policy": writer.policy}), links)  # fmt: skip
    return summary.model_copy(update={"statements_kept": kept, "statements_dropped": dropped})


def _draft(entry: LanguageEntry, evidence: Evidence, prose: Prose, version: str) -> ConstructDraft:
    outcomes = evidence.outcomes(entry.name, version)
    good = [x for x in evidence.by_construct.get(entry.name, []) if x.version == version and x.id in outcomes
            and not outcomes[x.id].failed and not x.expects]  # fmt: skip
    paragraphs = [" ".join(s for s, _ in p.sentences) for p in prose if entry.name in p.names]
    return ConstructDraft(name=entry.name, kind=entry.kind, syntax=entry.syntax, availability=entry.availability,
                          instead=entry.instead, meaning=entry.meaning, paragraphs=paragraphs[:4],
                          example=min((x.source for x in good), key=len, default=""))  # fmt: skip


def _write(store: GraphStore, target: str, evidence: Evidence, entries: Entries, activity: Activity) -> None:
    examples = {x.id: x for xs in evidence.by_construct.values() for x in xs}
    checks = [ExampleCheck(check, example, version) for (example, version), made in evidence.checker.checks.items()
              for check in made]  # fmt: skip
    record_examples(store, list(examples.values()), evidence.cites, checks, target=target, activity=activity)
    record_entries(store, list(entries.values()), target=target, activity=activity)
