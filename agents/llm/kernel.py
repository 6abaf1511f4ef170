"""What the LLM roles are told of the kernel itself, for any kernel a target offers (a kernel pack or
not): its description, signature and grading (the pack's reference: what it computes, as its op graph
over chiplore's decode-op vocabulary with each op's meaning), and the static lowering statistics of
BEST (`Target.analyze`). Never the kernel's true bound: that is hidden truth; the prompt's bound is
the one chiplore measured."""

from __future__ import annotations

import re
from collections import Counter

import chiplore.core.ops as decode_ops
from chiplore.core.errors import ChiploreError
from chiplore.core.stats import Counters, ProgramStats
from chiplore.core.target import KernelSpec, Target

RESOURCES_SHOWN = 24  # per-resource lines of the statistics (a wide program has hundreds)


def _semantics() -> dict[str, str]:
    """Each op's meaning, from the vocabulary's own documentation (one source of truth)."""
    doc = (decode_ops.__doc__ or "").split("Semantics", 1)[-1]
    out: dict[str, str] = {}
    for bullet in re.split(r"\n- ", doc)[1:]:
        head, _, meaning = bullet.partition(":")
        text = " ".join(meaning.split())
        for name in re.findall(r"`(\w+)`", head):
            out[name] = text
    return out


SEMANTICS = _semantics()


def _value(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _op_line(op: decode_ops._Op) -> str:
    fields = op.model_dump(exclude_none=True)
    kind = fields.pop("op")
    out = fields.pop("out", None)
    args = ", ".join(f"{key}={_value(value)}" for key, value in fields.items())
    return f"- {f'{out} = ' if out else ''}{kind}({args})"


def kernel_reference(spec: KernelSpec) -> str:
    """The kernel as its pack states it: description, signature, tolerances, and what it computes."""
    lines = [f"{spec.name}: {spec.description}", "Parameters (the kernel's signature; `mut` ones are outputs):"]
    for p in spec.params:
        shape = " x ".join(axis if axis == str(size) else f"{axis}={size}" for axis, size in p.shape) or "scalar"
        lines.append(f"- {p.name}: {p.type} ({'mut, ' if p.mutable else ''}{p.dtype}, {shape})")
    lines.append("Axes: " + ", ".join(f"{axis} = {size}" for axis, size in spec.axes.items()))
    tolerance = f"{spec.atol:g} + {spec.rtol:g} |expected|"
    lines.append(f"Graded: an output element passes when |got - expected| <= {tolerance}.")
    if spec.ops is None:
        lines.append("What it computes: as the official baseline does (the kernel declares no op graph).")
        return "\n".join(lines)
    lines.append("What it computes (the reference, in order; arithmetic in f32 unless an op says otherwise):")
    lines += [_op_line(op) for op in spec.ops.ops]
    used = list(dict.fromkeys(op.op for op in spec.ops.ops))
    lines.append("Where each op means:")
    lines += [f"- {name}: {SEMANTICS[name]}" for name in used if name in SEMANTICS]
    return "\n".join(lines)


def _counters(counters: Counters) -> str:
    return ", ".join(f"{name} {value:,.0f}" if float(value).is_integer() else f"{name} {value:,.4g}"
                     for name, value in sorted(counters.items()) if value)  # fmt: skip


def render_stats(stats: ProgramStats) -> str:
    """A program's static statistics in a few lines: totals, peaks, ops by kind, the busiest resources."""
    if not stats.compiled:
        codes = ", ".join(d.code for d in stats.diagnostics if d.is_error) or "no diagnostics"
        return f"(it does not compile under {stats.version}: {codes})"
    kinds = Counter(op.kind for op in stats.ops)
    lines = [f"Totals: {_counters(stats.totals) or '(none)'}", f"Peaks: {_counters(stats.peaks) or '(none)'}",
             "Ops by kind: " + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))]  # fmt: skip
    busiest = sorted(stats.by_resource.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    lines += [f"- {name}: {_counters(counters)}" for name, counters in busiest[:RESOURCES_SHOWN]]
    if len(busiest) > RESOURCES_SHOWN:
        lines.append(f"- ({len(busiest) - RESOURCES_SHOWN} more resources, with less on them)")
    return "\n".join(lines)


def best_stats(target: Target, source: str, version: str) -> str:
    """The statistics of BEST's program under `version` (a failure is a line, not an exception)."""
    if not source:
        return "(no BEST yet)"
    try:
        return render_stats(target.analyze(source, version))
    except ChiploreError as error:
        return f"(no statistics: {error})"
