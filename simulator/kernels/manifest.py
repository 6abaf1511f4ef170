"""A kernel pack's `kernel.toml`: what the kernel is called, how it is graded, how its inputs are drawn
and what it computes (docs/kernels.md).

    name = "swiglu_feedforward"          # the kernel's name: the baseline's kernel has it
    label = "SwiGLU"                     # a short name for tables and figures
    description = "..."
    toolchain = "0.6.0"                  # the baseline compiles under it
    atol = 0.02
    rtol = 0.01
    graded = ["residual"]                # optional: the outputs that count (default: all the reference returns)

    [fixtures.inputs.x]                  # a FixtureRecipe (chiplore.simulator.execute.recipe), one table per input
    dist = { kind = "uniform", low = -1.0, high = 1.0 }

    [[ops]]                              # the OpGraph (chiplore.core.ops), in order
    op = "rms_norm"
    input = "x"
    out = "h"

`read_manifest(folder)` reads and validates it; every problem is one line naming the field.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chiplore.core.ops import Op, OpGraph
from chiplore.simulator.execute.recipe import FixtureRecipe

MANIFEST = "kernel.toml"
BASELINE = "baseline.fe"
REFERENCE = "reference.py"
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class PackProblem(ValueError):
    """What is wrong with a pack, in one line (the loader prefixes the pack's name or folder)."""


class Manifest(BaseModel):
    """The validated contents of `kernel.toml`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    label: str = Field("", max_length=24)
    description: str = Field(min_length=1)
    toolchain: str
    # strict: `atol = "0.02"` or `atol = true` is refused, as the docs say of every field
    atol: float = Field(ge=0, allow_inf_nan=False, strict=True)
    rtol: float = Field(ge=0, allow_inf_nan=False, strict=True)
    graded: tuple[str, ...] | None = None
    fixtures: FixtureRecipe
    ops: tuple[Op, ...] = Field(min_length=1)  # at least one write to an output

    @field_validator("name")
    @classmethod
    def _identifier(cls, name: str) -> str:
        if not NAME.fullmatch(name):
            raise ValueError("a kernel name is lower-case letters, digits and '_', starting with a letter")
        return name

    @property
    def graph(self) -> OpGraph:
        return OpGraph(ops=self.ops)


def read_manifest(folder: Path) -> Manifest:
    """The pack's manifest; a PackProblem for a missing file, bad TOML or a field that does not validate."""
    path = folder / MANIFEST
    if not path.is_file():
        raise PackProblem(f"no {MANIFEST}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # an editor's byte-order mark is no statement
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise PackProblem(f"{MANIFEST} is not valid TOML: {error}") from None
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        raise PackProblem(f"{MANIFEST}: {describe(error)}") from None


SHOWN_PROBLEMS = 3  # problems one error line lists before "(and N more)"


def describe(error: ValidationError) -> str:
    """The problems pydantic found, each as `where: what`, the first few in one line (with how many
    more there are)."""
    problems = [p for p in error.errors() if p["type"] != "too_short"] or error.errors()
    return listed([f"{_where(p['loc'])}: {_message(p)}" for p in problems])


def listed(problems: list[str]) -> str:
    """Problems in one line: the first SHOWN_PROBLEMS, then how many more there are."""
    more = f" (and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
    return "; ".join(problems[:SHOWN_PROBLEMS]) + more


def _message(problem: Any) -> str:
    message = str(problem["msg"]).removeprefix("Value error, ")
    if problem["type"] == "extra_forbidden":
        message = "unknown field"
    elif problem["type"] == "union_tag_invalid":
        ctx = problem.get("ctx", {})
        field = str(ctx.get("discriminator", "")).strip("'")
        message = f"unknown {field} {ctx.get('tag')!r}; known: {ctx.get('expected_tags')}"
    return message


def _where(loc: tuple[int | str, ...]) -> str:
    """`ops[3].weight`: list positions 1-based, as a user counts tables; an op's tag is left out."""
    text = ""
    for index, part in enumerate(loc):
        if index == 2 and loc[0] == "ops" and isinstance(loc[1], int):
            continue  # pydantic names the union member ("matvec"): the op's position says which
        text += f"[{part + 1}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "the file"
