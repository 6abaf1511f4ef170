"""The graph as a file: export any store to JSON lines (or a Cypher script), import it into another.

Generic over the schema: a node is named by its schema label and key (chiplore.kg.schema.NODE_KEYS), a
relationship by its type and its two nodes; labels and types are checked against the schema's
allowlists on the way in, and every value travels as a parameter. The format (docs/graph.md has
the same text), one JSON object per line:

    {"kind": "header", "format": "chiplore-graph", "version": 1, "schema_version": 3, ...}
    {"kind": "node", "label": "Kernel", "key": "decoder_feedforward", "labels": ["Kernel"],
     "properties": {"name": "decoder_feedforward", "target": "simrngd", ...}}
    {"kind": "relationship", "type": "BEST", "from": ["Kernel", "decoder_feedforward"],
     "to": ["DesignNode", "5f0c..."], "properties": {}}
    {"kind": "end", "nodes": 1234, "relationships": 5678}

Nodes come before relationships, each in a fixed order (label, key; then source, type, target),
so the same graph always exports to the same bytes but for the header's time. A file without its
`end` line was cut short and is refused. The schema's own version node is not data: the header
carries its number and an import applies the schema itself.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.errors import StoreError
from chiplore.kg.graph_file import (
    FORMAT,
    FORMAT_VERSION,
    KEY_PROPERTIES,
    LABELS,
    PAGE,
    SCHEMA_STATE,
    GraphFileError,
    NodeLine,
    Progress,
    RelationshipLine,
    read_lines,
)
from chiplore.kg.repo.designs import working_owners
from chiplore.kg.repo.work_marks import (
    FACTS_MARK,
    claim_work,
    live_optimize_runs,
    mark_live,
    mark_owner,
    release_work,
    renewing,
    work_under_way,
)
from chiplore.kg.schema import FACT_LABEL, LATEST_VERSION, NODE_KEYS, ensure_schema, schema_version
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)


class GraphCounts(BaseModel):
    """Nodes per schema label and relationships per type: what a round trip must keep."""

    nodes: dict[str, int]
    relationships: dict[str, int]

    @property
    def total_nodes(self) -> int:
        return sum(self.nodes.values())

    @property
    def total_relationships(self) -> int:
        return sum(self.relationships.values())


def graph_counts(store: GraphStore) -> GraphCounts:
    """Counts per label (the schema's, the Fact label included) and per relationship type."""
    nodes = {label: int(store.read(f"MATCH (n:{label}) RETURN count(n) AS c")[0]["c"]) for label in LABELS}
    nodes[FACT_LABEL] = int(store.read(f"MATCH (n:{FACT_LABEL}) RETURN count(n) AS c")[0]["c"])
    rows = store.read("MATCH ()-[r]->() RETURN type(r) AS type, count(r) AS c")
    return GraphCounts(
        nodes={k: v for k, v in nodes.items() if v},
        relationships={row["type"]: int(row["c"]) for row in sorted(rows, key=lambda r: r["type"])},
    )


# -- reading a store -------------------------------------------------------------------------------


def _primary(labels: Iterable[str]) -> str | None:
    """A node's schema label: the first of NODE_KEYS among its labels."""
    present = set(labels)
    return next((label for label in LABELS if label in present), None)


def iter_nodes(store: GraphStore) -> Iterator[NodeLine]:
    """Every data node, label by label in the schema's order, by key; a page per statement."""
    for label in LABELS:
        key, after = NODE_KEYS[label], None
        while True:
            rows = store.read(
                f"MATCH (n:{label}) WHERE $after IS NULL OR n.{key} > $after "
                f"RETURN n.{key} AS key, labels(n) AS labels, properties(n) AS props ORDER BY key LIMIT $page",
                {"after": after, "page": PAGE},
            )
            for row in rows:
                if _primary(row["labels"]) == label:  # a node with two schema labels is written once
                    yield NodeLine(
                        kind="node",
                        label=label,
                        key=row["key"],
                        labels=sorted(row["labels"]),
                        properties=dict(sorted(row["props"].items())),
                    )
            if len(rows) < PAGE:
                break
            after = rows[-1]["key"]


def iter_relationships(store: GraphStore) -> Iterator[RelationshipLine]:
    """Every relationship, grouped by its source node (label, key), then type and target."""
    target_keys = ", ".join(f"b.{prop} AS b_{prop}" for prop in KEY_PROPERTIES)
    for label in LABELS:
        key, after = NODE_KEYS[label], None
        while True:
            rows = store.read(
                f"MATCH (a:{label}) WHERE $after IS NULL OR a.{key} > $after WITH a ORDER BY a.{key} LIMIT $page "
                f"OPTIONAL MATCH (a)-[r]->(b) RETURN a.{key} AS a, labels(a) AS a_labels, type(r) AS type, "
                f"labels(b) AS b_labels, properties(r) AS props, {target_keys}",
                {"after": after, "page": PAGE},
            )
            if not rows:
                break
            lines = []
            for row in rows:
                if row["type"] is None or _primary(row["a_labels"]) != label:
                    continue
                target = _primary(row["b_labels"])
                if target is None:
                    raise GraphFileError(
                        f"a {row['type']} relationship of {label} {row['a']!r} ends at a node "
                        f"without a schema label ({', '.join(row['b_labels']) or 'no label'})"
                    )
                lines.append(
                    RelationshipLine(
                        kind="relationship",
                        type=row["type"],
                        source=(label, row["a"]),
                        target=(target, row[f"b_{NODE_KEYS[target]}"]),
                        properties=dict(sorted((row["props"] or {}).items())),  # the same bytes from either backend
                    )
                )
            yield from sorted(lines, key=lambda r: (str(r.source[1]), r.type, r.target[0], str(r.target[1])))
            sources = {row["a"] for row in rows}
            if len(sources) < PAGE:
                break
            after = max(sources)


# -- export ----------------------------------------------------------------------------------------


@dataclass
class Exported:
    nodes: int = 0
    relationships: int = 0


def export_jsonl(store: GraphStore, out: TextIO, *, source: str = "", on_progress: Progress | None = None) -> Exported:
    """Write the graph to `out` as JSON lines (the module's format); checks that every node and
    relationship of the store was written."""
    done = Exported()
    header = {
        "kind": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "schema_version": schema_version(store),
        "exported_at": utc_now(),
        "source": source or store.backend,
    }
    out.write(json.dumps(header) + "\n")
    for node in iter_nodes(store):
        out.write(node.model_dump_json() + "\n")
        done.nodes += 1
        if on_progress and done.nodes % PAGE == 0:
            on_progress("nodes", done.nodes)
    for rel in iter_relationships(store):
        out.write(rel.model_dump_json(by_alias=True) + "\n")
        done.relationships += 1
        if on_progress and done.relationships % PAGE == 0:
            on_progress("relationships", done.relationships)
    check_complete(store, done)
    out.write(json.dumps({"kind": "end", "nodes": done.nodes, "relationships": done.relationships}) + "\n")
    return done


def check_complete(store: GraphStore, done: Exported) -> None:
    """Every node but the schema's own must carry a schema label; nothing may be left behind."""
    total = int(store.read(f"MATCH (n) WHERE NOT n:{SCHEMA_STATE} RETURN count(n) AS c")[0]["c"])
    if total != done.nodes:
        check_labelled(store)  # nodes no label names, if that is why
        raise GraphFileError(f"the graph changed while it was exported ({total:,} nodes counted at the end, "
                             f"{done.nodes:,} written): export it again once nothing writes to it")  # fmt: skip
    relationships = int(store.read("MATCH ()-[r]->() RETURN count(r) AS c")[0]["c"])
    if relationships != done.relationships:
        raise GraphFileError(
            f"wrote {done.relationships} of the graph's {relationships} relationships: a node's "
            "key is missing or shared by two nodes"
        )


# -- import ----------------------------------------------------------------------------------------


@dataclass
class Imported:
    nodes: int = 0
    relationships: int = 0


@dataclass
class _Batches:
    """Lines waiting to be written, a statement per group: nodes by their labels, relationships by
    (source label, type, target label)."""

    nodes: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    relationships: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))


def check_labelled(store: GraphStore) -> None:
    """Refuse a graph holding nodes with no schema label: a graph file names a node by its label and
    key, so a copy or an export would leave them behind."""
    strays = store.read(
        f"MATCH (n) WHERE NOT n:{SCHEMA_STATE} AND NOT ({' OR '.join(f'n:{label}' for label in LABELS)}) "
        "RETURN labels(n) AS labels, count(n) AS c"
    )
    if strays:
        names = ", ".join(sorted({":".join(row["labels"]) or "(none)" for row in strays})[:5])
        raise GraphFileError(
            f"{sum(int(row['c']) for row in strays)} node(s) carry no schema label (labels: {names}); "
            "the graph file names nodes by their schema label and key"
        )


def data_nodes(store: GraphStore) -> int:
    """Nodes other than the schema's own: zero for a store an import may fill."""
    return int(store.read(f"MATCH (n) WHERE NOT n:{SCHEMA_STATE} RETURN count(n) AS c")[0]["c"])


IMPORT_MARK = "import-under-way"  # the name of the schema-state node an import holds while it writes
IMPORT_WORK = "import from"  # the work an import names on its mark (`import from SOURCE`)


class UnfinishedImport(GraphFileError):
    """The graph is what an interrupted import left: part of a file, with the old graph deleted."""


def import_lines(
    store: GraphStore,
    lines: Iterable[NodeLine | RelationshipLine],
    *,
    replace: bool = False,
    on_progress: Progress | None = None,
    source: str = "a graph file",
) -> Imported:
    """Write checked graph lines into `store`, which must hold no data (`replace` deletes what it
    holds first). The schema is applied first, so every MERGE finds its node by an index."""
    held = data_nodes(store)
    if held and not replace:
        raise GraphFileError(
            f"the {store.backend} store already holds {held:,} nodes: import into an empty one, "
            "or pass --replace to delete them first"
        )
    ensure_schema(store)
    # marked before the first delete, cleared after the last write: a graph an interrupted import
    # left half-written is refused by every command until an import finishes (unfinished_import); marked
    # before the runs are asked too, so that a command opening the graph meanwhile sees the import
    _claim_import(store, source)
    working = _working(store) if held else ""
    if working:  # its next write would find its designs gone, and the graph a mix of both
        _release_import(store)
        raise GraphFileError(f"a run is working on this graph ({working}): let it end, or stop it, "
                             "before --replace deletes what it writes to")  # fmt: skip
    try:
        with renewing(store, IMPORT_MARK):  # a long import on another machine is not taken for a killed one
            done = _write(store, lines, held, on_progress)
    except BaseException:  # (Ctrl-C too) the graph stays marked partial, by nobody: this process may go on
        _abandon_import(store)
        raise
    _release_import(store)
    store.compact()
    return done


def _write(store: GraphStore, lines: Iterable[NodeLine | RelationshipLine], held: int,
           on_progress: Progress | None) -> Imported:  # fmt: skip
    """Delete the `held` nodes, then write the lines, a page at a time."""
    while held and store.write(f"MATCH (n) WHERE NOT n:{SCHEMA_STATE} WITH n LIMIT 20000 DETACH DELETE n "
                               "RETURN count(*) AS deleted")[0]["deleted"]:  # fmt: skip
        pass
    done, waiting = Imported(), _Batches()
    for line in lines:
        if isinstance(line, NodeLine):
            group = (line.label, *sorted(set(line.labels) - {line.label}))
            waiting.nodes[group].append({"key": line.key, "props": line.properties})
            if len(waiting.nodes[group]) >= PAGE:
                _flush_nodes(store, done, group, waiting.nodes.pop(group), on_progress)
            continue
        for group in list(waiting.nodes):  # every node is written before the first relationship
            _flush_nodes(store, done, group, waiting.nodes.pop(group), on_progress)
        pair = (line.source[0], line.type, line.target[0])
        waiting.relationships[pair].append({"a": line.source[1], "b": line.target[1], "props": line.properties})
        if len(waiting.relationships[pair]) >= PAGE:
            _flush_relationships(store, done, pair, waiting.relationships.pop(pair), on_progress)
    for group in list(waiting.nodes):
        _flush_nodes(store, done, group, waiting.nodes.pop(group), on_progress)
    for pair in list(waiting.relationships):
        _flush_relationships(store, done, pair, waiting.relationships.pop(pair), on_progress)
    return done


def _working(store: GraphStore) -> str:
    """The first run working on the graph ("" when none is): a live process holding designs, an optimize
    between two leases, a learn or an upgrade under way."""
    working = [f"{owner} holds designs" for owner in working_owners(store)]
    working += [f"an optimize, process {run}" for run in live_optimize_runs(store)]
    if (facts := work_under_way(store, FACTS_MARK)) is not None:
        working.append(f"{facts[1] or 'work on its facts'}, process {facts[0]}")
    return working[0] if working else ""


def _release_import(store: GraphStore) -> None:
    """Clear this process's import mark (an import finished, or refused before it deleted anything)."""
    release_work(store, IMPORT_MARK)


def _abandon_import(store: GraphStore) -> None:
    """Leave this process's import mark ownerless: the graph reads as one an import did not finish (not
    as one still under way, which a long-lived process that goes on would hold it for)."""
    try:
        store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name, owner: $me}}) SET m.owner = '', m.lease_until = ''",
                    {"name": IMPORT_MARK, "me": mark_owner()})  # fmt: skip
    except StoreError as error:  # the store that failed the import: its own error is the one to see
        log.warning("could not mark the unfinished import: %s", error)


def _claim_import(store: GraphStore, source: str) -> None:
    """Mark the graph as being imported into by this process: an import another live process is
    writing is refused (the two would delete and mix each other's nodes); a dead one's is taken over (at
    once on its machine; from another once its lease lapses)."""
    held = claim_work(store, IMPORT_MARK, f"{IMPORT_WORK} {source}")
    if held is not None:
        raise GraphFileError(f"an import into this graph is under way (process {held[0]}, since {held[2]}): "
                             "let it finish")  # fmt: skip


def unfinished_import(store: GraphStore) -> UnfinishedImport | None:
    """What an import under way, or one that did not finish, left in the graph's mark (when, from
    what, and what to do), or None. The mark outlives its import's process: the graph it left is partial."""
    rows = store.read(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) RETURN m.started_at AS at, m.work AS work, "
                      "m.source AS source, m.owner AS owner, m.lease_until AS until",
                      {"name": IMPORT_MARK})  # fmt: skip
    if not rows:
        return None
    row = rows[0]
    source = str(row["work"] or "").removeprefix(f"{IMPORT_WORK} ") or row["source"]  # (an older mark: `source`)
    owner, started = str(row["owner"] or ""), f"(started {row['at']}, from {source})"
    if mark_live(owner, str(row["until"] or "")):
        return UnfinishedImport(f"an import into this graph is under way (process {owner}) {started}: the graph "
                                "is partial; let it finish")  # fmt: skip
    return UnfinishedImport(
        f"an import into this graph did not finish {started}: the graph is partial; `chiplore "
        "graph import FILE --replace` imports it again (or `graph copy --replace` copies one in)"
    )


def refuse_unfinished_import(store: GraphStore) -> None:
    """Refuse a graph an import is writing, or one an interrupted import left half-written (its old
    graph is gone already)."""
    left = unfinished_import(store)
    if left is not None:
        raise left


def _flush_nodes(
    store: GraphStore, done: Imported, group: tuple[str, ...], rows: list[dict[str, Any]], on_progress: Progress | None
) -> None:
    label, *extra = group
    labels = "".join(f" SET n:{other}" for other in extra)
    store.write(
        f"UNWIND $rows AS row MERGE (n:{label} {{{NODE_KEYS[label]}: row.key}}) SET n += row.props{labels}",
        {"rows": rows},
    )
    done.nodes += len(rows)
    if on_progress:
        on_progress("nodes", done.nodes)


def _flush_relationships(
    store: GraphStore,
    done: Imported,
    group: tuple[str, str, str],
    rows: list[dict[str, Any]],
    on_progress: Progress | None,
) -> None:
    source, rel, target = group
    written = store.write(
        f"UNWIND $rows AS row MATCH (a:{source} {{{NODE_KEYS[source]}: row.a}}) "
        f"MATCH (b:{target} {{{NODE_KEYS[target]}: row.b}}) MERGE (a)-[r:{rel}]->(b) SET r += row.props "
        "RETURN count(r) AS n",
        {"rows": rows},
    )
    if int(written[0]["n"]) != len(rows):
        raise GraphFileError(
            f"{len(rows) - int(written[0]['n'])} {rel} relationship(s) from {source} to {target} "
            "name a node the file does not hold"
        )
    done.relationships += len(rows)
    if on_progress:
        on_progress("relationships", done.relationships)


def import_jsonl(
    store: GraphStore, path: Path, *, replace: bool = False, on_progress: Progress | None = None
) -> Imported:
    """Import a JSON-lines graph file. The whole file is checked before anything is written (every
    line, and every relationship's two nodes), so a bad line costs nothing."""
    try:
        with path.open(encoding="utf-8") as handle:
            for _ in read_lines(handle, path.name, references=True):
                pass
        with path.open(encoding="utf-8") as handle:
            return import_lines(store, read_lines(handle, path.name), replace=replace, on_progress=on_progress,
                                source=str(path))  # fmt: skip
    except (OSError, UnicodeDecodeError) as error:
        raise GraphFileError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None


def copy_graph(
    source: GraphStore, destination: GraphStore, *, replace: bool = False, on_progress: Progress | None = None
) -> Imported:
    """Copy every node and relationship of one store into another (empty, or emptied by `replace`)."""
    if schema_version(source) > LATEST_VERSION:
        raise GraphFileError("the source graph's schema is newer than this chiplore; upgrade chiplore")
    check_labelled(source)  # before the destination is touched: a node left behind is a loss

    def lines() -> Iterator[NodeLine | RelationshipLine]:
        yield from iter_nodes(source)
        yield from iter_relationships(source)

    return import_lines(destination, lines(), replace=replace, on_progress=on_progress,
                        source=f"a copy of the {source.backend} store")  # fmt: skip
