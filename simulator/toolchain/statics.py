"""Rules checked on declarations and calls without lowering: mapping sizes (E0201), tile extents
(E0207), DMA packet and engine arguments (E0320, E0321, E0323), def-use order (E0501) and outputs
that nothing writes (E0801)."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.diagnostics import Diagnostic
from simulator.dsl import ir
from simulator.dsl.printer import print_mapping
from simulator.dsl.walk import viewed_name, walk
from simulator.toolchain.digits import AxisSystem, Digit
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
            if arg.name == "packet" and isinstance(arg.value, ir.Int):
                packet = arg.value.value
                if packet > MAX_DMA_PACKET_BYTES:
                    out += emit("0320", version, f"DMA packet {packet} B exceeds 4,096 B", arg.span)
                elif packet % 8:
                    out += emit("0321", version, "HBM<->DM transfer needs 8-byte aligned offsets and packets "
                                f"(packet = {packet} B)", arg.span)  # fmt: skip
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


def check_outputs_written(params: Iterable[object], body: ir.Block, version: str) -> list[Diagnostic]:
    """E0801, the static part: an `&mut` output that no `dma_into` writes at all."""
    written: set[str] = set()
    for node in walk(body):
        if isinstance(node, ir.Method) and node.name == "dma_into" and node.args:
            target = viewed_name(node.args[0].value)
            if target is not None:
                written.add(target)
    out: list[Diagnostic] = []
    for param in params:
        if isinstance(param, ir.TensorParam) and param.ref == "&mut" and param.name not in written:
            out += emit("0801", version, f"output {param.name} is not fully written: nothing writes it", param.span)
    return out


def check_tile_extents(body: ir.Block, axes: AxisSystem, version: str) -> list[Diagnostic]:
    """E0207: `.tile(digit, start, len)` and `.roll(digit, k)` must stay inside the digit."""
    out: list[Diagnostic] = []
    for node, loop_ranges in _methods_in_loops(body, {}):
        if node.name not in ("tile", "roll") or len(node.args) < 2:
            continue
        digit = _digit_of(node.args[0].value, axes)
        if digit is None:
            continue
        if node.name == "tile" and len(node.args) >= 3:
            starts = _values(node.args[1].value, loop_ranges)
            lengths = _values(node.args[2].value, loop_ranges)
            if not starts or not lengths:
                continue  # unknown, or a loop that never runs
            low, high = min(starts), max(s + n for s in starts for n in lengths)
            if low < 0 or high > digit.size:
                out += emit("0207", version, f"tile {digit}[{low}..{high}) exceeds extent {digit.size}", node.span)
        elif node.name == "roll":
            shifts = _values(node.args[1].value, loop_ranges)
            if shifts and any(not 0 <= k < digit.size for k in shifts):
                out += emit("0207", version, f"tile {digit}[{max(shifts)}..{max(shifts) + 1}) exceeds extent "
                            f"{digit.size}", node.span)  # fmt: skip
    return out


def _methods_in_loops(block: ir.Block, ranges: dict[str, range]) -> Iterable[tuple[ir.Method, dict[str, range]]]:
    for statement in block.stmts:
        if isinstance(statement, ir.For):
            start, stop = _values(statement.start, ranges), _values(statement.stop, ranges)
            inner = dict(ranges)
            if start is not None and stop is not None and len(start) == len(stop) == 1:
                inner[statement.var] = range(start[0], stop[0])
            yield from _methods_in_loops(statement.body, inner)
            continue
        value = statement.expr if isinstance(statement, ir.ExprStmt) else statement.value
        for node in walk(value):
            if isinstance(node, ir.Method):
                yield node, ranges
    if block.tail is not None:
        for node in walk(block.tail):
            if isinstance(node, ir.Method):
                yield node, ranges


MAX_ENUMERATED = 4096


def _values(expr: object, ranges: dict[str, range]) -> list[int] | None:
    """Every value an integer expression takes over the loop variables' ranges; None if unknown."""
    if isinstance(expr, ir.Int):
        return [expr.value]
    if isinstance(expr, ir.Name):
        values = ranges.get(expr.id)
        return list(values) if values is not None and len(values) <= MAX_ENUMERATED else None
    if isinstance(expr, ir.Neg):
        inner = _values(expr.operand, ranges)
        return None if inner is None else [-v for v in inner]
    if isinstance(expr, ir.BinOp):
        names = {n.id for n in walk(expr) if isinstance(n, ir.Name)}
        if len(names) > 1:
            return None  # keep the enumeration linear: one loop variable at a time
        left, right = _values(expr.left, ranges), _values(expr.right, ranges)
        if left is None or right is None:
            return None
        pairs = zip(left, right, strict=False) if len(left) == len(right) else ((a, b) for a in left for b in right)
        results = []
        for a, b in pairs:
            if expr.op in ("/", "%") and b == 0:
                return None
            results.append(
                {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0, "%": a % b if b else 0}[expr.op]
            )
        return results
    return None


def _digit_of(expr: object, axes: AxisSystem) -> Digit | None:
    """The digit an expression like `H % 128` or `R % 256 / 128` names (as a tile/roll argument)."""
    ops: list[tuple[str, int]] = []
    while isinstance(expr, ir.BinOp) and expr.op in ("/", "%") and isinstance(expr.right, ir.Int):
        ops.append((expr.op, expr.right.value))
        expr = expr.left
    if not isinstance(expr, ir.Name) or (expr.id not in axes.atoms and expr.id not in axes.composites):
        return None
    if any(operand <= 0 for _, operand in ops):
        return None
    return axes.digit(expr.id, list(reversed(ops)))
