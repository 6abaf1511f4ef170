"""Coded compiler diagnostics (`error[E0301]: ...`) as data, and their rendering with a caret."""

from __future__ import annotations

from functools import lru_cache

from chiplore.core.target import Diagnostic, Severity

__all__ = ["Diagnostic", "Severity", "render"]

SHOWN_COLUMNS = 120  # a source line longer than this is shown around the caret, not whole


def render(diagnostic: Diagnostic, source: str, path: str = "<input>") -> str:
    """The diagnostic as ferc prints it: header, location, the source line and a caret under the span."""
    lines = [f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"]
    span = diagnostic.span
    if span is not None:
        lines.append(f"  --> {path}:{span.line}:{span.column}")
        source_lines = _lines(source)
        if 1 <= span.line <= len(source_lines):
            text = source_lines[span.line - 1].expandtabs(4)
            width = span.end_column - span.column if span.end_line == span.line else len(text) - span.column + 1
            text, column, width = _window(text, span.column, max(1, width))
            gutter = " " * len(str(span.line))
            lines += [
                f"{gutter} |",
                f"{span.line} | {text}",
                f"{gutter} | {' ' * (column - 1)}{'^' * width}",
            ]
    lines += [f"  = {note}" for note in diagnostic.notes]
    return "\n".join(lines)


@lru_cache(maxsize=2)
def _lines(source: str) -> tuple[str, ...]:
    """The source's lines, split once for all its diagnostics (a 60 KB file may have thousands)."""
    return tuple(source.splitlines())


def _window(text: str, column: int, width: int) -> tuple[str, int, int]:
    """The part of a long line around the caret (a 60 KB line of minus signs is one line of source),
    with the caret's column and width in it."""
    if len(text) <= SHOWN_COLUMNS:
        return text, column, width
    start = max(0, min(column - 1 - SHOWN_COLUMNS // 3, len(text) - SHOWN_COLUMNS))
    shown = text[start : start + SHOWN_COLUMNS]
    prefix, suffix = ("..." if start > 0 else ""), ("..." if start + SHOWN_COLUMNS < len(text) else "")
    caret = column - start + len(prefix)
    return prefix + shown + suffix, caret, max(1, min(width, SHOWN_COLUMNS - (column - 1 - start)))
