"""The ingest tests' graph: a fresh store on each backend, with the schema and SimRNGD registered."""

from __future__ import annotations

import pytest

from kg.repo.targets import register_target
from kg.schema import ensure_schema
from kg.store import GraphStore
from simulator.target import SimRNGD


@pytest.fixture
def graph(store: GraphStore) -> GraphStore:
    ensure_schema(store)
    target = SimRNGD()
    register_target(store, target.name, target.toolchains(), target.default_toolchain())
    return store
