"""Wiring in one place: settings -> store and target. A test builds its own App."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.core.errors import ConfigError
from chiplore.core.settings import Settings
from chiplore.core.target import Target
from kg.embedded_store import EmbeddedStore
from kg.neo4j_store import Neo4jStore
from kg.store import GraphStore
from simulator.target import SimRNGD

# name -> how to build it from the settings; another accelerator registers itself here.
TARGETS: dict[str, Callable[[Settings], Target]] = {SimRNGD.name: lambda settings: SimRNGD(seed=settings.seed)}


@dataclass(frozen=True)
class TargetDescriptor:
    """What `chiplore init` registers about the target: its name and toolchain versions."""

    name: str
    description: str
    toolchain_versions: tuple[str, ...]
    default_toolchain: str


def open_target(settings: Settings) -> Target:
    try:
        build = TARGETS[settings.target]
    except KeyError:
        raise ConfigError(f"unknown target {settings.target!r}; known: {', '.join(TARGETS)}") from None
    return build(settings)


def describe_target(target: Target) -> TargetDescriptor:
    return TargetDescriptor(
        name=target.name,
        description=getattr(target, "description", target.name),
        toolchain_versions=tuple(target.toolchains()),
        default_toolchain=target.default_toolchain(),
    )


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
        return describe_target(open_target(self.settings))
