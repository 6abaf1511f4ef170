"""Coded compiler diagnostics (`error[E0301]: ...`) as data, and their rendering with a caret."""

from __future__ import annotations

from chiplore.core.target import Diagnostic, Severity

__all__ = ["Diagnostic", "Severity", "render"]


def render(diagnostic: Diagnostic, source: str, path: str = "<input>") -> str:
    """The diagnostic as ferc prints it: header, location, the source line and a caret under the span."""
    lines = [f"{diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"]
    span = diagnostic.span
    if span is not None:
        lines.append(f"  --> {path}:{span.line}:{span.column}")
        source_lines = source.splitlines()
        if 1 <= span.line <= len(source_lines):
            text = source_lines[span.line - 1].expandtabs(4)
            width = span.end_column - span.column if span.end_line == span.line else len(text) - span.column + 1
            gutter = " " * len(str(span.line))
            lines += [
                f"{gutter} |",
                f"{span.line} | {text}",
                f"{gutter} | {' ' * (span.column - 1)}{'^' * max(1, width)}",
            ]
    lines += [f"  = {note}" for note in diagnostic.notes]
    return "\n".join(lines)
