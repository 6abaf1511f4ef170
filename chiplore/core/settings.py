"""Settings from the environment (prefix CHIPLORE_) and command-line overrides."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from chiplore.core.errors import ConfigError
from chiplore.core.secrets import redact_uri

StoreKind = Literal["embedded", "neo4j"]
MAX_SEED = 2**63 - 1  # seeds numpy's generators and may be stored as a graph integer (64-bit signed)
SEED_RANGE = "a seed is an integer from 0 to 2^63 - 1"  # how a seed out of range is refused, everywhere


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("chiplore", appauthor=False))


class Settings(BaseSettings):
    """Everything chiplore reads from its environment. Secrets stay SecretStr and are never printed."""

    model_config = SettingsConfigDict(env_prefix="CHIPLORE_", extra="ignore")

    store: StoreKind = "embedded"
    data_dir: Path = Field(default_factory=default_data_dir)
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr = SecretStr("")
    neo4j_database: str = "neo4j"
    query_timeout_s: float = Field(default=30.0, gt=0, le=86_400)  # a day at most: a deadline past it overflows
    seed: int = 0  # CHIPLORE_SEED: 0 to MAX_SEED; anything else is refused, not mapped
    target: str = "simrngd"
    kernels: str = ""  # CHIPLORE_KERNELS: kernel packs (or folders of packs) to offer, os.pathsep-separated
    devices: int = Field(default=1, ge=1, le=256)  # CHIPLORE_DEVICES: the devices a simulated target offers
    workers: int = Field(default=1, ge=1, le=1024)  # CHIPLORE_WORKERS: optimize's CPU workers; > 1 runs on Ray
    ray_address: str = ""  # CHIPLORE_RAY_ADDRESS: a Ray cluster to join ("" starts a local one when workers > 1)
    # CHIPLORE_SEARCH_PREDICTIONS: cost-model predictions the builtin architect may spend per proposal
    # (None: its default); a pack's model that compiles to price makes each one cost a compile
    search_predictions: int | None = Field(default=None, ge=4, le=100_000)

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_named(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():  # Path("") is the working folder: never what was meant
            raise PydanticCustomError("data_dir_empty", "empty: unset it for the default, or name a folder")
        return value

    @field_validator("neo4j_database")
    @classmethod
    def _a_data_database(cls, name: str) -> str:
        if name.strip().lower() == "system":  # it holds no nodes: every query would be a raw Cypher error
            raise PydanticCustomError("system_database", "Neo4j's administration database holds no graph: name "
                                      "one that holds data (`neo4j` by default)")  # fmt: skip
        return name

    @field_validator("seed")
    @classmethod
    def _seed_in_range(cls, seed: int) -> int:
        if not 0 <= seed <= MAX_SEED:
            raise PydanticCustomError("seed_range", SEED_RANGE)
        return seed

    def public_view(self) -> dict[str, object]:
        """The settings as they may be shown to a user: the password only says whether it is set."""
        return {
            "store": self.store,
            "data_dir": str(self.data_dir),
            "neo4j_uri": redact_uri(self.neo4j_uri),
            "neo4j_user": self.neo4j_user,
            "neo4j_password": "set" if self.neo4j_password.get_secret_value() else "unset",
            "neo4j_database": self.neo4j_database,
            "query_timeout_s": self.query_timeout_s,
            "seed": self.seed,
            "target": self.target,
            "kernels": self.kernels,
            "devices": self.devices,
            "workers": self.workers,
            "ray_address": self.ray_address,
            "search_predictions": self.search_predictions,
        }


def setting_error(error: ValidationError, given: Mapping[str, Any], variable_prefix: str,
                  named: Callable[[str], str]) -> ConfigError:  # fmt: skip
    """A refused setting in one line naming where it came from: as it was given (`named`: a command's
    option, the API's keyword), else its variable; a password is never shown, nor one inside a URI."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"])
    source = named(field) if field in given else f"{variable_prefix}{field.upper()}"
    value = first.get("input")
    if "password" in field:
        shown = "'***'"
    elif ("uri" in field or "url" in field) and isinstance(value, str):
        shown = repr(redact_uri(value))
    else:
        shown = "'***'" if "uri" in field or "url" in field else repr(value)
    return ConfigError(f"{source}={shown}: {first['msg'].removeprefix('Value error, ')}")
