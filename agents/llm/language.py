"""The checked DSL summary as the LLM architect and refiner read it: one line per construct of the
session's toolchain, each with its verdict, within a token share of the prompt.

Read from the `dsl-summary` named query (the graph's LanguageEntry nodes, built by learning). The
lines a model must not miss come first and are always kept: a construct the compiler does not have
(with what to write instead), a deprecated one, and one whose doc example the evidence contradicts
(with the evidence). The confirmed rest follow; when the text is over its share, meanings are cut
first, then whole entries, whose names are listed so the model can ask the named query for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages.utils import count_tokens_approximately

from chiplore import queries as named_queries
from chiplore.core.errors import ChiploreError
from chiplore.kg.store import GraphStore

MEANING_CHARS = 160  # a meaning's share of its line, before the budget cuts it entirely
NOT_SHOWN_NAMES = 60  # names listed for entries left out (the rest are counted)


def tokens(text: str) -> int:
    """The approximate tokens of a prompt text (LangChain's estimate: characters over four)."""
    return count_tokens_approximately([text])


def summary_rows(store: GraphStore, version: str) -> list[dict[str, Any]]:
    """The summary's entries under `version` (the dsl-summary query's rows); none when it fails."""
    try:
        return named_queries.run(store, "dsl-summary", {"toolchain": version})
    except ChiploreError:  # a store that stopped answering: the prompt goes without the summary
        return []


def verdict_tag(row: dict[str, Any], version: str) -> str:
    """The entry's verdict as the model reads it: what it may rely on, and what not."""
    instead = f"; write instead: {row['instead']}" if row.get("instead") else ""
    if row.get("availability") == "unavailable":
        return f"[UNAVAILABLE under {version}{instead}]"
    why = f": {row['why']}" if row.get("why") else ""
    tag = f"[CONTRADICTED{why}]" if row.get("verdict") == "contradicted" else f"[{row.get('verdict') or 'unverified'}]"
    if row.get("availability") == "deprecated":
        tag += f" [DEPRECATED{instead}]"
    return tag


def entry_line(row: dict[str, Any], version: str, meaning_chars: int) -> str:
    """One construct: name, kind, how it is written, verdict, and (budget allowing) what it means."""
    meaning = " ".join(str(row.get("meaning") or "").split())
    if meaning_chars and meaning:
        meaning = meaning if len(meaning) <= meaning_chars else meaning[: meaning_chars - 1].rstrip() + "…"
        meaning = f" {meaning}"
    else:
        meaning = ""
    return f"- {row['construct']} ({row['kind']}) `{row['syntax']}` {verdict_tag(row, version)}{meaning}"


def warns(row: dict[str, Any]) -> bool:
    """Whether the entry says not to write the construct as the docs do."""
    return row.get("availability") != "available" or row.get("verdict") == "contradicted"


def render_summary(rows: Sequence[dict[str, Any]], version: str, max_tokens: int) -> str:
    """The summary's lines within `max_tokens` (0: no limit): warnings first and always, then the
    confirmed rest; meanings are cut before entries, and the entries left out are named."""
    if not rows:
        return f"(no checked summary of the language under {version} in the graph: `learn` builds it)"
    warning = [row for row in rows if warns(row)]
    rest = [row for row in rows if not warns(row)]

    def text(kept: Sequence[dict[str, Any]], meaning_chars: int, left_out: Sequence[dict[str, Any]]) -> str:
        lines = [entry_line(row, version, meaning_chars) for row in (*warning, *kept)]
        if left_out:
            names = [str(row["construct"]) for row in left_out]
            more = f" and {len(names) - NOT_SHOWN_NAMES} more" if len(names) > NOT_SHOWN_NAMES else ""
            lines.append(f"- (not shown, to keep within the prompt's share: {', '.join(names[:NOT_SHOWN_NAMES])}"
                         f"{more}; ask named_query dsl-summary for them)")  # fmt: skip
        return "\n".join(lines)

    for meaning_chars in (MEANING_CHARS, 0):
        whole = text(rest, meaning_chars, [])
        if not max_tokens or tokens(whole) <= max_tokens:
            return whole
    kept = list(rest)
    while kept and tokens(text(kept, 0, rest[len(kept) :])) > max_tokens:
        kept.pop()
    return text(kept, 0, rest[len(kept) :])


def language_summary(store: GraphStore, version: str, max_tokens: int) -> str:
    """The prompt's language section for `version` (see `render_summary`)."""
    return render_summary(summary_rows(store, version), version, max_tokens)
