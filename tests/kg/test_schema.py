"""Schema migrations: applied once, in order, idempotent, on both backends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chiplore.core.errors import QueryError, StoreError
from chiplore.kg.schema import FACT_KEY, FACT_LABEL, INDEXES, LATEST_VERSION, NODE_KEYS, ensure_schema, schema_version
from chiplore.kg.store import GraphStore


def test_fresh_graph_gets_every_key_and_index(store: GraphStore) -> None:
    report = ensure_schema(store)
    assert (report.version_before, report.version_after) == (0, LATEST_VERSION)
    assert len(report.applied) == LATEST_VERSION
    objects = store.schema_objects()
    unique = {(o["label"], o["property"]) for o in objects if o["kind"] == "unique"}
    indexed = {(o["label"], o["property"]) for o in objects if o["kind"] == "index"}
    assert set(NODE_KEYS.items()) | {(FACT_LABEL, FACT_KEY)} <= unique
    assert set(INDEXES) <= indexed | unique


def test_running_migrations_again_changes_nothing(store: GraphStore) -> None:
    ensure_schema(store)
    before = store.schema_objects()
    report = ensure_schema(store)
    assert report.applied == []
    assert store.schema_objects() == before
    assert store.read("MATCH (s:SchemaVersion) RETURN count(s) AS n") == [{"n": 1}]


def test_every_label_key_is_unique(store: GraphStore) -> None:
    ensure_schema(store)
    for label, key in NODE_KEYS.items():
        store.write(f"CREATE (:{label} {{{key}: 'same'}})")
        with pytest.raises(QueryError):
            store.write(f"CREATE (:{label} {{{key}: 'same'}})")


def test_a_graph_from_a_newer_chiplore_is_refused(store: GraphStore) -> None:
    ensure_schema(store)
    store.write("MATCH (s:SchemaVersion) SET s.version = $v", {"v": LATEST_VERSION + 1})
    assert schema_version(store) == LATEST_VERSION + 1
    with pytest.raises(StoreError, match="newer"):
        ensure_schema(store)


def test_the_graph_page_names_every_label_relationship_index_and_query() -> None:
    """docs/graph.md is the schema's page: whatever the schema holds, the page names."""
    from pathlib import Path

    from chiplore import queries
    from chiplore.kg.repo.nodes import RELATIONSHIPS
    from chiplore.kg.schema import ANCHOR_INDEXES, INDEXES, NODE_KEYS

    page = (Path(__file__).resolve().parents[2] / "docs" / "graph.md").read_text()
    missing = [f"label {label}" for label in NODE_KEYS if f"`{label}`" not in page]
    missing += [f"relationship {rel}" for rel in RELATIONSHIPS if f"`{rel}`" not in page]
    missing += [
        f"index {label}.{prop}" for label, prop in (*INDEXES, *ANCHOR_INDEXES) if f"`{label}.{prop}`" not in page
    ]
    missing += [f"query {name}" for name in queries.load_all() if f"`{name}`" not in page]
    assert not missing, f"docs/graph.md does not name: {', '.join(missing)}"


@pytest.mark.unit
def test_every_label_the_code_writes_is_a_schema_label() -> None:
    """A label the schema does not name has no key: a graph file cannot carry it, so an export stops on
    it and a copy would leave it behind (DeviceUse was one, written by `optimize --workers N`)."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"(?:MERGE|CREATE)\s*\(\w*:(\w+)")
    written: dict[str, set[str]] = {}
    sources = [*(root / "chiplore").glob("*.py")]  # its other folders link to the top-level packages
    for package in ("kg", "agents", "ingest", "chiplore/cli", "chiplore/core", "simulator"):
        sources += (root / package).rglob("*.py")
    for path in sources:
        if "testing" not in path.parts:  # test fixtures write what they like
            for label in pattern.findall(path.read_text()):
                written.setdefault(label, set()).add(str(path.relative_to(root)))
    strangers = {label: paths for label, paths in written.items() if label not in NODE_KEYS and label != FACT_LABEL}
    assert written and not strangers, strangers
