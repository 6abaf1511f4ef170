"""Rules checked on declarations and calls without lowering: mapping sizes (E0201), DMA packet and
engine arguments (E0320, E0323) and def-use order (E0501)."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.diagnostics import Diagnostic
from simulator.dsl import ir
from simulator.dsl.printer import print_mapping
from simulator.dsl.walk import walk
from simulator.toolchain.env import Env
from simulator.toolchain.rules import emit

MAX_DMA_PACKET_BYTES = 4096
ENGINES = range(8)
EXPECTED_POSITIONS = {"cluster": 2, "slice": 256}
MAX_LANES = 8
DATA_ONLY_FIELDS = ("elem", "time", "packet")


def check_mapping_sizes(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    """E0201 on every device type: cluster 2, slice 256, lane <= 8, no rep/at in data digits."""
    out: list[Diagnostic] = []
    for node in walk(root):
        if not isinstance(node, ir.DevType):
            continue
        for name, field in env.fields(node.layout).items():
            if not isinstance(field, ir.MapField):
                continue
            positions = env.positions(field.mapping)
            text = print_mapping(field.mapping)
            if name in EXPECTED_POSITIONS and positions is not None and positions != EXPECTED_POSITIONS[name]:
                out += emit("0201", version, f"{name} mapping {text} has {positions} positions, "
                            f"expected {EXPECTED_POSITIONS[name]}", field.span or node.span)  # fmt: skip
            elif name == "lane" and positions is not None and positions > MAX_LANES:
                out += emit("0201", version, f"lane mapping {text} has {positions} positions, expected at most "
                            f"{MAX_LANES}", field.span or node.span)  # fmt: skip
            elif name in DATA_ONLY_FIELDS and any(t.kind in ("rep", "at") for t in field.mapping.terms):
                out += emit("0201", version, f"{name} mapping {text} has replicated or placed positions, expected "
                            "data digits only", field.span or node.span)  # fmt: skip
    return out


def check_dma_arguments(root: ir.Node, version: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for node in walk(root):
        if not (isinstance(node, ir.Method) and node.name in ("dma", "dma_into")):
            continue
        for arg in node.args:
            if arg.name == "packet" and isinstance(arg.value, ir.Int) and arg.value.value > MAX_DMA_PACKET_BYTES:
                out += emit("0320", version, f"DMA packet {arg.value.value} B exceeds 4,096 B", arg.span)
            if arg.name == "engines" and isinstance(arg.value, ir.Bracket):
                engines = [t.value for t in arg.value.mapping.terms if t.kind == "unit"]
                well_formed = len(engines) == len(arg.value.mapping.terms)
                if (
                    not engines
                    or not well_formed
                    or len(set(engines)) != len(engines)
                    or any(e not in ENGINES for e in engines)
                ):
                    text = print_mapping(arg.value.mapping)
                    out += emit("0323", version, f"engine list {text} is empty, repeats or leaves 0..7", arg.span)
    return out


def check_def_use(params: Iterable[object], body: ir.Block, version: str) -> list[Diagnostic]:
    """E0501: a tensor bound by `let` is used before the statement that binds it."""
    bound_later = {node.name for node in walk(body) if isinstance(node, ir.Let)}
    defined = {p.name for p in params if hasattr(p, "name")}  # type: ignore[attr-defined]
    return list(_walk_block(body, defined, bound_later, version))


def _walk_block(block: ir.Block, defined: set[str], bound: set[str], version: str) -> Iterable[Diagnostic]:
    for statement in block.stmts:
        if isinstance(statement, ir.For):
            yield from _uses(statement.start, defined, bound, version)
            yield from _uses(statement.stop, defined, bound, version)
            yield from _walk_block(statement.body, defined | {statement.var}, bound, version)
            defined |= {n.name for n in walk(statement.body) if isinstance(n, ir.Let)}
            continue
        value = statement.expr if isinstance(statement, ir.ExprStmt) else statement.value
        yield from _uses(value, defined, bound, version)
        if isinstance(statement, ir.Let):
            defined.add(statement.name)
    if block.tail is not None:
        yield from _uses(block.tail, defined, bound, version)


def _uses(expr: ir.Node, defined: set[str], bound: set[str], version: str) -> Iterable[Diagnostic]:
    for node in walk(expr):
        if isinstance(node, ir.Name) and node.id in bound and node.id not in defined:
            yield from emit("0501", version, f"'{node.id}' is used before it is defined", node.span)
