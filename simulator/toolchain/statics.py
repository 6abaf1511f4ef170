"""Rules checked on declarations and calls without lowering: mapping sizes (E0201), tile extents
(E0207), DMA packet and engine arguments (E0320, E0321, E0323), def-use order (E0501) and outputs
that nothing writes (E0801)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from chiplore.simulator._truth import chip_shape
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.printer import print_mapping
from chiplore.simulator.dsl.walk import viewed_name, walk
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.env import Env
from chiplore.simulator.toolchain.placement import LoweringError, range_restrictions
from chiplore.simulator.toolchain.rules import emit

MAX_DMA_PACKET_BYTES = 4096
DATA_ONLY_FIELDS = ("elem", "time", "packet")


def check_mapping_sizes(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    """E0201 on every device type: as many cluster and slice positions as the chip has (2 and 256 on
    the default), no more lanes than a slice has (8), no rep/at in data digits."""
    shape = chip_shape()
    expected = {"cluster": shape.clusters, "slice": shape.slices}
    out: list[Diagnostic] = []
    for node in walk(root):
        if not isinstance(node, ir.DevType):
            continue
        for name, field in env.fields(node.layout).items():
            if not isinstance(field, ir.MapField):
                continue
            positions = env.positions(field.mapping)
            text = print_mapping(field.mapping)
            if name in expected and positions is not None and positions != expected[name]:
                out += emit("0201", version, f"{name} mapping {text} has {positions} positions, "
                            f"expected {expected[name]}", field.span or node.span)  # fmt: skip
            elif name == "lane" and positions is not None and positions > shape.lanes:
                out += emit("0201", version, f"lane mapping {text} has {positions} positions, expected at most "
                            f"{shape.lanes}", field.span or node.span)  # fmt: skip
            elif name in DATA_ONLY_FIELDS and any(t.kind in ("rep", "at") for t in field.mapping.terms):
                out += emit("0201", version, f"{name} mapping {text} has replicated or placed positions, expected "
                            "data digits only", field.span or node.span)  # fmt: skip
    return out


def check_digit_operands(root: ir.Node, version: str) -> list[Diagnostic]:
    """E0201: a digit divides or takes the remainder by a positive number (`R / 0` has no positions),
    in a mapping term and in a view's digit (`t.tile(R / 0, 0, 1)`)."""
    out: list[Diagnostic] = []
    for node in walk(root):
        if isinstance(node, ir.Term) and node.kind == "axis":
            bad = [operand for _, operand in node.ops if isinstance(operand, int) and operand <= 0]
            if bad:
                text = print_mapping(ir.Mapping(terms=(node,)))
                out += emit("0201", version, f"mapping term {text} divides by {bad[0]}: a digit's operands must be "
                            "positive", node.span)  # fmt: skip
        elif isinstance(node, ir.Method) and node.name in ("tile", "roll") and node.args:
            expr = node.args[0].value
            while isinstance(expr, ir.BinOp) and expr.op in ("/", "%"):
                if isinstance(expr.right, ir.Int) and expr.right.value <= 0:
                    out += emit("0201", version, f"the digit of {node.name} divides by {expr.right.value}: a digit's "
                                "operands must be positive", node.args[0].span or node.span)  # fmt: skip
                    break
                expr = expr.left
    return out


def check_pads(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    """E0201: a term padded to fewer positions than it has (`K / 128 # 8` where K / 128 has 9 values)
    would put its last values on positions its mapping does not have (slices past the cluster's)."""
    out: list[Diagnostic] = []
    for node in walk(root):
        if not (isinstance(node, ir.Term) and node.pad is not None):
            continue
        held = env.term_positions(node.model_copy(update={"pad": None}))
        if held is not None and held > node.pad:
            text = print_mapping(ir.Mapping(terms=(node,)))
            out += emit("0201", version, f"mapping term {text} has {held} positions, more than the {node.pad} it is "
                        f"padded to: a pad holds its term (# {held} or more, or split the digit)",
                        node.span)  # fmt: skip
    return out


def check_dma_arguments(root: ir.Node, version: str) -> list[Diagnostic]:
    engines_of_chip = range(chip_shape().engines)
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
                    or any(e not in engines_of_chip for e in engines)
                ):
                    text = print_mapping(arg.value.mapping)
                    out += emit("0323", version, f"engine list {text} is empty, repeats or leaves "
                                f"0..{engines_of_chip[-1]}", arg.span)  # fmt: skip
    return out


def check_def_use(params: Iterable[object], body: ir.Block, version: str) -> list[Diagnostic]:
    """E0501: a name bound by `let` (or a loop) is used before the statement that binds it, or after
    the loop whose body binds it (a loop's variable and its lets live in the loop's body only)."""
    bound_later = {node.name for node in walk(body) if isinstance(node, ir.Let)}
    bound_later |= {node.var for node in walk(body) if isinstance(node, ir.For)}
    defined = {p.name for p in params if hasattr(p, "name")}  # type: ignore[attr-defined]
    return list(_walk_block(body, set(defined), bound_later, version))


def _walk_block(block: ir.Block, defined: set[str], bound: set[str], version: str) -> Iterable[Diagnostic]:
    for statement in block.stmts:
        if isinstance(statement, ir.For):
            yield from _uses(statement.start, defined, bound, version)
            yield from _uses(statement.stop, defined, bound, version)
            yield from _walk_block(statement.body, defined | {statement.var}, bound, version)
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
            yield from emit("0501", version, f"'{node.id}' is used before it is defined (a loop's variable and the "
                            "lets in its body are defined inside the loop only)", node.span)  # fmt: skip


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
        if node.name == "rename":
            out += _rename_extent(node, loop_ranges, axes, version)
            continue
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
            if min(lengths) <= 0:
                out += emit("0207", version, f"tile {digit}[{low}..{low + min(lengths)}) is empty: a tile takes at "
                            "least one value", node.span)  # fmt: skip
            elif low < 0 or high > digit.size:
                out += emit("0207", version, f"tile {digit}[{low}..{high}) exceeds extent {digit.size}", node.span)
            elif digit.axis in axes.composites:
                out += _composite_tile(digit, starts, lengths, axes, version, node.span)
        elif node.name == "roll":
            shifts = _values(node.args[1].value, loop_ranges)
            if shifts and any(not 0 <= k < digit.size for k in shifts):
                out += emit("0207", version, f"tile {digit}[{max(shifts)}..{max(shifts) + 1}) exceeds extent "
                            f"{digit.size}", node.span)  # fmt: skip
    return out


def _rename_extent(node: ir.Method, ranges: dict[str, range], axes: AxisSystem, version: str) -> list[Diagnostic]:
    """E0207: `t.rename(A, B, offset)` sees A as [offset, offset + |A|) of B, which must lie inside B
    (and, for a composite B, be whole values of its atoms: E0204)."""
    positional = [a.value for a in node.args if a.name is None]
    if len(positional) != 3:
        return []
    source, target = _digit_of(positional[0], axes), _digit_of(positional[1], axes)
    offsets = _values(positional[2], ranges)
    if source is None or target is None or not offsets:
        return []
    low, high = min(offsets), max(offsets) + source.size
    if low < 0 or high > target.size:
        return emit("0207", version, f"rename of {source.axis} into {target.axis}[{low}..{high}) exceeds extent "
                    f"{target.size}", node.span)  # fmt: skip
    if target.axis in axes.composites:
        return _composite_tile(target, offsets, [source.size], axes, version, node.span)
    return []


def _composite_tile(
    digit: Digit, starts: list[int], lengths: list[int], axes: AxisSystem, version: str, span: ir.Span | None
) -> list[Diagnostic]:
    """E0204: a tile of a composite axis must be whole values of its atoms' digits (a range that
    wraps an atom, `Qs[511..1023)`, names no place in the hardware's index space)."""
    for start in starts:
        for length in lengths:
            if length <= 0:
                continue
            try:
                range_restrictions(digit, start, start + length, axes, {}, move=False)
            except LoweringError as error:
                atoms = ", ".join(axes.composites[digit.axis])
                message = (f"tile {digit}[{start}..{start + length}) has no common refinement with the atoms of "
                           f"{digit.axis} ({atoms}): {error}")  # fmt: skip
                return emit("0204", version, message, span)
    return []


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
    """Every value an integer expression takes over the loop variables' ranges (every combination of
    the ones it names, up to MAX_ENUMERATED); None if unknown."""
    names = sorted({n.id for n in walk(expr) if isinstance(n, ir.Name)}) if isinstance(expr, ir.Node) else []
    if any(name not in ranges for name in names):
        return None
    spans = [ranges[name] for name in names]
    if math.prod(len(r) for r in spans) > MAX_ENUMERATED:
        return None
    results = []
    for values in itertools.product(*spans):
        value = _evaluate(expr, dict(zip(names, values, strict=True)))
        if value is None:
            return None
        results.append(value)
    return results


def _evaluate(expr: object, bound: dict[str, int]) -> int | None:
    if isinstance(expr, ir.Int):
        return expr.value
    if isinstance(expr, ir.Name):
        return bound.get(expr.id)
    if isinstance(expr, ir.Neg):
        inner = _evaluate(expr.operand, bound)
        return None if inner is None else -inner
    if isinstance(expr, ir.BinOp):
        a, b = _evaluate(expr.left, bound), _evaluate(expr.right, bound)
        if a is None or b is None or (expr.op in ("/", "%") and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0, "%": a % b if b else 0}[expr.op]
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
