"""The graph file's format: its lines as models, and a checked reader of them.

One JSON object per line (chiplore.kg.graph_io writes and imports them; docs/graph.md has the format):
a header, the nodes, the relationships, and an end line with the counts. The reader refuses
anything the schema does not name, lines out of order, and a file cut short.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from chiplore.core.errors import StoreError
from chiplore.kg.repo.nodes import RELATIONSHIPS
from chiplore.kg.schema import FACT_LABEL, LATEST_VERSION, NODE_KEYS
from chiplore.kg.store import int64

FORMAT = "chiplore-graph"
FORMAT_VERSION = 1
PAGE = 2_000  # nodes read (or written) per statement
SCHEMA_STATE = "SchemaVersion"  # the schema's bookkeeping node: not exported
LABELS = tuple(label for label in NODE_KEYS if label != SCHEMA_STATE)
KEY_PROPERTIES = tuple(dict.fromkeys(NODE_KEYS.values()))  # name, id, sha, key, consumer
Progress = Callable[[str, int], None]  # (what, how many so far)


class GraphFileError(StoreError):
    """A graph file that cannot be read, or a graph that cannot be written to one."""


class Header(BaseModel):
    model_config = ConfigDict(extra="allow")
    kind: Literal["header"]
    format: Literal["chiplore-graph"]
    version: int
    schema_version: int


class NodeLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["node"]
    label: str
    key: str | int
    labels: list[str]
    properties: dict[str, Any]


class RelationshipLine(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    kind: Literal["relationship"]
    type: str
    source: tuple[str, str | int] = Field(alias="from")
    target: tuple[str, str | int] = Field(alias="to")
    properties: dict[str, Any]


class EndLine(BaseModel):
    kind: Literal["end"]
    nodes: int
    relationships: int


Line = Annotated[Header | NodeLine | RelationshipLine | EndLine, Field(discriminator="kind")]
_LINE: TypeAdapter[Header | NodeLine | RelationshipLine | EndLine] = TypeAdapter(Line)


def read_lines(lines: Iterable[str], origin: str, *, references: bool = False) -> Iterator[NodeLine | RelationshipLine]:
    """The node and relationship lines of a graph file, checked: a header first, known labels and
    types, nodes before relationships, and the end line with the right counts last. With
    `references`, also that every relationship joins two nodes of the file (it keeps their keys)."""
    header: Header | None = None
    nodes = relationships = 0
    ended = False
    keys: set[tuple[str, str | int]] = set()
    dangling = ""  # the first relationship to a node not (yet) read: a node after the relationships says more
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if ended:
            raise GraphFileError(f"{origin} line {number}: data after the end line")
        try:
            line = _LINE.validate_python(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as error:
            script = (
                " (it reads as a Cypher script, which `graph export --format cypher` writes for Neo4j: load that "
                "with cypher-shell; `graph import` reads the JSON-lines file)"
                if header is None and _cypher(text)
                else ""
            )
            raise GraphFileError(
                f"{origin} line {number}: not a chiplore graph line ({_first_error(error)}){script}"
            ) from None
        if header is None:
            if not isinstance(line, Header):
                raise GraphFileError(f"{origin} line {number}: a chiplore graph file starts with its header line")
            if line.version > FORMAT_VERSION or line.schema_version > LATEST_VERSION:
                raise GraphFileError(
                    f"{origin} was written by a newer chiplore (format {line.version}, schema "
                    f"{line.schema_version}); upgrade chiplore to read it"
                )
            header = line
        elif isinstance(line, NodeLine):
            if relationships:
                raise GraphFileError(f"{origin} line {number}: a node after the relationships")
            _check_node(line, f"{origin} line {number}")
            nodes += 1
            if references:
                if (line.label, line.key) in keys:
                    raise GraphFileError(f"{origin} line {number}: a second {line.label} {line.key!r} (a node is "
                                         "one line)")  # fmt: skip
                keys.add((line.label, line.key))
            yield line
        elif isinstance(line, RelationshipLine):
            _check_relationship(line, f"{origin} line {number}")
            missing = next((end for end in (line.source, line.target) if end not in keys), None) if references else None
            if missing is not None and not dangling:
                dangling = (f"{origin} line {number}: the {line.type} relationship names {missing[0]} "
                            f"{missing[1]!r}, a node the file does not hold")  # fmt: skip
            relationships += 1
            yield line
        elif isinstance(line, EndLine):
            if dangling:
                raise GraphFileError(dangling)
            if (line.nodes, line.relationships) != (nodes, relationships):
                raise GraphFileError(
                    f"{origin} line {number}: the end line counts {line.nodes} nodes and "
                    f"{line.relationships} relationships; the file holds {nodes} and {relationships}"
                )
            ended = True
        else:
            raise GraphFileError(f"{origin} line {number}: a second header")
    if header is None:
        raise GraphFileError(f"{origin} is empty: no chiplore graph header")
    if dangling:
        raise GraphFileError(dangling)
    if not ended:
        raise GraphFileError(f"{origin} has no end line: the file was cut short")


def _cypher(text: str) -> bool:
    return text.lstrip().upper().startswith(("//", "CREATE", "MERGE", "MATCH", ":BEGIN", "UNWIND", "CALL"))


def _first_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        return f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}"
    return str(error).split("\n")[0]


def _check_node(line: NodeLine, where: str) -> None:
    if line.label not in LABELS:
        raise GraphFileError(f"{where}: unknown node label {line.label!r}")
    extra = set(line.labels) - set(NODE_KEYS) - {FACT_LABEL}
    if extra or line.label not in line.labels:
        raise GraphFileError(f"{where}: labels {line.labels} are not the schema's for a {line.label}")
    key = NODE_KEYS[line.label]
    if line.properties.get(key) != line.key:
        raise GraphFileError(f"{where}: the {line.label}'s {key} property differs from its key")
    _check_properties(line.properties, where)


def _check_relationship(line: RelationshipLine, where: str) -> None:
    if line.type not in RELATIONSHIPS:
        raise GraphFileError(f"{where}: unknown relationship type {line.type!r}")
    for label, _ in (line.source, line.target):
        if label not in LABELS:
            raise GraphFileError(f"{where}: unknown node label {label!r}")
    _check_properties(line.properties, where)


def _check_properties(properties: dict[str, Any], where: str) -> None:
    """What both stores hold as a property: a name without a backtick, and a text, a boolean, a 64-bit
    integer, a finite number or a list of one of those kinds (found here: a store refusing one mid-import would
    leave part of the file written, after `--replace` deleted the graph it replaces)."""
    for name, value in properties.items():
        if not name or "`" in name:
            raise GraphFileError(f"{where}: property name {name!r} cannot be stored (empty, or with a backtick)")
        items = value if isinstance(value, list) else [value]
        # a list's items share one kind (Neo4j refuses a list of text and numbers, or of ints and floats)
        if value is not None and not (all(_storable(item) for item in items) and len({type(i) for i in items}) <= 1):
            held = "text, a boolean, a 64-bit integer, a finite number, a list of one of them"
            raise GraphFileError(f"{where}: property {name!r} holds {json.dumps(value)[:80]}, which no store holds "
                                 f"({held})")  # fmt: skip


def _storable(value: object) -> bool:
    if isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return int64(value)
    return isinstance(value, float) and math.isfinite(value)
