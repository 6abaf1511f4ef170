"""What the commands share: the consoles, the store options that build the App, the LLM options,
and typed `-p NAME=VALUE` parameters."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError
from rich.console import Console, ConsoleDimensions

from chiplore.agents.llm.config import LLMConfig
from chiplore.app import App
from chiplore.cli.literals import cypher_literal
from chiplore.core.settings import MAX_SEED, SEED_RANGE, Settings, setting_error
from chiplore.kg.store import int64

F = TypeVar("F", bound=Callable[..., Any])
POLICIES = ("builtin", "llm")

PIPE_WIDTH = 320  # stdout's width when it is not a terminal and COLUMNS is unset


class OutputConsole(Console):
    """A console as wide as its tables need when it writes to a pipe or a file (a terminal, or
    COLUMNS, still sets the width), so `chiplore status | less` never cuts a kernel's name."""

    @property  # type: ignore[override]
    def size(self) -> ConsoleDimensions:
        dimensions = Console.size.fget(self)  # type: ignore[attr-defined]
        if self._width is None and not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(PIPE_WIDTH, dimensions.height)
        return dimensions

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = OutputConsole(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


class FiniteFloat(click.ParamType):
    """A finite number, at least `low` (more than `low` where `strict`; click's FloatRange lets `nan`
    and `inf` through)."""

    name = "number"

    def __init__(self, low: float = 0.0, high: float | None = None, strict: bool = False) -> None:
        self.low, self.high, self.strict = low, high, strict

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        below = number <= self.low if self.strict else number < self.low
        if not math.isfinite(number) or below or (self.high is not None and number > self.high):
            bound = (
                f"{self.low:g}..{self.high:g}"
                if self.high is not None
                else f"{'>' if self.strict else '>='} {self.low:g}"
            )
            self.fail(f"{value!r} is not a finite number {bound}", param, ctx)
        return number


class Seed(click.ParamType):
    """A seed as the settings take it (CHIPLORE_SEED): 0 to 2^63 - 1, refused in the settings' words."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            seed = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not an integer", param, ctx)
        if not 0 <= seed <= MAX_SEED:
            self.fail(f"{SEED_RANGE} (got {value})", param, ctx)
        return seed


@dataclass
class CliState:
    """What the group passes down to its commands."""

    debug: bool


def store_options(command: F) -> F:
    """The options every command takes to choose and locate the graph store; they become `app: App`."""

    @click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Embedded store location [env CHIPLORE_DATA_DIR; default: the user data dir].",
    )
    @click.option(
        "--store",
        type=click.Choice(["embedded", "neo4j"]),
        default=None,
        help="Graph backend [env CHIPLORE_STORE; default: embedded].",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, data_dir: Path | None, store: str | None, **kwargs: Any) -> Any:
        overrides: dict[str, Any] = {}
        if data_dir is not None:
            overrides["data_dir"] = data_dir
        if store is not None:
            overrides["store"] = store
        try:
            settings = Settings(**overrides)
        except ValidationError as error:
            raise setting_error(error, overrides, "CHIPLORE_", _option) from None
        return command(*args, app=App(settings), **kwargs)

    return wrapper  # type: ignore[return-value]


def _option(field: str) -> str:
    """The command-line option that sets a setting's field."""
    return f"--{field.replace('_', '-')}"


def llm_options(command: F) -> F:
    """The model options of the LLM roles, gathered into one `llm: LLMConfig` argument."""

    # defaults come from LLMConfig when the command runs (CHIPLORE_LLM_* included): one read at import
    # made a bad CHIPLORE_LLM_* value a traceback in every command, `--help` too
    fields = LLMConfig.model_fields

    @click.option("--model", default=None,
                  help=f"The LLM, as LangChain's provider:model (e.g. openai:gpt-5) [default: CHIPLORE_LLM_MODEL, "
                       f"else {fields['model'].default}].")  # fmt: skip
    @click.option("--base-url", default=None, help="An OpenAI-compatible server (vLLM, llama.cpp, Ollama).")
    @click.option("--api-key-env", default=None, metavar="NAME",
                  help="The environment variable holding the model's key [default: OPENAI_API_KEY for OpenAI "
                       "itself; a --base-url server gets no key unless this names one].")  # fmt: skip
    @click.option("--temperature", type=FiniteFloat(0, 2), default=None,
                  help=f"The LLM's sampling temperature [default: {fields['temperature'].default}].")  # fmt: skip
    @click.option("--token-budget", type=click.IntRange(min=0), default=None,
                  help="Prompt + completion tokens of the run; LLM roles stop once spent (0: no limit) "
                       f"[default: {fields['token_budget'].default:,}].")  # fmt: skip
    @click.option("--usd-per-mtok", "prices", type=(FiniteFloat(0), FiniteFloat(0)), default=None,
                  help="Prices per million prompt and completion tokens, for the cost estimate "
                       "[default: 0 0].")  # fmt: skip
    @functools.wraps(command)
    def wrapper(*args: Any, **options: Any) -> Any:
        prices = options.pop("prices")
        names = ("model", "base_url", "api_key_env", "temperature", "token_budget")
        given = {name: value for name in names if (value := options.pop(name)) is not None}
        if prices is not None:
            given |= {"usd_per_mtok_in": prices[0], "usd_per_mtok_out": prices[1]}
        try:
            llm = LLMConfig(**given)
        except ValidationError as error:
            raise setting_error(error, given, "CHIPLORE_LLM_", _option) from None
        return command(*args, llm=llm, **options)

    return wrapper  # type: ignore[return-value]


PARAM_TYPES = ("str", "int", "float", "bool", "json")


@dataclass(frozen=True)
class ParamText:
    """One `-p NAME[:TYPE]=VALUE` as typed: the name, the type it forces (None: read it as a literal)
    and the value's text."""

    name: str
    type: str | None
    text: str


def split_params(pairs: tuple[str, ...]) -> list[ParamText]:
    """`-p` options as typed, checked for shape (a usage error, exit 2, before anything runs)."""
    found: list[ParamText] = []
    for pair in pairs:
        declaration, sep, text = pair.partition("=")
        name, _, forced = declaration.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected NAME=VALUE or NAME:TYPE=VALUE, got {pair!r}", param_hint="-p")
        if not name.strip().isidentifier():  # a backtick in one reached FalkorDB's parser as its raw error
            raise click.BadParameter(f"{pair!r}: NAME is a Cypher parameter name (letters, digits, _)",
                                     param_hint="-p")  # fmt: skip
        if forced and forced not in PARAM_TYPES:
            raise click.BadParameter(f"{pair!r}: TYPE is one of {', '.join(PARAM_TYPES)}", param_hint="-p")
        if any(other.name == name.strip() for other in found):  # the last one silently won
            raise click.BadParameter(f"{name.strip()} is given twice", param_hint="-p")
        found.append(ParamText(name.strip(), forced or None, text))
    return found


def parse_literal(text: str) -> Any:
    """A `-p` value read as a literal: an integer, a float, true/false, null, a list or map (JSON's, or
    Cypher's: `['a', 'b']`, `{k: 1}`), or a quoted string ("x" or 'x'); anything else is the text itself
    (`0.6.0`, `decoder_feedforward`). Text that opens a list or a map must be one: it became a string."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[lowered]
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == "'":
        return stripped[1:-1]
    try:
        return json.loads(stripped, parse_constant=_refuse)
    except ValueError:
        if not stripped.startswith(("[", "{")):
            return text
    try:
        return cypher_literal(stripped)
    except ValueError as why:
        raise click.BadParameter(f"{text!r} opens a list or a map but is not one (a Cypher or JSON literal: "
                                 f"{why}); -p NAME:str=... passes it as text", param_hint="-p") from None  # fmt: skip


def _refuse(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity stay text


def convert(param: ParamText) -> Any:
    """The value of one `-p`: its forced type's, else the literal it reads as."""
    if param.type is None:
        return parse_literal(param.text)
    try:
        if param.type == "str":
            return param.text
        if param.type == "int":
            return int(param.text)
        if param.type == "float":
            number = float(param.text)
            return number
        if param.type == "bool":
            lowered = param.text.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        return json.loads(param.text)
    except ValueError:
        raise click.BadParameter(f"{param.name}:{param.type}={param.text!r} is not a {param.type}",
                                 param_hint="-p") from None  # fmt: skip


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`-p NAME=VALUE` options as typed Cypher parameters: each value a literal (3 is an integer,
    [1, 2] a list, 'x' a string), or of the type NAME:TYPE forces (`-p v:str=3`)."""
    values = {}
    for param in split_params(pairs):
        value = values[param.name] = convert(param)
        if not _int64(value):  # the stores would cap it silently (99999999999999999999999999 came back 2**63 - 1)
            raise click.BadParameter(f"{param.name}={param.text!r} holds an integer past 64 bits", param_hint="-p")
    return values


def _int64(value: Any) -> bool:
    """Whether every integer in a parameter value fits in 64 bits (what both stores hold)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return int64(value)
    if isinstance(value, list):
        return all(_int64(item) for item in value)
    if isinstance(value, dict):
        return all(_int64(item) for item in value.values())
    return True


def write_file(out: Path, text: str) -> None:
    """Write a file the user named, its folder made first; a path that cannot be written is one line."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as error:
        raise click.FileError(str(out), hint=error.strerror or str(error)) from None
