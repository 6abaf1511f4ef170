"""Toyl, the toy chip's language: one statement per line.

    #toolchain 1.0            the toolchain the program is written for (the first line)
    kernel gemv               the kernel's name
    param w 256x256           an f32 input (a matrix ROWSxCOLS or a vector N)
    out y 256                 an f32 output
    load w chunks=2 lanes=4   DMA an input onto the chip in chunks, each split over lanes
    mul y w x                 y = w @ x (`mac` from toolchain 2.0 on)
    scale y y 0.5             y = y * 0.5
    store y                   DMA an output back

Blank lines and lines starting with `//` are ignored. `parse` never raises: text that is not Toyl
comes back as coded diagnostics (E01xx), with the statements it could read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chiplore.core.target import Diagnostic, Span

HEADER = re.compile(r"^#toolchain\s+(\S+)\s*$")
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
SHAPE = re.compile(r"^(\d+)(?:x(\d+))?$")
OPTION = re.compile(r"^([a-z]+)=(\d+)$")
# keyword -> (positional arguments, options it takes)
ARITY: dict[str, tuple[int, frozenset[str]]] = {
    "kernel": (1, frozenset()),
    "param": (2, frozenset()),
    "out": (2, frozenset()),
    "load": (1, frozenset({"chunks", "lanes"})),
    "mul": (3, frozenset()),
    "mac": (3, frozenset()),
    "scale": (3, frozenset()),
    "store": (1, frozenset()),
}


@dataclass(frozen=True)
class Statement:
    op: str
    args: tuple[str, ...]
    options: dict[str, int]
    line: int
    text: str

    @property
    def span(self) -> Span:
        return Span(line=self.line, column=1, end_line=self.line, end_column=len(self.text) + 1)


@dataclass
class Parsed:
    header: str | None
    statements: list[Statement] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def error(code: str, message: str, at: Statement | int | None = None) -> Diagnostic:
    span = at.span if isinstance(at, Statement) else Span(line=at, column=1, end_line=at, end_column=2) if at else None
    return Diagnostic(code=code, severity="error", message=message, span=span)


def header_of(source: str) -> str | None:
    """The version a program's `#toolchain` line names, if its first statement line is one."""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            match = HEADER.match(stripped)
            return match.group(1) if match else None
    return None


def parse(source: str) -> Parsed:
    parsed = Parsed(header=header_of(source))
    seen_header = False
    for number, line in enumerate(source.splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("//"):
            continue
        if text.startswith("#"):
            if seen_header or not HEADER.match(text):
                parsed.diagnostics.append(error("E0100", f"`{text}`: only one `#toolchain V` line, first", number))
            seen_header = True
            continue
        if not seen_header:
            parsed.diagnostics.append(error("E0100", "the program must start with a `#toolchain V` line", number))
            seen_header = True
        statement = _statement(text, number, parsed.diagnostics)
        if statement is not None:
            parsed.statements.append(statement)
    if not seen_header:
        parsed.diagnostics.append(error("E0100", "the program must start with a `#toolchain V` line"))
    return parsed


def _statement(text: str, line: int, diagnostics: list[Diagnostic]) -> Statement | None:
    words = text.split()
    op, rest = words[0], words[1:]
    if op not in ARITY:
        diagnostics.append(error("E0101", f"unknown statement `{op}`", line))
        return None
    count, allowed = ARITY[op]
    args = [w for w in rest if "=" not in w]
    options: dict[str, int] = {}
    for word in (w for w in rest if "=" in w):
        match = OPTION.match(word)
        if match is None or match.group(1) not in allowed or int(match.group(2)) < 1:
            diagnostics.append(error("E0102", f"`{op}` does not take `{word}`", line))
            return None
        options[match.group(1)] = int(match.group(2))
    if len(args) != count:
        diagnostics.append(error("E0102", f"`{op}` takes {count} argument(s), got {len(args)}", line))
        return None
    return Statement(op, tuple(args), options, line, text)


def shape_of(text: str) -> tuple[int, ...] | None:
    """`256x256` -> (256, 256), `256` -> (256,); None for anything else."""
    match = SHAPE.match(text)
    if match is None:
        return None
    return tuple(int(g) for g in match.groups() if g is not None)
