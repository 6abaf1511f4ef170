"""What ferc's diagnostics mean to chiplore, and how a program one toolchain refuses is ported.

The vocabulary: E01xx codes are syntax and vocabulary errors (the screener's parse check); an E0103
names a construct the version does not have and says what to write instead; a message may state
the limit it enforces. The repairs: each E0103 is answered by the rewrite its replacement text
states (`.cast(D)` -> `.widen(D)` before the vector/contraction stage, `.narrow(D)` after it, and
so on), and a DM overflow (E0301) by one buffer less in the deepest `#[pipeline]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from chiplore.core.pack import Unavailable
from chiplore.core.target import Diagnostic

SYNTAX = re.compile(r"^E01\d\d$")
UNAVAILABLE = re.compile(r"^'(?P<construct>.+?)' is not available in toolchain")
REPLACEMENT = re.compile(r"not available in toolchain [\d.]+; (.*)$")
BOUND = re.compile(r"\((?:max|limit) ([\d,]+)(?: B)?\)|exceeds ([\d,]+) B|multiple of (\d+) B|> ([\d,]+) B usable")
HEADER = re.compile(r'#!\[toolchain = "[^"]*"\]')
PIPELINE = re.compile(r"#\[pipeline\(depth = (\d+)\)\]")
METHOD = re.compile(r"\.([a-z_]+)\(")  # a method-call construct: `.cast(`, `.reduce_slices(`
WIDE = frozenset({"f32", "i32"})  # a cast to these widens in the fetch adapter; any other narrows

Rewrite = Callable[[str], str]


class FercVocabulary:
    """ferc's diagnostic codes, read the way the learner, the screener and the repairs need them."""

    def is_syntax(self, diagnostic: Diagnostic) -> bool:
        return bool(SYNTAX.match(diagnostic.code))

    def unavailable(self, diagnostic: Diagnostic) -> Unavailable | None:
        if not diagnostic.code.endswith("0103"):
            return None
        named = UNAVAILABLE.match(diagnostic.message)
        instead = REPLACEMENT.search(diagnostic.message)
        return Unavailable(construct=named["construct"] if named else "", instead=instead.group(1) if instead else "")

    def stated_bound(self, diagnostic: Diagnostic) -> float | None:
        match = BOUND.search(diagnostic.message)
        if match is None:
            return None
        return float(next(g for g in match.groups() if g).replace(",", ""))

    def constructs(self, source: str) -> frozenset[str]:
        return frozenset(METHOD.findall(source))


def _split_cast(source: str) -> str:
    return re.sub(r"\.cast\((\w+)\)", lambda m: f".{'widen' if m[1] in WIDE else 'narrow'}({m[1]})", source)


def _join_cast(source: str) -> str:
    return re.sub(r"\.(?:widen|narrow)\((\w+)\)", r".cast(\1)", source)


def _rename(old: str, new: str) -> Rewrite:
    return lambda source: re.sub(rf"\.{old}\(", f".{new}(", source)


def _to_allreduce(source: str) -> str:
    return re.sub(r"\.reduce_slices\((\w+),\s*group\s*=\s*(\[[^\]]*\]),\s*result\s*=\s*all\)",
                  r".allreduce_slices(\1, group = \2)", source)  # fmt: skip


def _from_allreduce(source: str) -> str:
    return re.sub(r"\.allreduce_slices\((\w+),\s*group\s*=\s*(\[[^\]]*\])\)",
                  r".reduce_slices(\1, group = \2, result = all)", source)  # fmt: skip


BUFFERS = re.compile(r",\s*buffers:\s*(\d+)")
LOOP = re.compile(r"^([ \t]*)for \w+ in ", re.M)


def _to_pipeline(source: str) -> str:
    """`buffers: N` on a loop's tensors (0.7.0) -> `#[pipeline(depth = N)]` on the loop (0.5.0, 0.6.0):
    the deepest count of a loop's tensors becomes its depth."""
    loops = [(m.start(), m.group(1)) for m in LOOP.finditer(source)]
    depth: dict[int, tuple[str, int]] = {}
    for match in BUFFERS.finditer(source):
        enclosing = [(at, indent) for at, indent in loops if at < match.start()]
        if not enclosing:
            continue
        at, indent = enclosing[-1]
        depth[at] = (indent, max(int(match[1]), depth.get(at, ("", 0))[1]))
    text = BUFFERS.sub("", source)
    for at in sorted(depth, reverse=True):  # the loops' offsets hold before the removals: find them again
        loop_at = [m.start() for m in LOOP.finditer(text)][[a for a, _ in loops].index(at)]
        indent, n = depth[at]
        if PIPELINE.search(text[max(0, loop_at - 80) : loop_at]) is None:
            text = text[:loop_at] + f"{indent}#[pipeline(depth = {n})]\n" + text[loop_at:]
    return text


def _shallower(source: str) -> str:
    """The deepest pipeline one buffer shallower (fewer buffers in flight, less DM at the peak)."""
    depths = [(int(m[1]), m.start()) for m in PIPELINE.finditer(source)]
    if not depths:
        return source
    depth, at = max(depths)
    if depth <= 1:
        return source
    match = PIPELINE.match(source, at)
    assert match is not None
    return source[:at] + f"#[pipeline(depth = {depth - 1})]" + source[match.end() :]


# The construct a diagnostic names (as the compiler writes it) -> what the change is, and the rewrite.
REWRITES: dict[str, tuple[str, Rewrite]] = {
    ".cast(D)": (".cast -> .widen/.narrow", _split_cast),
    ".widen(D)": (".widen/.narrow -> .cast", _join_cast),
    ".narrow(D)": (".widen/.narrow -> .cast", _join_cast),
    ".lut(D)": (".lut -> .decode", _rename("lut", "decode")),
    ".decode(D)": (".decode -> .lut", _rename("decode", "lut")),
    "reduce_slices(..., result = all)": ("reduce_slices(result = all) -> allreduce_slices", _to_allreduce),
    "allreduce_slices(op, group)": ("allreduce_slices -> reduce_slices(result = all)", _from_allreduce),
    "buffers: N": ("buffers: N -> #[pipeline(depth = N)]", _to_pipeline),
}


class FercRepairs:
    """Ports a Ferrite program between toolchain versions, one diagnostic at a time."""

    def __init__(self, vocabulary: FercVocabulary) -> None:
        self.vocabulary = vocabulary

    def retarget(self, source: str, version: str) -> str:
        return HEADER.sub(f'#![toolchain = "{version}"]', source)

    def rewrite(self, source: str, diagnostic: Diagnostic) -> tuple[str, str] | None:
        missing = self.vocabulary.unavailable(diagnostic)
        if missing is not None:
            found = REWRITES.get(missing.construct)
            if found is None:
                return None
            change, rewrite = found
            return change, rewrite(source)
        if diagnostic.code.endswith("0301"):
            return "a shallower #[pipeline]", _shallower(source)
        return None
