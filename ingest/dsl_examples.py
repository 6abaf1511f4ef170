"""The programs behind the DSL summary, and their checks. Programs come from the docs' code blocks (a
fragment completed by the pack's language guide), from the guide for a construct no block shows, and
from an LLM librarian. Each is compiled under a version (a Check of method `compile` that keeps every
diagnostic) and, where the guide can state what it computes, run on the host against that (a Check
of method `host`). Under the version it was written for, a program must do what it is said to do:
compile (or draw the diagnostic the docs say it draws) and compute what they say; under another
version its outcome is evidence of what changed."""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import BaseModel

from chiplore.core.ids import content_sha
from chiplore.core.pack import HostCase, LanguageGuide, TargetPack
from chiplore.core.target import Diagnostic, Target
from chiplore.ingest.chunks import chunk_page
from chiplore.kg.models import Check, LanguageExample

FENCE = re.compile(r"^```([^\n]*)\n(.*?)\n?```\s*$", re.S)
Origin = Literal["doc", "pack", "llm"]
HostVerdict = Literal["passed", "failed", "not run"]


class DocExamples(BaseModel):
    """A version's doc examples, the chunk each comes from, and the docs' whole text (the context
    fragments are completed in)."""

    examples: list[LanguageExample]
    chunks: dict[str, list[str]]  # example id -> the code chunks (shas) that show it
    context: str


class Outcome(BaseModel):
    """What happened to one example under one version."""

    example: str
    version: str
    compiled: bool  # no error
    detail: str  # every diagnostic, one per line ("" when clean)
    unavailable: dict[str, str]  # construct -> what the compiler says to write instead
    deprecated: dict[str, str]
    blamed: list[str]  # constructs on the lines of its errors (vocabulary errors aside)
    as_stated: bool | None  # under its own version: did it do what it is said to (None: another version)
    host: HostVerdict = "not run"
    host_detail: str = ""

    @property
    def failed(self) -> bool:
        """It did not do what it is said to: compile as stated, or compute what is stated."""
        return self.as_stated is False or self.host == "failed"


def example_id(origin: str, version: str, source: str, expects: str = "", statement: str = "") -> str:
    return content_sha(f"{origin}|{version}|{expects}|{statement}|{source}")[:32]


def make_example(guide: LanguageGuide, origin: Origin, version: str, source: str, expects: str = "",
                 statement: str = "") -> LanguageExample:  # fmt: skip
    return LanguageExample(id=example_id(origin, version, source, expects, statement), source=source, origin=origin,
                           version=version, expects=expects, statement=statement,
                           constructs=sorted(guide.used_in(source)))  # fmt: skip


def doc_examples(target: Target, version: str, guide: LanguageGuide) -> DocExamples:
    """Every code block of the version's docs that the guide makes a program of (same text, one example)."""
    pages = target.docs(version)
    context = "\n\n".join(page.text for page in pages)
    found: dict[str, LanguageExample] = {}
    chunks: dict[str, list[str]] = {}
    for page in pages:
        for chunk in chunk_page(page.text):
            fence = FENCE.match(chunk.text) if chunk.code else None
            completed = guide.complete(fence.group(1).strip(), fence.group(2), version, context) if fence else None
            if completed is None:
                continue
            example = make_example(guide, "doc", version, completed.source, completed.expects or "")
            found.setdefault(example.id, example)
            chunks.setdefault(example.id, [])
            if chunk.sha not in chunks[example.id]:
                chunks[example.id].append(chunk.sha)
    return DocExamples(examples=list(found.values()), chunks=chunks, context=context)


class Checker:
    """Compiles examples and runs them on the host, once per (example, version)."""

    def __init__(self, target: Target, pack: TargetPack, guide: LanguageGuide, host_under: str | None = None) -> None:
        """`host_under`: the one version programs are run on the host under (None: every version)."""
        self.target, self.pack, self.guide, self.host_under = target, pack, guide, host_under
        self.spelled = {spelling: c.name for c in guide.constructs for spelling in (*c.spellings, c.name)}
        self.outcomes: dict[tuple[str, str], Outcome] = {}
        self.checks: dict[tuple[str, str], list[Check]] = {}

    def outcome(self, example: LanguageExample, version: str) -> Outcome:
        key = (example.id, version)
        if key not in self.outcomes:
            self.outcomes[key], self.checks[key] = self._check(example, version)
        return self.outcomes[key]

    def _check(self, example: LanguageExample, version: str) -> tuple[Outcome, list[Check]]:
        own = example.version == version
        source = example.source if own else self.pack.repairs.retarget(example.source, version)
        diagnostics = self.target.check(source, version).diagnostics
        errors = [d for d in diagnostics if d.is_error]
        unavailable, deprecated, blamed = self._read(source, diagnostics, set(example.constructs))
        drawn = example.expects in {d.code for d in diagnostics} if example.expects else not errors
        outcome = Outcome(example=example.id, version=version, compiled=not errors, detail=_listing(diagnostics),
                          unavailable=unavailable, deprecated=deprecated, blamed=sorted(blamed),
                          as_stated=drawn if own else None)  # fmt: skip
        verdict = "inconclusive" if outcome.as_stated is None else "confirms" if drawn else "contradicts"
        expected = f"expected {example.expects}" if example.expects else "expected to compile"
        checks = [Check(id=_check_id(example.id, version, "compile"), method="compile", verdict=verdict,
                        detail=f"under {version} ({expected}): {outcome.detail or 'compiles cleanly'}")]  # fmt: skip
        run = not errors and self.host_under in (None, version)
        case = self.guide.host_case(source, version) if run else None
        if case is not None:
            passed, detail = self._host(source, case, version)
            outcome = outcome.model_copy(update={"host": "passed" if passed else "failed", "host_detail": detail})
            checks.append(Check(id=_check_id(example.id, version, "host"), method="host",
                                verdict="confirms" if passed else "contradicts",
                                detail=f"under {version}, {case.statement}: {detail}"))  # fmt: skip
        return outcome, checks

    def _read(self, source: str, diagnostics: tuple[Diagnostic, ...], used: set[str]
              ) -> tuple[dict[str, str], dict[str, str], set[str]]:  # fmt: skip
        unavailable: dict[str, str] = {}
        deprecated: dict[str, str] = {}
        blamed: set[str] = set()
        lines = source.splitlines()
        for diagnostic in diagnostics:
            if (missing := self.pack.compiler.unavailable(diagnostic)) is not None:
                if (name := self.spelled.get(missing.construct)) is not None:
                    unavailable[name] = missing.instead
                continue
            if (old := self.guide.deprecated(diagnostic)) is not None:
                if (name := self.spelled.get(old.construct)) is not None:
                    deprecated[name] = old.instead
                continue
            if diagnostic.is_error and diagnostic.span is not None:
                text = "\n".join(lines[diagnostic.span.line - 1 : diagnostic.span.end_line])
                blamed |= set(self.guide.used_in(text)) & used
        return unavailable, deprecated, blamed

    def _host(self, source: str, case: HostCase, version: str) -> tuple[bool, str]:
        if case.kernel is not None:
            result = self.target.host_test(source, case.kernel, version)
            if result.correctness is None:
                return False, f"not executed: {result.message}"
            return result.correctness.passed, result.correctness.message
        run = self.guide.run(source, case.inputs, version) if case.inputs is not None else None
        if run is None or case.expected is None:
            return False, "the pack states what it computes but cannot run it on the host"
        if run.outputs is None:
            return False, f"did not run: {run.error}"
        return compare(case, run.outputs)


def compare(case: HostCase, outputs: dict[str, object] | object) -> tuple[bool, str]:
    """Whether every expected output is within `atol + rtol * |expected|`; the worst element otherwise."""
    assert case.expected is not None and isinstance(outputs, dict)
    for name, want in case.expected.items():
        if name not in outputs:
            return False, f"no output {name}"
        got = np.asarray(outputs[name], dtype=np.float64).reshape(-1)
        wanted = np.asarray(want, dtype=np.float64).reshape(-1)
        if got.shape != wanted.shape:
            return False, f"{name} has {got.size} values, {wanted.size} expected"
        excess = np.abs(got - wanted) - (case.atol + case.rtol * np.abs(wanted))
        bad = np.flatnonzero(~(excess <= 0))  # NaN fails too
        if bad.size:
            i = int(bad[np.argmax(np.nan_to_num(excess[bad], nan=np.inf))])
            return False, f"{name}[{i}] is {got[i]:.6g}, expected {wanted[i]:.6g} ({bad.size} of {got.size} off)"
    return True, "every output as expected"


def _check_id(example: str, version: str, method: str) -> str:
    return content_sha(f"{example}|{version}|{method}")[:32]


def _listing(diagnostics: tuple[Diagnostic, ...]) -> str:
    return "\n".join(f"{d.severity}[{d.code}]: {d.message}" for d in diagnostics)
