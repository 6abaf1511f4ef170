"""The few Cypher differences between Neo4j 5 and FalkorDB, in one place.

Named queries are written in the Cypher both accept; code that needs one of these constructs asks
the store's dialect instead of branching on the backend. Timestamps are ISO-8601 UTC strings made
in Python on both backends (FalkorDB has no datetime()), so no dialect entry is needed for them.
Index and constraint DDL differ too much to template (FalkorDB creates constraints with a
GRAPH.CONSTRAINT command, not Cypher), so each store implements `ensure_unique`/`ensure_index`.
FalkorDB has no `=~`; named queries match with STARTS WITH / CONTAINS instead of regular expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chiplore.kg.guard import code_only, parameter_names

_SUBQUERY = re.compile(r"\b(EXISTS|COUNT|COLLECT)\s*\{", re.IGNORECASE)
_SCOPED_CALL = re.compile(r"\bCALL\s*\(([^)]*)\)\s*\{", re.IGNORECASE)  # Neo4j 5.23's CALL (k) { }
_PLAN = re.compile(r"^\s*(EXPLAIN|PROFILE)\b", re.IGNORECASE)
_TEMPORAL = re.compile(r"Unknown function '(datetime|date|localdatetime|time|localtime|duration)'", re.IGNORECASE)
_COMPREHENSION_ALIAS = re.compile(r"Unable to locate a value with alias \[\s*\(.*\|")
# `-[r:T*1..2]-`, `<-[`r`*]-`: a relationship variable of a variable-length pattern (its types, then the `*`)
_VARIABLE_LENGTH = re.compile(r"(?:-|<-)\s*\[\s*(`(?:[^`]|``)+`|[A-Za-z_]\w*)\s*(?::[\w|:`\s]*)?\*")
_LABEL_ALTERNATION = re.compile(r"\(\s*\w*\s*:\s*\w+\s*\|")  # `(f:Claim|Measurement)`
# A comprehension that counts a pattern, the way a user writes it after the hint above
_COUNTED = "`MATCH (k:Kernel) WITH k, size([(k)-[:BEST]->() | 1]) AS n WHERE n > 0 RETURN k`"


@dataclass(frozen=True)
class Dialect:
    name: str
    node_id_template: str
    supports_subquery_expressions: bool

    def node_id(self, variable: str) -> str:
        """An expression giving a string id for a node, stable while the node exists."""
        return self.node_id_template.format(variable)

    def count_pattern(self, pattern: str) -> str:
        """An expression counting the matches of a pattern anchored on bound variables."""
        if self.supports_subquery_expressions:
            return f"COUNT {{ {pattern} }}"
        return f"size([{pattern} | 1])"

    def exists_pattern(self, pattern: str) -> str:
        """A predicate true when the pattern has at least one match."""
        if self.supports_subquery_expressions:
            return f"EXISTS {{ {pattern} }}"
        return f"size([{pattern} | 1]) > 0"


NEO4J = Dialect(
    name="neo4j",
    node_id_template="elementId({})",
    supports_subquery_expressions=True,
)

FALKORDB = Dialect(
    name="falkordb",
    # FalkorDB has integer ids only; toString keeps the type the same as Neo4j's elementId.
    node_id_template="toString(id({}))",
    supports_subquery_expressions=False,
)


def _map_key(code: str, start: int, end: int) -> bool:
    """Whether the name at code[start:end] is a map literal's key (`{r: 1}`, `{a: 1, r: 2}`)."""
    return bool(re.match(r"\s*:", code[end:])) and bool(re.search(r"[{,]\s*$", code[:start]))


def falkordb_refusal(query: str) -> str | None:
    """Why the embedded store must not run a query it would answer otherwise than Neo4j 5, without an
    error (None when it answers alike): FalkorDB binds the relationship variable of a variable-length
    pattern to the path, so `RETURN r` returned nodes among the relationships and `size(r)` failed with a
    type error. Its length reads the same on both, so a variable read only by `length()` is let through."""
    code = code_only(query, keep_names=True)  # a backquoted variable is a variable too
    for found in _VARIABLE_LENGTH.finditer(code):
        name = found.group(1)
        word = rf"(?<![\w$.`]){re.escape(name)}" + (r"\b" if name[-1] != "`" else "")
        uses = [m for m in re.finditer(word, code) if m.start() != found.start(1)]
        # its reads: not a map's key (`{r: 1}`), nor inside `length(...)`
        read = [m.start() for m in uses if not _map_key(code, m.start(), m.end())]
        if any(not re.search(r"\blength\s*\(\s*$", code[:at], re.IGNORECASE) for at in read):
            shown = name if name.startswith("`") else f"`{name}`"
            return (f"the embedded store (FalkorDB) binds {shown} of a variable-length pattern to a path, not to "
                    f"a list of relationships as Neo4j does: bind the path (`p = (a)-[:T*1..2]->(b)`) and read "
                    f"relationships(p), or run the query on the Neo4j store")  # fmt: skip
    return None


def falkordb_hint(message: str, query: str) -> str | None:
    """What to write instead, where FalkorDB refuses Cypher that Neo4j 5 runs (a user's query: the
    named ones avoid these), or None."""
    subquery = _SUBQUERY.search(query)
    if subquery and message.startswith("errMsg: Invalid input"):
        kind = subquery.group(1).upper()
        return (f"the embedded store (FalkorDB) has no {kind} {{ }} subqueries: write a pattern predicate "
                f"(`WHERE (k)-[:BEST]->()`), or count a pattern comprehension in a WITH ({_COUNTED}), "
                "or run the query on the Neo4j store")  # fmt: skip
    scoped = _SCOPED_CALL.search(query)
    if scoped and message.startswith("errMsg: Invalid input"):
        names = scoped.group(1).strip()
        return (f"the embedded store (FalkorDB) has no `CALL ({names}) {{ }}`: import the variables with a "
                f"WITH inside (`CALL {{ WITH {names or '...'} ... }}`)")  # fmt: skip
    plan = _PLAN.match(query)
    if plan and message.startswith("errMsg: Invalid input"):
        return (f"the embedded store (FalkorDB) takes no {plan.group(1).upper()} prefix in a query: run the query "
                "without it, or with it on the Neo4j store (`--store neo4j`)")  # fmt: skip
    # the same refusal, where a WITH (DISTINCT) came before the WHERE: FalkorDB names the comprehension
    if message.startswith("Unable to resolve filtered alias") or _COMPREHENSION_ALIAS.search(message):
        return (f"the embedded store (FalkorDB) filters on a pattern comprehension only once it is named: count "
                f"it in a WITH and filter on the name ({_COUNTED}), or write a pattern predicate "
                "(`WHERE (k)-[:BEST]->()`)")  # fmt: skip
    temporal = _TEMPORAL.search(message)
    if temporal:
        return (f"the embedded store (FalkorDB) has no {temporal.group(1)}(); chiplore stores times as ISO-8601 "
                "text (`measured_at`, `created_at`, `decided_at`, `started_at`), so compare them as strings "
                "(`WHERE m.measured_at >= '2026-12-01'`), or run the query on the Neo4j store")  # fmt: skip
    if message.startswith("errMsg: Invalid input") and re.match(r"(?is)\s*SHOW\b", query):
        return ("the embedded store (FalkorDB) has no SHOW commands: CALL db.indexes() and CALL db.constraints() "
                "list its indexes and constraints")  # fmt: skip
    neo4j_only = re.match(r"Procedure `(db\.schema\.\w+)` is not registered", message)
    if neo4j_only:
        return (f"{neo4j_only.group(1)} is Neo4j's; the embedded store (FalkorDB) answers db.labels(), "
                "db.relationshipTypes(), db.propertyKeys(), db.indexes() and db.constraints()")  # fmt: skip
    if "does not currently support =~" in message:
        return ("the embedded store (FalkorDB) has no regular expressions: match with STARTS WITH, ENDS WITH or "
                "CONTAINS (`WHERE d.id STARTS WITH '0e'`), or run the query on the Neo4j store")  # fmt: skip
    if message.startswith("errMsg: Invalid input '|'") and _LABEL_ALTERNATION.search(code_only(query)):
        return ("the embedded store (FalkorDB) has no label alternatives in a pattern: match any node and "
                "test its labels (`MATCH (f) WHERE f:Claim OR f:Measurement`)")  # fmt: skip
    if "only supports shortestPaths in WITH or RETURN" in message:
        return ("match both ends first and find the path in a WITH or RETURN: `MATCH (a ...), (b ...) WITH "
                "shortestPath((a)-[:CHILD_OF*]->(b)) AS p RETURN length(p)`")  # fmt: skip
    if message.startswith("Missing parameters"):  # FalkorDB does not say which
        names = sorted(parameter_names(query))
        return f"the query uses {', '.join('$' + n for n in names)}: give each a value" if names else None
    if message.startswith("Unknown function"):
        return "the embedded store (FalkorDB) lacks this function; the Neo4j store may have it"
    return None
