"""A Pygments lexer for Ferrite, SimRNGD's kernel language (simulator/dsl/grammar.lark): the report
highlights BEST's program with it, and `pygmentize -l ferrite FILE` works once chiplore is installed
(pyproject.toml registers it under the `pygments.lexers` entry points).

Token classes follow the grammar: declarations and statements are keywords, memory spaces and
dtypes are types, attributes (`#![toolchain = ...]`, `#[pipeline(...)]`) are decorators, the
method chain's stages (`.fetch`, `.commit`, ...) are functions, mapping terms (`H / 120 % 8 # 2`)
are operators and numbers.
"""

from __future__ import annotations

from typing import ClassVar

from pygments.lexer import RegexLexer, bygroups, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
    Whitespace,
)

DECLARATIONS = ("layout", "type", "fn", "kernel")
STATEMENTS = ("let", "mut", "for", "in")
SPACES = ("hbm", "dm", "trf", "vrf", "axis", "int")
DTYPES = ("bf16", "f16", "f32", "f8e4m3", "f8e5m2", "f4e2m1", "f4", "i8", "i16", "i32", "u8")
CONTEXTS = ("main", "sub")
MAPPING = ("rep", "at")


class FerriteLexer(RegexLexer):
    """Ferrite (`*.fe`)."""

    name = "Ferrite"
    aliases: ClassVar[list[str]] = ["ferrite", "fe"]
    filenames: ClassVar[list[str]] = ["*.fe"]
    mimetypes: ClassVar[list[str]] = ["text/x-ferrite"]

    tokens: ClassVar[dict[str, list]] = {  # type: ignore[type-arg]
        "root": [
            (r"\s+", Whitespace),
            (r"//[^\n]*", Comment.Single),
            (r"/\*", Comment.Multiline, "comment"),
            (r"#!?\[", Name.Decorator, "attribute"),
            (r"axes!", Keyword.Declaration),
            (words(DECLARATIONS, suffix=r"\b"), Keyword.Declaration),
            (words(STATEMENTS, suffix=r"\b"), Keyword),
            (words(SPACES, suffix=r"\b"), Keyword.Type),
            (words(DTYPES, suffix=r"\b"), Keyword.Type),
            (words(CONTEXTS, suffix=r"\b"), Name.Builtin),
            (words(MAPPING, prefix=r"\b", suffix=r"(?=\s*\()"), Name.Builtin),
            (r"(\.)([A-Za-z_]\w*)(?=\s*\()", bygroups(Punctuation, Name.Function)),
            (r"([A-Za-z_]\w*)(::)([A-Za-z_]\w*)", bygroups(Name.Namespace, Punctuation, Name.Function)),
            (r"[A-Za-z_]\w*(?=\s*\()", Name.Function),
            (r'"(\\\\|\\[^\\]|[^"\\])*"', String.Double),
            (r"\d+\.\d+([eE][-+]?\d+)?|\d+[eE][-+]?\d+", Number.Float),
            (r"\d+", Number.Integer),
            (r"\.\.|->|::|&(\s*mut\b)?", Operator),
            (r"[-+*/%=#<>]", Operator),
            (r"[{}()\[\],;:.]", Punctuation),
            (r"[A-Za-z_]\w*", Name),
            (r".", Text),
        ],
        "comment": [
            (r"[^*/]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"[*/]", Comment.Multiline),
        ],
        "attribute": [
            (r"\]", Name.Decorator, "#pop"),
            (r'"(\\\\|\\[^\\]|[^"\\])*"', String.Double),
            (r"\d+", Number.Integer),
            (r"[A-Za-z_]\w*", Name.Decorator),
            (r"[^\]\"A-Za-z_\d]+", Name.Decorator),
        ],
    }
