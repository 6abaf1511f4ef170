"""A failing random pack made small: `shrink(sketch, root)` keeps simplifying while the pack still
fails to build for the same reason (names and numbers generalised), and returns the smallest.

Simplifications, tried in turn until none applies: every name made plain (`p1`, `v1`, `A1`: does the
failure need a clashing name?), one output dropped with what only it needed, one op bypassed (its
readers read its input instead), one matvec's scales dropped. Only build failures shrink
(`build.build_pack`: the generator's gaps, a baseline that does not compile, run or pass); each try
builds a pack, so a failure found late in a big kernel costs a host test per try.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path

from chiplore.simulator.testing.build import PackBuild, build_pack
from chiplore.simulator.testing.campaign import general
from chiplore.simulator.testing.sketch import PackSketch, Param

MAX_TRIES = 200
SINKS = ("store", "cache_write")
NAMED_FIELDS = ("input", "weight", "scale", "global_scale", "a", "b", "cos", "sin", "position", "to", "cache", "out")


def shrink(sketch: PackSketch, root: Path) -> tuple[PackSketch, PackBuild]:
    """The smallest sketch found that fails as `sketch` does, and its build."""
    first = build_pack(sketch, root / "0")
    if first.built:
        return sketch, first
    wanted = (first.status, _reason(first))
    best, build, tries = sketch, first, 0
    changed = True
    while changed and tries < MAX_TRIES:
        changed = False
        for candidate in _simpler(best):
            tries += 1
            tried = build_pack(candidate, root / str(tries))
            if (tried.status, _reason(tried)) == wanted:
                best, build, changed = candidate, tried, True
                break
            if tries >= MAX_TRIES:
                break
    return best, build


def _reason(build: PackBuild) -> str:
    names = {p.name for p in build.sketch.params} | {str(op["out"]) for op in build.sketch.ops if "out" in op}
    names |= set(build.sketch.axes)
    quoted = re.sub(r"'(\w+)'", lambda m: "'<name>'" if m.group(1) in names else m.group(0), build.reason)
    return general(quoted, sorted(names))  # a quoted name is the kernel's even where it is a word too


def _simpler(sketch: PackSketch) -> Iterator[PackSketch]:
    plain = _plain_names(sketch)
    if plain is not None:
        yield plain
    sinks = [i for i, op in enumerate(sketch.ops) if op["op"] in SINKS]
    if len(sinks) > 1:
        for index in sinks:
            yield _pruned(sketch, [op for i, op in enumerate(sketch.ops) if i != index])
    for index, op in enumerate(sketch.ops):
        if op["op"] not in (*SINKS, "matvec"):
            yield _bypassed(sketch, index)
    for index, op in enumerate(sketch.ops):
        if op["op"] == "matvec" and ("scale" in op or "global_scale" in op):
            ops = copy.deepcopy(sketch.ops)
            for key in ("scale", "scale_kind", "block", "global_scale"):
                ops[index].pop(key, None)
            yield _pruned(sketch, ops)


def _plain_names(sketch: PackSketch) -> PackSketch | None:
    """Every parameter, value and axis renamed to a name no generator or language uses (None when
    they already are)."""
    names = {p.name: f"p{i}" for i, p in enumerate(sketch.params, 1)}
    names |= {str(op["out"]): f"v{i}" for i, op in enumerate(sketch.ops, 1) if "out" in op}
    axes = {axis: f"A{i}" for i, axis in enumerate(sketch.axes, 1)}
    if all(old == new for old, new in (*names.items(), *axes.items())):
        return None
    return renamed(sketch, names, axes)


def renamed(sketch: PackSketch, names: dict[str, str], axes: dict[str, str] | None = None) -> PackSketch:
    """The sketch with parameters and values renamed by `names` and axes by `axes` (others kept)."""
    names = {p.name: p.name for p in sketch.params} | {str(op["out"]): str(op["out"]) for op in sketch.ops
                                                      if "out" in op} | names  # fmt: skip
    axes = {axis: axis for axis in sketch.axes} | (axes or {})
    result = copy.deepcopy(sketch)

    def dim(text: str) -> str:
        axis, sep, divisor = text.partition(" / ")
        return axes.get(axis, axis) + sep + divisor

    result.axes = {axes[k]: v if isinstance(v, int) else tuple(axes[a] for a in v) for k, v in sketch.axes.items()}
    result.params = [Param(names[p.name], p.dtype, tuple(dim(d) for d in p.dims), p.mutable) for p in sketch.params]
    result.inputs = {names[k]: v for k, v in result.inputs.items()}
    for recipe in result.inputs.values():
        dist = recipe.get("dist", {})
        if "axis" in dist:
            dist["axis"] = axes[dist["axis"]]
        for change in recipe.get("sets", {}).values():
            if "divide_by" in change:
                change["divide_by"] = names[change["divide_by"]]
    result.ops = [{k: names.get(v, v) if k in NAMED_FIELDS and isinstance(v, str) else v for k, v in op.items()}
                  for op in sketch.ops]  # fmt: skip
    return result


def _bypassed(sketch: PackSketch, index: int) -> PackSketch:
    """The op at `index` removed, its readers reading its (first) input instead."""
    op = sketch.ops[index]
    source = op.get("input", op.get("a"))
    out = op["out"]
    ops = [{k: source if k in NAMED_FIELDS and k != "out" and v == out else v for k, v in o.items()}
           for i, o in enumerate(sketch.ops) if i != index]  # fmt: skip
    return _pruned(sketch, ops)


def _pruned(sketch: PackSketch, ops: list[dict[str, object]]) -> PackSketch:
    """`ops` without what no sink needs, and the sketch without the parameters nothing reads or writes."""
    needed: set[str] = set()
    kept: list[dict[str, object]] = []
    for op in reversed(ops):
        if op["op"] in SINKS or op.get("out") in needed:
            kept.append(op)
            needed |= {str(v) for k, v in op.items() if k in NAMED_FIELDS and k != "out"}
    kept.reverse()
    axes_used: set[str] = set()
    params = [p for p in sketch.params if p.name in needed]
    for p in params:
        for d in p.dims:
            axes_used.add(d.partition(" / ")[0])
    for name in list(needed):
        dist = sketch.inputs.get(name, {}).get("dist", {})
        if "axis" in dist:
            axes_used.add(dist["axis"])
    result = copy.deepcopy(sketch)
    result.ops = kept  # type: ignore[assignment]
    result.params = params
    result.inputs = {k: v for k, v in result.inputs.items() if k in needed}
    for recipe in result.inputs.values():  # a set change dividing by an input that is gone goes with it
        if "sets" in recipe:
            recipe["sets"] = {s: c for s, c in recipe["sets"].items() if c.get("divide_by") in (None, *needed)}
    closure = set(axes_used)
    for axis in axes_used:
        value = sketch.axes.get(axis)
        if isinstance(value, tuple):
            closure |= set(value)
    result.axes = {k: v for k, v in sketch.axes.items() if k in closure}
    return result
