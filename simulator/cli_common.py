"""What `ferc` and `fe-run` share: one red line per refused input, bounded source reads, versions."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import click
from pydantic import ValidationError

from chiplore.core.errors import ChiploreError
from chiplore.core.settings import Settings
from chiplore.simulator.dsl.parser import MAX_SOURCE_BYTES
from chiplore.simulator.textfile import UnreadableFile, read_text_file

USAGE_EXIT = 2  # bad input or configuration; 1 is kept for "the program failed its check or run"


def fail(message: str) -> NoReturn:
    """Print one red line on stderr and exit with USAGE_EXIT; called for every refused input."""
    click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(USAGE_EXIT)


class OneLineErrors(click.Group):
    """A command group whose expected failures (configuration, unreadable files, refused
    requests) end in one red line and exit 2, never in a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (ChiploreError, UnreadableFile) as error:
            fail(str(error))


def read_source(path: Path) -> str:
    """A Ferrite source file: a regular file of at most MAX_SOURCE_BYTES; undecodable bytes become
    U+FFFD so the compiler can point at them."""
    return read_text_file(path, MAX_SOURCE_BYTES, errors="replace")


def settings(**overrides: object) -> Settings:
    """The CHIPLORE_ settings with the command line's `overrides` (None: not given), a bad value as
    one line naming where it came from (`--seed` or `CHIPLORE_SEED`) instead of a traceback."""
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        name = f"--{field.replace('_', '-')}" if field in given else "CHIPLORE_" + field.upper()
        fail(f"{name}: {first['msg']} (got {first['input']!r})")


def package_version() -> str:
    try:
        return metadata.version("chiplore")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"
