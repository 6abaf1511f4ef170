"""The librarian turns doc chunks into claims (DESIGN.md 4). The builtin one is deterministic: it
keeps the sentences that state a quantity with a unit, a limit, or a must/cannot rule, names the
hardware parameter a quantity is about when the sentence says so in words it knows, and records the
constructs a chunk mentions. An LLM librarian writes the same `ExtractedClaim`s."""

from __future__ import annotations

import re
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ingest.chunks import Chunk

ClaimKind = Literal["quantity", "limit", "rule"]


class ExtractedClaim(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str  # the sentence, as the docs word it
    kind: ClaimKind
    concept: str  # the concept it is about, e.g. "dma.startup" or "construct:dma"
    param: str | None = None  # the hardware parameter it states, when it states one
    value: float | None = None
    unit: str | None = None


class Librarian(Protocol):
    policy: str  # recorded as the Activity's policy

    def extract(self, chunk: Chunk, page_title: str) -> list[ExtractedClaim]: ...


@runtime_checkable
class PageLibrarian(Protocol):
    """A librarian that reads a whole page at once (one model call per page, not per paragraph)."""

    policy: str

    def extract_page(self, chunks: list[Chunk], page_title: str) -> list[tuple[Chunk, ExtractedClaim]]: ...


# Parameters a sentence can state, the unit their value is in, and the words that must all appear.
# The keys are chiplore's own names; the microbenchmark fits measure the same keys.
PARAMS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("dma.queued_start_cycles", "cycles", (r"\bqueued\b", r"\bstart")),
    ("dma.start_cycles", "cycles", (r"\bDMA command\b", r"\bstart")),
    ("dma.engine_bytes_per_cycle", "B/cycle", (r"\bDMA engine\b", r"bytes per cycle")),
    ("noc.dmn_bytes_per_cycle", "B/cycle", (r"\bDMN\b", r"bytes per cycle")),
    ("noc.cluster_port_bytes_per_cycle", "B/cycle", (r"\bcluster", r"\baccepts\b", r"bytes per cycle")),
    ("dma.dm_to_dm_bytes_per_cycle", "B/cycle", (r"DM -> DM", r"bytes per cycle")),
    ("hbm.unit_bytes", "B", (r"\bHBM\b", r"transaction units?")),
    ("hbm.partial_store_factor", "x", (r"\b(stores?|writes?)\b", r"times slower")),
    ("dm.usable_bytes_per_slice", "B", (r"\bKB\b", r"\bDM\b", r"\bslice\b")),
    ("decode.bytes_per_cycle", "B/cycle", (r"\b[Ll]ookups?\b", r"bytes per cycle")),
    ("vector.transcendental_cycles_per_flit", "cycles/flit", (r"\bvector op|transcendental", r"\bflit\b")),
    ("vector.max_chain_ops", "ops", (r"\bvector stage\b", r"\bchains?\b", r"\bops\b")),
    ("contract.bytes_per_step", "B", (r"\bcontraction engine\b", r"bytes of stream per step")),
    ("dm.bank_run_limit", "accesses", (r"\bone DM bank\b", r"times in a row")),
    ("dma.cross_cluster_factor", "x", (r"\bbetween the two clusters\b", r"same-cluster rate")),
    ("kernel.launch_cycles", "cycles", (r"\b[Ll]aunching a kernel\b", r"cycles")),
    ("chip.clock_hz", "Hz", (r"\bchip runs at\b", r"GHz")),
    ("noc.chip_bytes_per_cycle", "TB/s", (r"\bHBM\b", r"TB/s", r"\blimit\b")),
)  # fmt: skip

# Yes/no facts a sentence can state: the parameter, the words that must all appear, and the words
# that make it a "no".
FLAGS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("switch.crosses_clusters", (r"\bclusters?\b", r"\bswitch\b", r"exchange|between|across"),
     r"\bonly\b|stays inside|cannot|does not"),
)  # fmt: skip

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
QUANTITY = re.compile(
    r"(?P<value>\d[\d,]*(?:\.\d+)?|\b(?:one|two|three|four|five|six|seven|eight)\b)\s*"
    r"(?P<unit>bytes per cycle|B/cycle|cycles per flit|flits? per cycle|cycles|KB|TB/s|GHz|%|ops|-byte|times|"
    r"of the same-cluster rate|bytes|flits?)"
)
RULE = re.compile(r"\b(must|must not|cannot|never|only|is an error|are errors|rejects?|not allowed)\b")
LIMIT = re.compile(r"\b(at most|up to|no more than|maximum|max)\b")
CONSTRUCT = re.compile(r"`\.?([a-z_][a-z0-9_]*)(?:\([^`]*\))?`")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*])")
# The two read sizes come in one sentence: "reads 32 bytes per cycle on `main` and 8 on `sub`".
READ_SIZES = re.compile(r"reads (\d+) bytes per cycle on `main` and (\d+) on `sub`")


class BuiltinLibrarian:
    policy = "builtin"

    def extract(self, chunk: Chunk, page_title: str) -> list[ExtractedClaim]:
        if chunk.code:
            return []
        claims: list[ExtractedClaim] = []
        for sentence in sentences(chunk.text):
            claims += _claims_of(sentence, chunk.heading or page_title)
        return claims


def sentences(text: str) -> list[str]:
    """A paragraph's sentences, with list markers and line breaks removed."""
    flat = " ".join(line.strip() for line in text.splitlines())
    flat = re.sub(r"^(?:[*-]|\d+\.)\s+", "", flat)
    flat = re.sub(r"\*\*([^*]+)\*\*", r"\1", flat)
    return [s.strip() for s in SENTENCE_END.split(flat) if s.strip()]


def constructs(text: str) -> list[str]:
    """The constructs a chunk names in backticks (`.dma`, `reduce_slices(...)`), as concept keys."""
    return sorted({f"construct:{m.group(1)}" for m in CONSTRUCT.finditer(text)})


def _claims_of(sentence: str, heading: str) -> list[ExtractedClaim]:
    for key, words, negation in FLAGS:
        if all(re.search(word, sentence, re.IGNORECASE) for word in words):
            value = 0.0 if re.search(negation, sentence, re.IGNORECASE) else 1.0
            return [ExtractedClaim(text=sentence, kind="rule", concept=key.rsplit(".", 1)[0], param=key, value=value,
                                   unit="bool")]  # fmt: skip
    if match := READ_SIZES.search(sentence):
        return [
            ExtractedClaim(text=sentence, kind="quantity", concept="fetch.read_size", param=f"fetch.read_bytes_{q}",
                           value=float(match.group(i)), unit="B/cycle")
            for i, q in ((1, "main"), (2, "sub"))
        ]  # fmt: skip
    quantity = QUANTITY.search(sentence)
    param = _param(sentence) if quantity else None
    if quantity and param is not None:
        key, unit = param
        value = _value(quantity.group("value"))
        if quantity.group("unit") == "KB":
            value *= 1024
        elif quantity.group("unit") == "GHz":
            value *= 1e9
        if key == "vector.transcendental_cycles_per_flit" and "flit per cycle" in quantity.group("unit"):
            value = 1.0 / value  # "one flit per cycle" is one cycle per flit
        kind: ClaimKind = "limit" if LIMIT.search(sentence) else "quantity"
        return [ExtractedClaim(text=sentence, kind=kind, concept=key.rsplit(".", 1)[0], param=key, value=value,
                               unit=unit)]  # fmt: skip
    if quantity or LIMIT.search(sentence) or RULE.search(sentence):
        kind = "rule" if RULE.search(sentence) and not quantity else ("limit" if LIMIT.search(sentence) else "quantity")
        return [ExtractedClaim(text=sentence, kind=kind, concept=_concept(sentence, heading))]
    return []


def _param(sentence: str) -> tuple[str, str] | None:
    for key, unit, words in PARAMS:
        if all(re.search(word, sentence, re.IGNORECASE) for word in words):
            return key, unit
    return None


def _value(text: str) -> float:
    return float(NUMBER_WORDS[text]) if text in NUMBER_WORDS else float(text.replace(",", ""))


def _concept(sentence: str, heading: str) -> str:
    if match := CONSTRUCT.search(sentence):
        return f"construct:{match.group(1)}"
    slug = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")
    return f"topic:{slug or 'general'}"
