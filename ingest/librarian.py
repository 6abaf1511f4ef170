"""The librarian turns doc chunks into claims. The builtin one is deterministic: it keeps the
sentences that state a quantity with a unit, a limit, or a must/cannot rule, names the hardware
parameter a quantity is about when the sentence says so in the words the target pack's doc
patterns give, and records the constructs a chunk mentions. An LLM librarian writes the same
`ExtractedClaim`s."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from chiplore.core.pack import DocPatterns, ParamPattern
from chiplore.ingest.chunks import Chunk
from chiplore.ingest.units import converts_by_clock

if TYPE_CHECKING:  # the summary's models; dsl_summary imports this module
    from chiplore.ingest.dsl_summary import ConstructDraft, WrittenEntry

ClaimKind = Literal["quantity", "limit", "rule"]


class ExtractedClaim(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str  # the sentence, as the docs word it
    kind: ClaimKind
    concept: str  # the concept it is about, e.g. "dma.startup" or "construct:dma"
    param: str | None = None  # the hardware parameter it states, when it states one
    value: float | None = None
    unit: str | None = None


class Librarian:
    """Reads the docs into claims, and may write the language summary's prose. Subclass it (as
    Optuna's samplers subclass BaseSampler): implement `extract` (a paragraph at a time) or
    `extract_page` (a whole page at once: one model call per page); `write_summary` is optional."""

    policy: str = "custom"  # recorded as the Activity's policy

    def extract(self, chunk: Chunk, page_title: str) -> list[ExtractedClaim]:
        """The claims one paragraph states."""
        raise NotImplementedError

    def extract_page(self, chunks: list[Chunk], page_title: str) -> list[tuple[Chunk, ExtractedClaim]]:
        """The claims a page states, each with its paragraph; by default each paragraph on its own."""
        return [(chunk, claim) for chunk in chunks for claim in self.extract(chunk, page_title)]

    def write_summary(self, language: str, version: str, drafts: list[ConstructDraft]) -> list[WrittenEntry] | None:
        """Prose and examples for the summary's entries (every example is checked before it counts);
        None, the default: the summary keeps the builtin entries' words."""
        return None


NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
NUMBER = r"(?P<value>\d[\d,]*(?:\.\d+)?|\b(?i:one|two|three|four|five|six|seven|eight)\b)\s*"  # "Two clusters."
RULE = re.compile(r"\b(must|must not|cannot|never|only|is an error|are errors|rejects?|not allowed)\b")
LIMIT = re.compile(r"\b(at most|up to|no more than|maximum|max)\b")
CONSTRUCT = re.compile(r"`\.?([a-z_][a-z0-9_]*)(?:\([^`]*\))?`")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*])")


class BuiltinLibrarian(Librarian):
    """Reads sentences with the target pack's doc patterns (which words state which parameter)."""

    policy = "builtin"

    def __init__(self, patterns: DocPatterns) -> None:
        self.patterns = patterns
        self.quantity = re.compile(NUMBER + f"(?P<unit>{patterns.units})")

    def extract(self, chunk: Chunk, page_title: str) -> list[ExtractedClaim]:
        if chunk.code:
            return []
        claims: list[ExtractedClaim] = []
        for sentence in sentences(chunk.text):
            claims += self._claims_of(sentence, chunk.heading or page_title)
        return claims

    def _claims_of(self, sentence: str, heading: str) -> list[ExtractedClaim]:
        for flag in self.patterns.flags:
            if all(re.search(word, sentence, re.IGNORECASE) for word in flag.words):
                value = 0.0 if re.search(flag.negation, sentence, re.IGNORECASE) else 1.0
                return [ExtractedClaim(text=sentence, kind="rule", concept=flag.key.rsplit(".", 1)[0], param=flag.key,
                                       value=value, unit="bool")]  # fmt: skip
        for extract in self.patterns.extractors:
            stated = extract(sentence)
            if stated:
                return [
                    ExtractedClaim(text=sentence, kind="quantity", concept=v.param.key.rsplit(".", 1)[0],
                                   param=v.param.key, value=v.value, unit=v.param.unit)
                    for v in stated
                ]  # fmt: skip
        quantity = self.quantity.search(sentence)
        pattern = self._pattern(sentence) if quantity else None
        if quantity and pattern is not None:
            key = pattern.param
            value = _value(quantity.group("value"))
            unit_text = quantity.group("unit")
            unit = key.unit
            if unit_text == "KB":
                value *= 1024
            elif unit_text == "GHz":
                value *= 1e9
            elif converts_by_clock(unit_text, key.unit):
                unit = unit_text  # "1.5 TB/s" stays as stated: the judge converts it by the documented clock
            if pattern.inverse_unit and pattern.inverse_unit in unit_text:
                value = 1.0 / value
            kind: ClaimKind = "limit" if LIMIT.search(sentence) else "quantity"
            return [ExtractedClaim(text=sentence, kind=kind, concept=key.key.rsplit(".", 1)[0], param=key.key,
                                   value=value, unit=unit)]  # fmt: skip
        if quantity or LIMIT.search(sentence) or RULE.search(sentence):
            limit = "limit" if LIMIT.search(sentence) else "quantity"
            kind = "rule" if RULE.search(sentence) and not quantity else limit
            return [ExtractedClaim(text=sentence, kind=kind, concept=_concept(sentence, heading))]
        return []

    def _pattern(self, sentence: str) -> ParamPattern | None:
        for pattern in self.patterns.params:
            if all(re.search(word, sentence, re.IGNORECASE) for word in pattern.words):
                return pattern
        return None


def sentences(text: str) -> list[str]:
    """A paragraph's sentences, with list markers and line breaks removed."""
    flat = " ".join(line.strip() for line in text.splitlines())
    flat = re.sub(r"^(?:[*-]|\d+\.)\s+", "", flat)
    flat = re.sub(r"\*\*([^*]+)\*\*", r"\1", flat)
    return [s.strip() for s in SENTENCE_END.split(flat) if s.strip()]


def constructs(text: str) -> list[str]:
    """The constructs a chunk names in backticks (`.dma`, `reduce_slices(...)`), as concept keys."""
    return sorted({f"construct:{m.group(1)}" for m in CONSTRUCT.finditer(text)})


def _value(text: str) -> float:
    word = text.lower()
    return float(NUMBER_WORDS[word]) if word in NUMBER_WORDS else float(text.replace(",", ""))


def _concept(sentence: str, heading: str) -> str:
    if match := CONSTRUCT.search(sentence):
        return f"construct:{match.group(1)}"
    slug = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")
    return f"topic:{slug or 'general'}"
