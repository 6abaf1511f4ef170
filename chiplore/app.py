"""Wiring in one place: settings -> the graph store, the target (found through the
`chiplore.targets` entry points), the LLM roles, and a `Session` over them. No module-level
singletons: a test builds its own App from its own Settings."""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from chiplore.agents.judge import Judge
from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.schedule import Roles
from chiplore.agents.screens import Screen
from chiplore.core.errors import ConfigError
from chiplore.core.secrets import redact_uri
from chiplore.core.settings import Settings
from chiplore.core.target import Target
from chiplore.ingest.librarian import Librarian
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.graph_io import refuse_unfinished_import
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.store import GraphStore
from chiplore.session import Session

TARGET_GROUP = "chiplore.targets"  # entry points: name -> a factory taking the Settings
TargetFactory = Callable[[Settings], Target]


def target_factories() -> dict[str, TargetFactory]:
    """The targets installed packages register (SimRNGD registers itself as `simrngd`)."""
    return {point.name: point.load() for point in entry_points(group=TARGET_GROUP)}


def load_object(reference: str, what: str) -> Any:
    """The object a `module:attribute` reference names (a factory of a target, a judge or a screen)."""
    module, colon, attribute = reference.partition(":")
    if not colon or not module or not attribute:
        raise ConfigError(f"{what} {reference!r} is not module:attribute")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"cannot load {what} {reference!r}: {error}") from None


def _built(reference: str, what: str, base: type) -> Any:
    """What the `module:factory` reference's factory makes, checked to be a `base` (one line if not)."""
    made = load_object(reference, what)()
    if not isinstance(made, base):
        raise ConfigError(f"{what} {reference!r} made a {type(made).__name__}, not a {base.__module__}.{base.__name__} "
                          f"(subclass it)")  # fmt: skip
    return made


def open_target(settings: Settings) -> Target:
    """The configured target: a registered name, or `module:factory` for one not installed as a package."""
    name = settings.target
    if ":" in name:
        factory = load_object(name, "target")
    else:
        factories = target_factories()
        if name not in factories:
            raise ConfigError(f"unknown target {name!r}; installed: {', '.join(sorted(factories)) or 'none'}")
        factory = factories[name]
    try:
        target = factory(settings)
    except TypeError as error:  # `os:path`, `os:getcwd`, `json:loads`: no factory taking chiplore's settings
        raise ConfigError(f"target {name!r} is not a target factory (one taking chiplore's settings): "
                          f"{error}") from None  # fmt: skip
    if not isinstance(target, Target):
        raise ConfigError(f"target {name!r} does not implement chiplore's Target interface")
    return target


BOLT_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")


def check_bolt_uri(uri: str) -> None:
    """Refuse a Neo4j address chiplore cannot talk to (it speaks Bolt), before any driver sees it."""
    scheme, sep, _ = uri.partition("://")
    if sep and scheme.lower() in BOLT_SCHEMES:
        return
    browser = " (http is Neo4j Browser's port; Bolt's is usually 7687)" if scheme.lower() in ("http", "https") else ""
    raise ConfigError(f"CHIPLORE_NEO4J_URI {redact_uri(uri)!r} is not a Bolt address{browser}: use "
                      "bolt://HOST:7687 or neo4j://HOST:7687 (+s or +ssc for TLS)")  # fmt: skip


@dataclass(frozen=True)
class RoleChoice:
    """Who designs, screens and judges, as a user names them: each proposer's policy ("builtin" or
    "llm"), the LLM's config, and `module:factory` references of a judge and extra screens."""

    architect: str = "builtin"
    refiner: str = "builtin"
    llm: LLMConfig = dataclasses.field(default_factory=LLMConfig)
    judge: str = ""
    screens: tuple[str, ...] = ()


@dataclass(frozen=True)
class App:
    settings: Settings

    def open_store(self, *, create: bool = False) -> GraphStore:
        """Open the configured store; the caller closes it (use it as a context manager). An embedded
        store's data dir is made only when `create` is set (`init`, `demo`): a mistyped path is an
        error, not a new empty graph."""
        settings = self.settings
        if settings.store == "embedded":
            path = settings.data_dir
            if path.exists() and not path.is_dir():
                raise ConfigError(f"the data dir {path} is a file, not a folder (CHIPLORE_DATA_DIR or --data-dir)")
            if not create and not (path / "falkordb").is_dir():
                raise ConfigError(f"no chiplore graph in {path}: `chiplore init` (or `chiplore demo`) makes one there; "
                                  "CHIPLORE_DATA_DIR or --data-dir names another")  # fmt: skip
            return EmbeddedStore(path, query_timeout_s=settings.query_timeout_s)
        check_bolt_uri(settings.neo4j_uri)
        return Neo4jStore(
            settings.neo4j_uri,
            settings.neo4j_user,
            settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            query_timeout_s=settings.query_timeout_s,
        )

    def target(self) -> Target:
        return open_target(self.settings)

    @contextmanager
    def session(self, *, create: bool = False, unfinished_import: bool = False) -> Iterator[Session]:
        """A session on the configured store and target; the store closes when it ends. A graph an
        interrupted import left half-written is refused (`unfinished_import`: the import that redoes it)."""
        target = self.target()
        with self.open_store(create=create) as store:
            if not unfinished_import:
                refuse_unfinished_import(store)
            yield Session(
                store,
                target,
                target_factory=functools.partial(open_target, self.settings),
                search_predictions=self.settings.search_predictions,
            )

    def roles(self, session: Session, choice: RoleChoice) -> Roles:
        """The roles the options ask for: the session's builtin ones, with the LLM policy where chosen
        (the LLM roles share one token budget), a judge and screens from `module:factory` references
        (each factory called with no argument)."""
        roles = session.default_roles()
        changes: dict[str, Any] = {}
        if "llm" in (choice.architect, choice.refiner):
            from chiplore.agents.llm.policy import LLMPolicy, TokenBudget  # LangChain loads only when a role needs it

            budget = TokenBudget(choice.llm.token_budget)
            for role in ("architect", "refiner"):
                if getattr(choice, role) == "llm":
                    changes[role] = LLMPolicy(role, choice.llm, session.store, session.target, budget)  # type: ignore[arg-type]
        if choice.judge:
            changes["judge"] = _built(choice.judge, "judge", Judge)
        if choice.screens:
            changes["screens"] = tuple(_built(reference, "screen", Screen) for reference in choice.screens)
        return dataclasses.replace(roles, **changes)

    def librarian(self, session: Session, policy: str, config: LLMConfig) -> Librarian | None:
        """The LLM librarian when asked for (the builtin one is learn's default)."""
        if policy != "llm":
            return None
        from chiplore.agents.llm.librarian import LLMLibrarian  # LangChain loads only when a role needs it

        return LLMLibrarian(config, session.store, session.pack.params)
