"""The one line an error becomes, with a hint where one helps: what to start, set or run next."""

from __future__ import annotations

import re

from chiplore.core.errors import ChiploreError, StoreUnavailable

NEO4J_HINT = ("start one (`scripts/neo4j-local start` prints its URI; or `docker compose up -d neo4j`) "
              "or point CHIPLORE_NEO4J_URI at yours")  # fmt: skip
_UNREACHABLE = re.compile(r"^Neo4j at (?P<address>\S+) is unreachable: (?P<reason>.*)$", re.S)
_ERRNO = re.compile(r"\[Errno -?\d+\] (?P<why>[^)\]]+)")


def explain(error: ChiploreError) -> str:
    """The error's message, shortened and completed with a hint for the cases a user meets first."""
    text = " ".join(str(error).split())
    if isinstance(error, StoreUnavailable):
        found = _UNREACHABLE.match(text)
        if found:
            return f"Neo4j at {found['address']} is unreachable ({_reason(found['reason'])}): {NEO4J_HINT}"
    return text


def _reason(raw: str) -> str:
    """The driver's long reason in a few words: the OS error when it names one."""
    errno = _ERRNO.search(raw)
    if errno:
        return errno["why"].strip().lower()
    if "timed out" in raw.lower():
        return "timed out"
    return raw if len(raw) <= 100 else raw[:97] + "..."
