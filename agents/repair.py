"""The builtin refiner's repair of a program a toolchain refuses (DESIGN.md 6): a kernel's BEST that
broke under a new toolchain is rewritten from the compiler's own diagnostics, then screened and run
like any design.

Each E0103 names the construct the version does not have; the rewrite for it is the one the
diagnostic's replacement text states (`.cast(D)` -> `.widen(D)` before the vector/contraction stage,
`.narrow(D)` after it, and so on). A DM overflow (E0301) lowers the deepest `#[pipeline]` by one.
A design written from a family is regenerated from its knobs instead (see `agents.upgrade`); this
is for any other program, an LLM's included.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from chiplore.core.target import CheckResult

UNAVAILABLE = re.compile(r"^'(?P<construct>.+?)' is not available in toolchain")
HEADER = re.compile(r'#!\[toolchain = "[^"]*"\]')
PIPELINE = re.compile(r"#\[pipeline\(depth = (\d+)\)\]")
WIDE = frozenset({"f32", "i32"})  # a cast to these widens in the fetch adapter; any other narrows
ROUNDS = 4

Rewrite = Callable[[str], str]


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


# The construct a diagnostic names (as the compiler writes it) -> what the change is, and the rewrite.
REWRITES: dict[str, tuple[str, Rewrite]] = {
    ".cast(D)": (".cast -> .widen/.narrow", _split_cast),
    ".widen(D)": (".widen/.narrow -> .cast", _join_cast),
    ".narrow(D)": (".widen/.narrow -> .cast", _join_cast),
    ".lut(D)": (".lut -> .decode", _rename("lut", "decode")),
    ".decode(D)": (".decode -> .lut", _rename("decode", "lut")),
    "reduce_slices(..., result = all)": ("reduce_slices(result = all) -> allreduce_slices", _to_allreduce),
    "allreduce_slices(op, group)": ("allreduce_slices -> reduce_slices(result = all)", _from_allreduce),
}


@dataclass(frozen=True)
class Repair:
    source: str
    changes: tuple[str, ...]
    errors: tuple[str, ...]  # what the toolchain still refuses ("" when the repair compiles)

    @property
    def ok(self) -> bool:
        return not self.errors


def repair(source: str, version: str, check: Callable[[str, str], CheckResult]) -> Repair:
    """Rewrite `source` until `version` compiles it, or no rewrite applies any more."""
    changes: list[str] = []
    fixed = HEADER.sub(f'#![toolchain = "{version}"]', source)
    if fixed != source:
        changes.append(f"header -> {version}")
    for _ in range(ROUNDS):
        errors = [d for d in check(fixed, version).diagnostics if d.is_error]
        if not errors:
            return Repair(fixed, tuple(changes), ())
        before = fixed
        for diagnostic in errors:
            change, rewrite = _rewrite_for(diagnostic.code, diagnostic.message)
            if rewrite is None:
                continue
            rewritten = rewrite(fixed)
            if rewritten != fixed:
                fixed = rewritten
                if change not in changes:
                    changes.append(change)
        if fixed == before:
            break
    errors = [d for d in check(fixed, version).diagnostics if d.is_error]
    return Repair(fixed, tuple(changes), tuple(f"{d.code}: {d.message}" for d in errors))


def _rewrite_for(code: str, message: str) -> tuple[str, Rewrite | None]:
    if code.endswith("0103") and (match := UNAVAILABLE.match(message)):
        return REWRITES.get(match["construct"], ("", None))
    if code.endswith("0301"):
        return "a shallower #[pipeline]", _shallower
    return "", None


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
