"""A kernel pack as data before it is written: its axes, parameters, fixture recipe and op graph.

`PackSketch.write(folder)` writes `kernel.toml` and a `baseline.fe` (the signature alone, or a
program given), and no reference.py: the pack's reference is its op graph's. The TOML is written
here (the standard library reads TOML, it does not write it) for the few kinds of value a manifest
holds: strings, numbers, booleans, lists of strings and tables of them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chiplore.simulator.kernels.manifest import BASELINE, MANIFEST

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Param:
    """One HBM parameter: its shape is a list of terms, each an axis name, `axis / n` or `1`."""

    name: str
    dtype: str
    dims: tuple[str, ...]
    mutable: bool = False

    def text(self) -> str:
        return f"{self.name}: {'&mut ' if self.mutable else '&'}hbm<{self.dtype}>[{', '.join(self.dims)}]"


@dataclass
class PackSketch:
    """Everything a pack's files say, as plain data."""

    name: str
    kind: str  # the shape of graph it was drawn as (the campaign counts outcomes by kind)
    description: str
    toolchain: str
    atol: float
    rtol: float
    axes: dict[str, int | tuple[str, ...]]  # atoms by size, composites by their atoms, in declaration order
    params: list[Param]
    inputs: dict[str, dict[str, Any]]  # the fixture recipe's [fixtures.inputs.<name>] tables
    ops: list[dict[str, Scalar]]
    sets: tuple[str, ...] | None = None  # [fixtures] sets, when the pack lists them
    label: str = ""
    notes: list[str] = field(default_factory=list)  # how it was drawn, for a reader of the TOML

    def size(self, axis: str) -> int:
        value = self.axes[axis]
        return value if isinstance(value, int) else math.prod(self.size(part) for part in value)

    def summary(self) -> str:
        """The kernel in a few lines: its axes, its signature and its ops (a failure's minimal example)."""
        axes = ", ".join(f"{n}={v if isinstance(v, int) else '(' + ','.join(v) + ')'}" for n, v in self.axes.items())
        lines = [f"{self.name} ({self.toolchain}): axes {axes}", "  " + "; ".join(p.text() for p in self.params)]
        for op in self.ops:
            fields = {k: v for k, v in op.items() if k not in ("op", "out")}
            args = ", ".join(f"{k}={v}" for k, v in fields.items())
            lines.append(f"  {str(op['out']) + ' = ' if 'out' in op else ''}{op['op']}({args})")
        return "\n".join(lines)

    def elements(self, param: Param) -> int:
        """How many elements the parameter holds."""
        count = 1
        for dim in param.dims:
            axis, _, divisor = dim.partition(" / ")
            count *= 1 if axis == "1" else self.size(axis) // int(divisor or 1)
        return count

    def signature_source(self, body: str = "") -> str:
        """A Ferrite file declaring the kernel's axes and signature, with `body` inside the kernel."""
        axes = ", ".join(f"{n} = {v if isinstance(v, int) else '(' + ', '.join(v) + ')'}" for n, v in self.axes.items())
        params = "".join(f"    {p.text()},\n" for p in self.params)
        return (f'#![toolchain = "{self.toolchain}"]\naxes! {{ {axes} }}\n\n'
                f"kernel {self.name}(\n{params}) {{\n{body}}}\n")  # fmt: skip

    def manifest_text(self) -> str:
        lines = [f"# {note}" for note in self.notes]
        top: dict[str, Scalar] = {"name": self.name, "label": self.label or self.name[:24],
                                  "description": self.description, "toolchain": self.toolchain,
                                  "atol": self.atol, "rtol": self.rtol}  # fmt: skip
        lines += [f"{key} = {toml_value(value)}" for key, value in top.items()]
        if self.sets is not None:
            lines += ["", "[fixtures]", f"sets = {toml_value(list(self.sets))}"]
        for name, recipe in self.inputs.items():
            lines += ["", f"[fixtures.inputs.{toml_key(name)}]"]
            lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in recipe.items()]
        for op in self.ops:
            lines += ["", "[[ops]]"]
            lines += [f"{toml_key(key)} = {toml_value(value)}" for key, value in op.items()]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path, baseline: str | None = None) -> Path:
        """The pack's files in `folder` (created); `baseline` defaults to the signature alone."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MANIFEST).write_text(self.manifest_text(), encoding="utf-8")
        (folder / BASELINE).write_text(baseline if baseline is not None else self.signature_source(), encoding="utf-8")
        return folder


def toml_key(key: str) -> str:
    bare = key.replace("_", "").replace("-", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def toml_value(value: object) -> str:
    """A TOML value: JSON's strings are TOML's basic strings; floats keep every digit."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError(f"{value} has no place in a kernel.toml")
        text = repr(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")
