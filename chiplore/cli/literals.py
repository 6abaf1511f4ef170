"""Cypher's list and map literals, read for `-p NAME=VALUE` (a user writes `['a', 'b']` or `{k: 1}`)."""

from __future__ import annotations

import re
import string
from typing import Any, NoReturn

_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|0o[0-7]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?![\w.])")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONSTANTS = {"true": True, "false": False, "null": None}
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_DEEPEST = 64


def cypher_literal(text: str) -> list[Any] | dict[str, Any]:
    """A Cypher list or map literal as a value: strings in either quote (with Cypher's escapes), numbers
    (decimal, exponent, 0x, 0o), true/false/null, bare or backticked map keys (`{kernel: 'qkv', ids:
    [1, 2]}`). Raises ValueError for anything else (Python's `0b101`, `1_000` or `'a' 'b'` too)."""
    reader = _Reader(text)
    value = reader.value(0)
    reader.blank()
    if reader.at < len(text):
        reader.fail("more text after the literal")
    if not isinstance(value, list | dict):
        reader.fail("not a list or a map")
    return value


class _Reader:
    """Reads one literal from `text`, left to right; `at` is where it stands."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def fail(self, why: str) -> NoReturn:
        raise ValueError(f"{why} at character {self.at + 1}")

    def blank(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def take(self, char: str) -> bool:
        self.blank()
        if self.text.startswith(char, self.at):
            self.at += len(char)
            return True
        return False

    def value(self, depth: int) -> Any:
        if depth > _DEEPEST:
            self.fail("nested too deep")
        if self.take("["):
            return [] if self.take("]") else self.items(depth, "]")
        if self.take("{"):
            return {} if self.take("}") else dict(self.items(depth, "}"))
        if self.at < len(self.text) and self.text[self.at] in "'\"":
            return self.string()
        if number := _NUMBER.match(self.text, self.at):
            self.at = number.end()
            word = number.group()
            if "x" in word or "o" in word:
                return int(word, 0)
            return float(word) if any(c in word for c in ".eE") else int(word)
        word = _WORD.match(self.text, self.at)
        if word and word.group().lower() in _CONSTANTS:
            self.at = word.end()
            return _CONSTANTS[word.group().lower()]
        self.fail("no literal")

    def items(self, depth: int, close: str) -> list[Any]:
        found: list[Any] = []
        while True:
            if close == "}":
                key = self.key()
                if not self.take(":"):
                    self.fail("no ':' after a map key")
                found.append((key, self.value(depth + 1)))
            else:
                found.append(self.value(depth + 1))
            if self.take(close):
                return found
            if not self.take(","):
                self.fail(f"no ',' or '{close}'")

    def key(self) -> str:
        if self.take("`"):
            end = self.text.find("`", self.at)
            while end >= 0 and self.text.startswith("``", end):  # a backtick doubled is one
                end = self.text.find("`", end + 2)
            if end < 0:
                self.fail("a quoted key that never ends")
            key, self.at = self.text[self.at : end].replace("``", "`"), end + 1
            return key
        word = _WORD.match(self.text, self.at)
        if word is None:
            self.fail("no map key")
        self.at = word.end()
        return word.group()

    def string(self) -> str:
        quote, out = self.text[self.at], []
        self.at += 1
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == quote:
                self.at += 1
                return "".join(out)
            if char == "\\":
                escaped = self.text[self.at + 1 : self.at + 2]
                code = self.text[self.at + 2 : self.at + 6]
                if escaped in _ESCAPES:
                    out.append(_ESCAPES[escaped])
                    self.at += 2
                elif escaped in ("u", "U") and len(code) == 4 and all(c in string.hexdigits for c in code):
                    out.append(chr(int(code, 16)))
                    self.at += 6
                else:
                    self.fail(f"no escape \\{escaped}")
                continue
            out.append(char)
            self.at += 1
        self.fail("a string that never ends")
