"""`analyze(source, version)`: what a compiled Toyl program does, counted (chiplore.core.stats).

One op per statement that does work, in program order, on the toy chip's two in-order queues: `dma`
(a load is `chunks` commands over `lanes` lanes through the chip's ingress; a store is one command)
and `compute` (a multiply consumes its matrix, a scale its source). An op depends on the statements
that loaded or computed what it reads. Counts only: no timing and nothing from the chip's truth.
"""

from __future__ import annotations

from collections import defaultdict

from chiplore.core.stats import OpPart, OpStats, ProgramStats
from tests.toy.compiler import Program, analyse
from tests.toy.versions import MULTIPLIES

TARGET = "toychip"


def analyze(source: str, version: str) -> ProgramStats:
    checked, program = analyse(source, version)
    if not checked.ok:
        return ProgramStats(target=TARGET, kernel=program.kernel, version=version, compiled=False,
                            diagnostics=checked.diagnostics)  # fmt: skip
    ops = _ops(program)
    totals: dict[str, float] = defaultdict(float)
    inputs: dict[str, dict[str, float]] = {}
    lane_chunk = 0.0
    for op in ops:
        for name in ("bytes", "commands"):
            if name in op.counters:
                totals[f"{op.kind}.{name}"] += op.counters[name]
        if op.kind == "dma.load":
            inputs[f"input.{op.label.split()[1]}"] = {"bytes": op.counters["bytes"]}
            lane_chunk = max(lane_chunk, op.counters["bytes"] / op.counters["commands"] / op.counters["lanes"])
    return ProgramStats(target=TARGET, kernel=program.kernel, version=version, diagnostics=checked.diagnostics,
                        ops=tuple(ops), totals=dict(totals), by_resource=inputs,
                        peaks={"lane_buffer.bytes": lane_chunk})  # fmt: skip


def _ops(program: Program) -> list[OpStats]:
    made: dict[str, str] = {}  # tensor -> id of the op that loaded or computed it last
    ops: list[OpStats] = []
    for s in program.statements:
        op_id = f"op{len(ops)}"
        common = {"id": op_id, "label": s.text, "line": s.line}
        if s.op == "load":
            nbytes = float(program.tensors[s.args[0]].nbytes)
            counters = {"bytes": nbytes, "commands": float(s.options.get("chunks", 1)),
                        "lanes": float(s.options.get("lanes", 1))}  # fmt: skip
            ops.append(OpStats(kind="dma.load", counters=counters, **common,
                               parts=(OpPart(queue="dma", resources=("ingress",), counters=counters),)))  # fmt: skip
            made[s.args[0]] = op_id
        elif s.op in MULTIPLIES or s.op == "scale":
            reads = s.args[1:3] if s.op in MULTIPLIES else s.args[1:2]
            counters = {"bytes": float(program.tensors[reads[0]].nbytes)}
            deps = tuple(dict.fromkeys(made[name] for name in reads if name in made))
            ops.append(OpStats(kind=f"compute.{'multiply' if s.op in MULTIPLIES else 'scale'}", deps=deps,
                               counters=counters, parts=(OpPart(queue="compute", counters=counters),),
                               **common))  # fmt: skip
            made[s.args[0]] = op_id
        elif s.op == "store":
            counters = {"bytes": float(program.tensors[s.args[0]].nbytes), "commands": 1.0, "lanes": 1.0}
            deps = (made[s.args[0]],) if s.args[0] in made else ()
            ops.append(OpStats(kind="dma.store", deps=deps, counters=counters, **common,
                               parts=(OpPart(queue="dma", counters=counters),)))  # fmt: skip
    return ops
