"""The guard around untrusted Cypher: queries a user types (`chiplore cypher`) or a model writes (the
LLM's Cypher tool). What every backend shares lives here; each store's `read_untrusted` applies it.

The guarantee does not rest on a list of words: each store asks its own planner what the query
does (its query type and plan operators) before running it read-only, with a server-side timeout
and caps on rows and bytes applied while the results come in. Two checks run before the query is
sent at all, because they protect the server's parser: a length cap, and a cap on how deep the
brackets and CASE expressions nest (the parsers' cost grows exponentially with it).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from chiplore.core.errors import QueryError, WriteRefused
from chiplore.kg.plans import PlanNode

MAX_QUERY_CHARS = 20_000
# FalkorDB's parser takes ~0.02 s at 12 levels and doubles per level after (minutes at 30).
MAX_NESTING = 12

# Procedures that only describe the graph's schema; any other procedure is refused.
READ_ONLY_PROCEDURES = frozenset(
    {
        "db.labels", "db.relationshipTypes", "db.propertyKeys", "db.indexes", "db.constraints",
        "db.schema.visualization", "db.schema.nodeTypeProperties", "db.schema.relTypeProperties",
    }
)  # fmt: skip
# Administration commands that only list schema objects or the catalogue; every other one is refused.
READ_ONLY_COMMANDS = frozenset({"ShowIndexes", "ShowConstraints", "ShowProcedures", "ShowFunctions"})


class QueryRefused(QueryError):
    """An untrusted query asks for something the read-only path never does (files, admin, procedures)."""


TIMEOUT_REMEDY = "raise CHIPLORE_QUERY_TIMEOUT_S"  # the CLI's; the MCP server names its own --timeout


class QueryTimedOut(QueryError):
    """An untrusted query ran past its timeout and was stopped."""

    def __init__(self, timeout_s: float | None, how: str = "") -> None:
        self.timeout_s, self.how = timeout_s, how
        super().__init__(self.worded(TIMEOUT_REMEDY))

    def worded(self, remedy: str) -> str:
        """The one line, ending in what raises the timeout where the query came from."""
        if self.timeout_s is None:
            return "the query ran past its timeout"
        return (f"the query ran past its timeout of {self.timeout_s:g} s and was stopped{self.how}; "
                f"narrow it (WHERE, LIMIT, aggregate) or {remedy}")  # fmt: skip


def timed_out(timeout_s: float, how: str = "") -> QueryTimedOut:
    """The one line both stores give for a query stopped at its timeout (`how`: a parenthesis)."""
    return QueryTimedOut(timeout_s, how)


@dataclass(frozen=True)
class UntrustedLimits:
    """What one untrusted query may cost. The defaults suit a person at a terminal."""

    max_rows: int = 1_000
    max_bytes: int = 4_000_000
    timeout_s: float = 10.0


DEFAULT_LIMITS = UntrustedLimits()


class GuardedResult(BaseModel):
    """The rows of an untrusted query, and whether (and why) some were cut."""

    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool = False
    cut_reason: str | None = None

    def summary(self) -> str:
        """One line saying how many rows came back and what was cut, for people and models."""
        shown = f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}"
        return f"{shown}; {self.cut_reason}" if self.truncated else shown


# -- checks before sending ----------------------------------------------------------------------------


def check_text(query: str, max_chars: int = MAX_QUERY_CHARS, max_nesting: int = MAX_NESTING) -> None:
    """Refuse a query that is too long or nests too deep, before any server parses it."""
    if not query.strip():
        raise QueryRefused("the query is empty")
    code = blank_comments(query)
    if not code.strip():  # FalkorDB calls a comment alone "more than one statement"
        raise QueryRefused("the query is only comments")
    if len(query) > max_chars:
        raise QueryRefused(f"the query is {len(query):,} characters long; the limit is {max_chars:,}")
    unclosed = next((what for kind, start, end in _pieces(query) if (what := _unclosed(query, kind, start, end))), None)
    if unclosed:  # FalkorDB ran `RETURN 1 AS x /* open` as if the comment were closed; Neo4j refused it
        raise QueryRefused(f"the query has {unclosed} that never ends")
    refused = _refused_command(code.strip())
    if refused:
        raise QueryRefused(refused)
    deepest = max((depth + 1 for token, depth, _ in _tokens(query) if token in _OPENERS), default=0)
    if deepest > max_nesting:
        raise QueryRefused(
            f"the query nests brackets or CASE {deepest} levels deep, more than {max_nesting}; "
            "flatten it (WITH clauses, UNWIND) instead"
        )


# What a query opening with these words is: a command of the server, refused in one line on both stores
# before either parses it (FalkorDB answered its parser's raw text; Neo4j's read-only session called
# SHOW DATABASES a write). `USE db` is a read's clause on Neo4j: its plan names the database it reads.
_ADMIN_WORDS = frozenset({"GRANT", "DENY", "REVOKE", "ALTER", "DROP", "START", "STOP", "TERMINATE", "RENAME",
                          "ENABLE", "DEALLOCATE", "REALLOCATE", "DRYRUN"})  # fmt: skip
_ADMIN_CREATED = frozenset({"USER", "ROLE", "DATABASE", "ALIAS", "COMPOSITE", "OR", "SERVER"})
# SHOW [modifiers] INDEXES | CONSTRAINTS | PROCEDURES | FUNCTIONS: listings Neo4j answers (its plan is
# checked against READ_ONLY_COMMANDS too); any modifier Neo4j 5 knows may come between
_LISTINGS = re.compile(
    r"(?is)SHOW\s+(?:(?!YIELD\b|WHERE\b)[A-Z]+\s+)*?(?:INDEX|CONSTRAINT|PROCEDURE|FUNCTION)(?:E?S)?\b"
)
_CALLED = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")
_SUBQUERY = re.compile(r"\s*\{")


def _refused_command(code: str) -> str | None:
    """Why a query (its `code`: comments blanked, stripped) that is a command rather than a read is
    refused (None for a read, and for the listings of schema objects Neo4j answers: SHOW INDEXES and
    its kin)."""
    words = code.split(None, 3)
    first = words[0].upper() if words else ""
    second = words[1].upper() if len(words) > 1 else ""
    command = itertools.takewhile(lambda word: word.isalnum() and word.upper() not in ("YIELD", "WHERE"), words[:3])
    named = " ".join(command)  # the command's words as written
    if first in ("EXPLAIN", "PROFILE"):
        return f"{first} is not run on the read-only path: send the query itself (its plan is checked there)"
    if first == "SHOW":
        if _LISTINGS.match(code):
            return None
        return f"administration commands are refused on the read-only path ({named})"
    if first in _ADMIN_WORDS or (first == "CREATE" and second in _ADMIN_CREATED):
        return f"administration commands and schema changes are refused on the read-only path ({named})"
    for name in _called_procedures(code):  # before a store says it has no such procedure (apoc.*)
        if name is not None and name not in READ_ONLY_PROCEDURES:
            return _procedure_refused(name)
    return None


def _procedure_refused(name: str | None) -> str:
    allowed = ", ".join(sorted(READ_ONLY_PROCEDURES))
    return f"procedure {name or '(unnamed)'} is refused on the read-only path (allowed: {allowed})"


def check_params(params: Mapping[str, Any] | None) -> None:
    """Refuse a parameter name no Cypher can name (`a`b` reached FalkorDB's parser, whose raw error came
    back through the MCP server and the CLI), before any server sees it."""
    bad = next((name for name in params or {} if not (isinstance(name, str) and name.isidentifier())), None)
    if bad is not None:
        raise QueryRefused(f"parameter name {bad!r} is no Cypher parameter name (letters, digits and _)")


_OPENERS = frozenset({"(", "[", "{", "CASE"})
_CLOSERS = frozenset({")", "]", "}", "END"})


def _tokens(query: str) -> Iterator[tuple[str, int, int]]:
    """Brackets, CASE/END, commas and words outside strings, quoted names and comments: (token,
    nesting depth before it, offset). Words come upper-cased."""
    depth = 0
    for kind, start, stop in _pieces(query):
        if kind != "code":
            continue
        index = start
        while index < stop:
            char = query[index]
            token, end = char, index + 1
            if char.isalpha() or char == "_":
                while end < stop and (query[end].isalnum() or query[end] == "_"):
                    end += 1
                token = query[index:end].upper()
            if token in _CLOSERS:
                depth = max(0, depth - 1)
            if token in _OPENERS or token in _CLOSERS or token == "," or end > index + 1 or token.isalpha():
                yield token, depth, index
            if token in _OPENERS:
                depth += 1
            index = end


def _pieces(query: str) -> Iterator[tuple[str, int, int]]:
    """The query cut, in order, into `code`, `string` ('..' or ".."), `name` (`..`) and `comment`
    pieces: (kind, start, end). The one walk the guard's text checks share."""
    index = start = 0
    length = len(query)
    while index < length:
        char = query[index]
        if char in "'\"`":
            end, kind = _skip_quoted(query, index), "name" if char == "`" else "string"
        elif (end := _skip_comment(query, index)) > index:
            kind = "comment"
        else:
            index += 1
            continue
        if start < index:
            yield "code", start, index
        yield kind, index, end
        index = start = end
    if start < length:
        yield "code", start, length


def _unclosed(query: str, kind: str, start: int, end: int) -> str:
    """What a piece is when it runs to the end of the query unclosed ("" when it is closed)."""
    if end < len(query):
        return ""
    if kind == "comment" and query.startswith("/*", start) and query.find("*/", start + 2) < 0:
        return "a /* comment"
    if kind in ("string", "name") and not _quoted_end(query, start)[1]:
        return "a quoted name" if kind == "name" else "a string"
    return ""


def blank_comments(query: str) -> str:
    """The query with each comment's characters turned to spaces (its newlines kept), so that every
    position in it is the user's. FalkorDB's parser crashed the embedded server on a query that opens
    with a comment (and named a column after a comment that followed its expression)."""
    return "".join(re.sub(r"[^\n]", " ", query[start:end]) if kind == "comment" else query[start:end]
                   for kind, start, end in _pieces(query))  # fmt: skip


def code_only(query: str, keep_names: bool = False) -> str:
    """The query with its comments, strings and (unless `keep_names`) quoted names blanked (newlines kept):
    what a check of its clauses reads, every position the user's."""
    kept = ("code", "name") if keep_names else ("code",)
    return "".join(query[start:end] if kind in kept else re.sub(r"[^\n]", " ", query[start:end])
                   for kind, start, end in _pieces(query))  # fmt: skip


_PARAMETER = re.compile(r"\$\s*(\w+)")


def parameter_names(query: str) -> set[str]:
    """The `$name`s a query reads (`$p`, `$ p`, `` $`a name` ``; none inside a string, a quoted name or a
    comment)."""
    names: set[str] = set()
    before = ""  # the code piece before a quoted name: a `$` at its end makes the name a parameter's
    for kind, start, end in _pieces(query):
        piece = query[start:end]
        if kind == "code":
            names.update(_PARAMETER.findall(piece))
            before = piece
        elif kind == "name":
            if before.rstrip().endswith("$"):
                names.add(piece[1:-1].replace("``", "`"))
            before = ""
        elif kind == "string":
            before = ""
    return names


def _skip_comment(query: str, start: int) -> int:
    """Where the comment that starts at `start` ends (`start` itself where none does)."""
    if query.startswith("//", start):
        newline = query.find("\n", start)
        return len(query) if newline < 0 else newline + 1
    if query.startswith("/*", start):
        end = query.find("*/", start + 2)
        return len(query) if end < 0 else end + 2
    return start


def _skip_quoted(query: str, start: int) -> int:
    return _quoted_end(query, start)[0]


def _quoted_end(query: str, start: int) -> tuple[int, bool]:
    """Where the string or quoted name that opens at `start` ends, and whether its quote closes it."""
    quote, index = query[start], start + 1
    while index < len(query):
        if query[index] == "\\" and quote != "`":
            index += 2
            continue
        if query[index] == quote:
            return index + 1, True
        index += 1
    return index, False


def has_return(query: str) -> bool:
    """True when the query ends in a top-level RETURN (so it can be wrapped in CALL { ... })."""
    return any(token == "RETURN" and depth == 0 for token, depth, _ in _tokens(query))


def capped_query(query: str, max_rows: int) -> tuple[str, str]:
    """The text FalkorDB runs for an untrusted query that ends in RETURN, and the name of the column it
    may add (drop it from the rows).

    FalkorDB builds a whole result before replying, so the row cap goes into the query: the user's
    query becomes a subquery, `CALL { ... } RETURN * LIMIT n`, where LIMIT stops the pipeline early
    (the subquery is evaluated lazily). Inside CALL {} a leading WITH would be read as importing
    variables from outside; a branch that starts with WITH therefore gets one neutral driving row
    first, `UNWIND [0] AS <fresh name>`, which is what a query that starts with WITH has anyway.
    """
    fresh = "__chiplore_row"
    while fresh.lower() in query.lower():
        fresh += "_"
    tokens = list(_tokens(query))
    inserts: list[int] = []
    branch_start = True
    for token, depth, offset in tokens:
        if depth == 0 and token == "UNION":
            branch_start = True
            continue
        if branch_start and token == "ALL":
            continue
        if branch_start and token == "WITH":
            inserts.append(offset)
        branch_start = False
    text = query
    for offset in reversed(inserts):
        text = f"{text[:offset]}UNWIND [0] AS {fresh}\n{text[offset:]}"
    return f"CALL {{\n{text}\n}}\nRETURN * LIMIT {max_rows + 1}", fresh


def return_columns(query: str) -> list[str] | None:
    """The column names of a query's last top-level RETURN, in order; None when it cannot tell (RETURN *).

    Used only to put the columns of a wrapped query (CALL { ... } RETURN *) back in the order the
    query asked for; a query it cannot read keeps the server's order.
    """
    query = blank_comments(query)  # a comment in an item is none of its name (`// ...` in a string is)
    tokens = [(token, depth, offset) for token, depth, offset in _tokens(query) if depth == 0]
    returns = [i for i, (token, _, _) in enumerate(tokens) if token == "RETURN"]
    if not returns:
        return None
    start = tokens[returns[-1]][2] + len("RETURN")
    bounds = [start]
    end = len(query)
    for token, _, offset in tokens[returns[-1] + 1 :]:
        if token in ("ORDER", "SKIP", "LIMIT", "UNION"):
            end = offset
            break
        if token == ",":
            bounds.append(offset + 1)
    items = [query[a : b - 1 if b != end else b] for a, b in zip(bounds, [*bounds[1:], end], strict=True)]
    names = []
    for item in items:
        text = re.sub(r"(?i)^\s*DISTINCT\s+", "", item).strip()
        if text == "*" or not text:
            return None
        alias = re.search(r"(?i)\s+AS\s+(`[^`]+`|\w+)\s*$", text)
        names.append((alias.group(1) if alias else text).strip("`"))
    return names


# -- checks on the plan -------------------------------------------------------------------------------


WRITE_REFUSED = "writes are refused on the read-only path; this query modifies the graph"


def vet_plan(plan: PlanNode, query: str) -> None:
    """Raise WriteRefused or QueryRefused unless the plan is a plain read of the graph."""
    if any(node.kind == "write" for node in plan.walk()):
        raise WriteRefused(WRITE_REFUSED)
    reason = refusal(plan, query)
    if reason:
        raise QueryRefused(reason)


def refusal(plan: PlanNode, query: str) -> str | None:
    """Why the plan is not a plain read of the graph (None when it is; writes are vet_plan's).

    A procedure call is named by the plan on Neo4j; FalkorDB's plan does not name it, so then every
    `CALL name(` of the query text (outside strings and comments) must be on the list.
    """
    for node in plan.walk():
        kind = node.kind
        if kind == "load_csv":
            return "LOAD CSV is refused: the read-only path reads the graph, never files or URLs"
        if kind == "admin" and node.operator not in READ_ONLY_COMMANDS:
            return f"administration commands are refused on the read-only path ({node.operator})"
        if kind == "procedure":
            names = [_procedure_name(node.detail)] if node.detail else _called_procedures(query)
            for name in names or [None]:
                if name not in READ_ONLY_PROCEDURES:
                    return _procedure_refused(name)
    return None


def _procedure_name(detail: str) -> str | None:
    match = re.search(r"([A-Za-z_][\w.]*)\s*\(", detail)
    return match.group(1) if match else None


def _called_procedures(query: str) -> list[str | None]:
    """The name after each CALL that is not a subquery (None where no plain name follows), from one walk
    of the query (a CALL inside a string or a comment is none)."""
    text = blank_comments(query)
    names: list[str | None] = []
    for token, _, offset in _tokens(query):
        if token != "CALL":
            continue
        after = offset + len("CALL")
        if _SUBQUERY.match(text, after):
            continue
        called = _CALLED.match(text, after)
        names.append(called.group(1) if called else None)
    return names


# -- caps while reading --------------------------------------------------------------------------------


class RowCap:
    """Collects rows until the row or byte cap is reached; says what was cut."""

    def __init__(self, limits: UntrustedLimits) -> None:
        self.limits = limits
        self.rows: list[dict[str, Any]] = []
        self.bytes = 0
        self.cut_reason: str | None = None

    def take(self, row: dict[str, Any]) -> bool:
        """Keep the row if it fits; False once a cap is reached (stop reading)."""
        if len(self.rows) >= self.limits.max_rows:
            self.cut_reason = f"cut at {self.limits.max_rows:,} rows (the row cap): add LIMIT or aggregate"
            return False
        size = len(json.dumps(row, default=str))
        if self.bytes + size > self.limits.max_bytes:
            self.cut_reason = (
                f"cut after {len(self.rows):,} rows at {self.limits.max_bytes:,} bytes (the size cap): "
                "return fewer or smaller values"
            )
            return False
        self.rows.append(row)
        self.bytes += size
        return True

    def result(self, columns: Iterable[str]) -> GuardedResult:
        return GuardedResult(
            columns=list(columns), rows=self.rows, truncated=self.cut_reason is not None, cut_reason=self.cut_reason
        )
