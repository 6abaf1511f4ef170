"""`-p NAME=VALUE` reads Cypher's list and map literals (chiplore.cli.literals), and nothing Python's
reader took that Cypher does not write."""

from __future__ import annotations

import pytest

from chiplore.cli.literals import cypher_literal

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "value"), [
    ("['a', 'b']", ["a", "b"]),
    ("{k: 1, s: 'x', l: [true, null, FALSE]}", {"k": 1, "s": "x", "l": [True, None, False]}),
    ("[1e3, -2, .5, 1.5E-3, 0x1F, 0o17]", [1000.0, -2, 0.5, 0.0015, 31, 15]),
    ("['a\\'b', \"c\\\"d\", '\\u00e9', 'tab\\there']", ["a'b", 'c"d', "é", "tab\there"]),
    ("{`a key`: 1, `b``c`: 2}", {"a key": 1, "b`c": 2}),
    ("[[1, [2]], {a: {b: []}}, {}]", [[1, [2]], {"a": {"b": []}}, {}]),
])  # fmt: skip
def test_cypher_literals_read_as_cypher_writes_them(text: str, value: object) -> None:
    assert cypher_literal(text) == value


@pytest.mark.parametrize("text", [
    "['a' 'b']", "[0b101]", "[1_000]", "[r'x']", "['''x''']", "[(1)]", "[1, 2] # c", "[1, 2", "{1: 2}",
    "[foo]", "['\\x41']", "'a'", "[1,]", "{a 1}", "[" * 100 + "]" * 100,
])  # fmt: skip
def test_what_cypher_does_not_write_is_refused(text: str) -> None:
    """Python's reader took implicit concatenation, 0b and 1_000, raw and triple-quoted strings, \\x
    escapes, parentheses and comments: a typo became another value rather than a usage error."""
    with pytest.raises(ValueError, match=r"at character \d+"):
        cypher_literal(text)
