"""Named Cypher queries: one file each, with a header naming it, its parameters and what it answers.

Header lines, before the query:
    // name: measurements-of
    // params: param:str, limit:int=200      (types: str, int, float, bool; `=x` gives a default)
    // description: one line
    // anchors: Measurement                  (the labels its plan starts from, by an index seek)
Named queries run read-only: through GraphStore.read, so a write inside one is refused. The plan
tests (tests/queries/test_query_plans.py) hold every query to its anchors on both backends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel

from chiplore.core.errors import QueryError, QueryParameterError, UnknownQuery
from chiplore.kg.store import GraphStore, Record

ParamType = Literal["str", "int", "float", "bool"]
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class QueryParam(BaseModel):
    name: str
    type: ParamType
    default: Any = None
    required: bool

    def coerce(self, value: Any) -> Any:
        """Convert a value (often a command-line string) to the declared type, or explain why not."""
        try:
            if self.type == "str":
                if not isinstance(value, str):  # an MCP client's 5 where text was meant matched nothing
                    raise ValueError
                return value
            if self.type == "int":
                if isinstance(value, bool):
                    raise ValueError
                number = int(value)
                if not -(2**31) <= number < 2**31:  # FalkorDB's LIMIT of 2**32 returned no rows at all
                    raise QueryParameterError(f"parameter {self.name!r} must be an int of at most 32 bits, got "
                                              f"{value!r}")  # fmt: skip
                return number
            if self.type == "float":
                return float(value)
            if isinstance(value, bool):
                return value
            text = str(value).lower()
            if text in _TRUE | _FALSE:
                return text in _TRUE
            raise ValueError
        except (TypeError, ValueError):
            raise QueryParameterError(f"parameter {self.name!r} must be {self.type}, got {value!r}") from None


class NamedQuery(BaseModel):
    name: str
    description: str
    params: list[QueryParam]
    text: str
    anchors: tuple[str, ...] = ()

    def bind(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters to send: declared ones only, typed, with defaults filled in."""
        declared = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            expected = ", ".join(declared) or "none"
            raise QueryParameterError(f"query {self.name!r} has no parameter {unknown[0]!r} (it takes: {expected})")
        bound: dict[str, Any] = {}
        for param in self.params:
            if param.name in given:
                bound[param.name] = param.coerce(given[param.name])
            elif param.required:
                raise QueryParameterError(f"query {self.name!r} needs parameter {param.name!r} ({param.type})")
            else:
                bound[param.name] = param.default
        for name, value in bound.items():  # the database's own error would be a raw Cypher one
            if isinstance(value, int) and value < 0 and re.search(rf"\b(LIMIT|SKIP)\s+\${name}\b", self.text, re.I):
                raise QueryParameterError(f"parameter {name!r} of query {self.name!r} counts rows: 0 or more, "
                                          f"got {value}")  # fmt: skip
        return bound


def parse(source: str, origin: str) -> NamedQuery:
    header: dict[str, str] = {}
    body: list[str] = []
    for line in source.splitlines():
        stripped = line.strip()
        if not body and stripped.startswith("//"):
            field, _, value = stripped[2:].partition(":")
            header[field.strip()] = value.strip()
        elif stripped or body:
            body.append(line)
    for field in ("name", "description"):
        if not header.get(field):
            raise QueryError(f"{origin}: the header lacks '// {field}: ...'")
    if "params" not in header:
        raise QueryError(f"{origin}: the header lacks '// params: ...' (empty when it takes none)")
    return NamedQuery(
        name=header["name"],
        description=header["description"],
        params=[_param(spec, origin) for spec in header["params"].split(",") if spec.strip()],
        text="\n".join(body).strip(),
        anchors=tuple(label.strip() for label in header.get("anchors", "").split(",") if label.strip()),
    )


def _param(spec: str, origin: str) -> QueryParam:
    declaration, has_default, default_text = spec.partition("=")
    name, _, type_name = declaration.strip().partition(":")
    type_name = type_name.strip() or "str"
    if type_name not in ("str", "int", "float", "bool") or not name.strip().isidentifier():
        raise QueryError(f"{origin}: bad parameter declaration {spec.strip()!r}")
    param = QueryParam(name=name.strip(), type=type_name, required=not has_default)  # type: ignore[arg-type]
    if has_default:
        param.default = param.coerce(default_text.strip())
    return param


def load_all() -> dict[str, NamedQuery]:
    """Every named query shipped in this package, by name."""
    found: dict[str, NamedQuery] = {}
    for entry in sorted(resources.files(__package__).iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".cypher"):
            continue
        query = parse(entry.read_text(), entry.name)
        if query.name != entry.name.removesuffix(".cypher"):
            raise QueryError(f"{entry.name}: header names it {query.name!r}; name and file must agree")
        found[query.name] = query
    return found


def get(name: str, catalogue: Mapping[str, NamedQuery] | None = None) -> NamedQuery:
    queries = load_all() if catalogue is None else catalogue
    if name not in queries:
        raise UnknownQuery(f"no named query {name!r}; known: {', '.join(sorted(queries))}")
    return queries[name]


def run(store: GraphStore, name: str, params: Mapping[str, Any] | None = None) -> list[Record]:
    """Validate the parameters and run the named query read-only."""
    query = get(name)
    return store.read(query.text, query.bind(params or {}))
