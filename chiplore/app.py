"""Wiring in one place: settings -> store and target. A test builds its own App."""

from __future__ import annotations

from dataclasses import dataclass

import simulator
from chiplore.errors import ConfigError
from chiplore.settings import Settings
from kg.embedded_store import EmbeddedStore
from kg.neo4j_store import Neo4jStore
from kg.store import GraphStore


@dataclass(frozen=True)
class TargetDescriptor:
    """What `chiplore init` registers about the target: its name and toolchain versions."""

    name: str
    description: str
    toolchain_versions: tuple[str, ...]
    default_toolchain: str


def describe_target(name: str) -> TargetDescriptor:
    if name == simulator.NAME:
        return TargetDescriptor(
            name=simulator.NAME,
            description=simulator.DESCRIPTION,
            toolchain_versions=simulator.TOOLCHAIN_VERSIONS,
            default_toolchain=simulator.DEFAULT_TOOLCHAIN,
        )
    raise ConfigError(f"unknown target {name!r}; known: {simulator.NAME}")


@dataclass(frozen=True)
class App:
    settings: Settings

    def open_store(self) -> GraphStore:
        """Open the configured store; the caller closes it (use it as a context manager)."""
        settings = self.settings
        if settings.store == "embedded":
            return EmbeddedStore(settings.data_dir, query_timeout_s=settings.query_timeout_s)
        return Neo4jStore(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            query_timeout_s=settings.query_timeout_s,
        )

    def target(self) -> TargetDescriptor:
        return describe_target(self.settings.target)
