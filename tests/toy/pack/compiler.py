"""What the Toyl compiler's diagnostics mean to chiplore, and how a program one toolchain refuses
is ported: E01xx are the text's errors (the screener's parse check); an E0103 names a statement the
version lacks and the one to write instead, which is the rewrite; an E0301 (a chunk too big for a
lane's buffer) is answered with twice the chunks; a message may state the limit it enforces."""

from __future__ import annotations

import re

from chiplore.core.pack import Unavailable
from chiplore.core.target import Diagnostic

UNAVAILABLE = re.compile(r"^'(?P<construct>\w+)' is not available in toolchain \S+; write '(?P<instead>\w+)'")
BOUND = re.compile(r"exceeds the ([\d,]+) (?:B lane buffer|DMA lanes)")
HEADER = re.compile(r"^#toolchain\s+\S+", re.MULTILINE)
CHUNKS = re.compile(r"\bchunks=(\d+)")


class ToylVocabulary:
    def is_syntax(self, diagnostic: Diagnostic) -> bool:
        return diagnostic.code.startswith("E01")

    def unavailable(self, diagnostic: Diagnostic) -> Unavailable | None:
        match = UNAVAILABLE.match(diagnostic.message) if diagnostic.code == "E0103" else None
        return Unavailable(construct=match["construct"], instead=match["instead"]) if match else None

    def stated_bound(self, diagnostic: Diagnostic) -> float | None:
        match = BOUND.search(diagnostic.message)
        return float(match.group(1).replace(",", "")) if match else None

    def constructs(self, source: str) -> frozenset[str]:
        """Each statement's keyword (`load`, `mul`, ...): what the construct probes name."""
        words = (line.split()[0] for line in source.splitlines() if line.strip() and line.lstrip()[0] not in "#/")
        return frozenset(words)


class ToylRepairs:
    def __init__(self, vocabulary: ToylVocabulary) -> None:
        self.vocabulary = vocabulary

    def retarget(self, source: str, version: str) -> str:
        return HEADER.sub(f"#toolchain {version}", source, count=1)

    def rewrite(self, source: str, diagnostic: Diagnostic) -> tuple[str, str] | None:
        missing = self.vocabulary.unavailable(diagnostic)
        if missing is not None and missing.instead:
            renamed = re.sub(rf"^(\s*){missing.construct}\b", rf"\g<1>{missing.instead}", source, flags=re.MULTILINE)
            return f"{missing.construct} -> {missing.instead}", renamed
        if diagnostic.code == "E0301" and diagnostic.span is not None:
            lines = source.splitlines(keepends=True)
            at = diagnostic.span.line - 1
            line = lines[at]
            doubled = CHUNKS.sub(lambda m: f"chunks={2 * int(m[1])}", line) if CHUNKS.search(line) else (
                line.rstrip("\n") + " chunks=2\n")  # fmt: skip
            return "twice the chunks", "".join([*lines[:at], doubled, *lines[at + 1 :]])
        return None
