"""The digit algebra of `digits.py` applied to the IR: E0204 on declared types and fetch stages (a
digit used twice, or two decompositions with no common refinement), E0205 on coverage holes (a
fetch or a DMA destination that drops a digit its source holds) and E0430 on reducer groups."""

from __future__ import annotations

import math
from collections.abc import Iterable

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.printer import print_mapping
from chiplore.simulator.dsl.walk import viewed_name, walk
from chiplore.simulator.toolchain.digits import AxisSystem, Digit, NoCommonRefinement, normalise, overlapping, refine
from chiplore.simulator.toolchain.env import Env, term_digit
from chiplore.simulator.toolchain.rules import emit
from chiplore.simulator.toolchain.streams import passes


def mapping_digits(mappings: Iterable[ir.Mapping], axes: AxisSystem) -> list[Digit] | None:
    """The normalised digits of the data terms, or None when one depends on an unknown size."""
    digits: list[Digit] = []
    for mapping in mappings:
        for term in mapping.terms:
            if term.kind != "axis":
                continue
            digit = term_digit(term, axes)
            if digit is None:
                return None
            digits.append(digit)
    return normalise(digits, axes)


def check_type_digits(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for node in walk(root):
        if isinstance(node, ir.DevType):
            mappings = [f.mapping for f in env.fields(node.layout).values() if isinstance(f, ir.MapField)]
        elif isinstance(node, ir.HbmType):
            mappings = [node.mapping]
        else:
            continue
        digits = mapping_digits(mappings, env.axes)
        twice = overlapping(digits) if digits is not None else None
        if twice is not None:
            first, second = twice
            why = (f"{first} is used twice: the axis, or a composite axis that holds it, appears twice in one mapping"
                   if str(first) == str(second) else "a digit is used twice")  # fmt: skip
            out += emit("0204", version, f"digits of {first.axis} in {first} and {second} have no common refinement "
                        f"({why})", node.span)  # fmt: skip
    return out


def check_atom_cuts(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    """E0204: a digit of a composite axis must be made of whole digits of its atoms (`Qs / 256` is
    `[Ns, Gs]`; `Qs / 320` splits no atom evenly and means nothing in the hardware's index space)."""
    out: list[Diagnostic] = []
    for node in walk(root):
        if not isinstance(node, ir.Term) or node.kind != "axis" or node.axis not in env.axes.composites:
            continue
        digit = term_digit(node, env.axes)
        if digit is not None and digit.size > 1 and env.axes.to_atoms(digit) == [digit]:
            out += emit("0204", version, f"{digit} cuts an atom of {digit.axis} "
                        f"({', '.join(env.axes.composites[digit.axis])}): it has no common refinement with them",
                        node.span)  # fmt: skip
    return out


def check_fetch_digits(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """fetch(time, packet) must refactor the source's elem digits."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        fetch = next((s for s in stream.stages if s.name == "fetch"), None)
        tensor = env.viewed(stream.source)
        if fetch is None or not isinstance(tensor, ir.DevType):
            continue
        elem = env.fields(tensor.layout).get("elem")
        stream_maps = [
            a.value.mapping for a in fetch.args if a.name in ("time", "packet") and isinstance(a.value, ir.Bracket)
        ]
        if not isinstance(elem, ir.MapField) or len(stream_maps) != 2:
            continue
        held, fetched = mapping_digits([elem.mapping], env.axes), mapping_digits(stream_maps, env.axes)
        if held is None or fetched is None:
            continue
        held = _without(held, _fixed(stream.source, env), env.axes)
        twice = overlapping(fetched)
        try:
            if twice is not None:
                raise NoCommonRefinement(twice[0].axis, *twice)
            hole = _uncovered(held, fetched)
        except NoCommonRefinement as error:
            out += emit("0204", version, str(error), fetch.name_span or fetch.span)
            continue
        if hole is not None:
            streamed = ir.Mapping(terms=tuple(t for m in stream_maps for t in m.terms))
            out += emit("0205", version, f"{hole.axis} is not fully covered by fetch {print_mapping(streamed)}: digit "
                        f"{hole} of the source's elem is missing", fetch.name_span or fetch.span)  # fmt: skip
    return out


def check_dma_coverage(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0205: a DMA into DM must give every digit of its source a place, or data is silently dropped."""
    out: list[Diagnostic] = []
    bound = {id(node.value): node.name for node in walk(body) if isinstance(node, ir.Let)}
    for node in walk(body):
        if not isinstance(node, ir.Method) or node.name not in ("dma", "dma_into"):
            continue
        if node.name == "dma":
            name = bound.get(id(node))
            target = env.tensor(name) if name is not None else None
            target_expr: ir.Expr | None = None
        else:
            target_expr = next((a.value for a in node.args if a.name is None), None)
            target = env.viewed(target_expr)
        if not isinstance(target, ir.DevType) or _renamed(node.receiver) or _renamed(target_expr):
            continue
        held = _tensor_digits(env.viewed(node.receiver), env)
        placed = _tensor_digits(target, env)
        if held is None or placed is None:
            continue
        held = _without(held, _fixed(node.receiver, env), env.axes)
        placed = _without(placed, _fixed(target_expr, env), env.axes)
        try:
            hole = _uncovered(held, placed)
        except NoCommonRefinement:
            continue  # E0204's business
        if hole is not None:
            out += emit("0205", version, f"{hole.axis} is not fully covered by the DMA's destination: digit {hole} "
                        "of the source has no place in it", node.name_span or node.span)  # fmt: skip
    return out


def check_dma_types(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0324: a DMA copies bytes, so its source and destination hold the same dtype (a bf16 tensor
    DMA'd into an f32 one would fill half of it with bit patterns)."""
    out: list[Diagnostic] = []
    bound = {id(node.value): node.name for node in walk(body) if isinstance(node, ir.Let)}
    for node in walk(body):
        if not isinstance(node, ir.Method) or node.name not in ("dma", "dma_into"):
            continue
        if node.name == "dma":
            name = bound.get(id(node))
            target = env.tensor(name) if name is not None else None
        else:
            target = env.viewed(next((a.value for a in node.args if a.name is None), None))
        source = env.viewed(node.receiver)
        if source is None or target is None or source.dtype == target.dtype:
            continue
        if source.dtype not in ir.DTYPES or target.dtype not in ir.DTYPES:
            continue  # an unknown dtype is E0102's
        out += emit("0324", version, f"a DMA copies bytes: it cannot turn {source.dtype} into {target.dtype}; convert "
                    "in a Tensor-Unit pass (a cast, widen, narrow or decode)", node.name_span or node.span)  # fmt: skip
    return out


def check_trf_operands(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0404: a contraction's TRF operand must hold every digit it reduces, and hold the digits of the
    axes it shares with the stream on the same clusters and slices as the stream's source."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        source = env.viewed(stream.source)
        for stage in stream.stages:
            if stage.name != "contract" or not isinstance(source, ir.DevType):
                continue
            operand, reduce = stage.kwarg("trf"), stage.kwarg("reduce")
            trf = env.viewed(operand)
            held = _tensor_digits(trf, env)
            if not isinstance(trf, ir.DevType) or held is None:
                continue
            name = viewed_name(operand) or "operand"
            where = stage.name_span or stage.span
            reduced = mapping_digits([reduce.mapping], env.axes) if isinstance(reduce, ir.Bracket) else []
            # A tile of the source pins part of a digit: the stream reduces only what the view keeps.
            streamed = _without(_tensor_digits(source, env) or [], _fixed(stream.source, env), env.axes)
            try:
                hole = _uncovered(_parts_inside(streamed, reduced or []), held)
                if hole is None:
                    hole = _misplaced(source, trf, env)
            except NoCommonRefinement:
                continue  # E0204's business
            if hole is not None:
                out += emit("0404", version, f"TRF operand {name} does not hold digit {hole} where the stream needs it",
                            where)  # fmt: skip
    return out


def check_vrf_operands(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0404: a vector op's VRF operand must hold every value of a digit that the stream carries. An
    operand that holds a tile's extent (`A % 8 = 4`) meets the stream by position within the tile, so
    it serves a stream over four rows of A, not one over all eight (those reads fall outside it).
    Digits the operand does not hold are broadcast, and what a reduction removed is not needed."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        source = env.viewed(stream.source)
        if not isinstance(source, ir.DevType):
            continue
        carried = _without(_tensor_digits(source, env) or [], _fixed(stream.source, env), env.axes)
        for stage in stream.stages:
            if stage.name == "contract":
                reduce = stage.kwarg("reduce")
                reduced = mapping_digits([reduce.mapping], env.axes) if isinstance(reduce, ir.Bracket) else None
                if reduced is None:
                    break
                carried = [d for d in carried if not any(d.axis == r.axis for r in reduced)]
            elif stage.name in ("reduce_slices", "allreduce_slices", "reduce_clusters"):
                break  # what the reducer leaves is checked no further (never over-strict)
            elif stage.name == "vector":
                for arg in stage.args:
                    call = arg.value if isinstance(arg.value, ir.Call) else None
                    if call is None:
                        continue
                    if call.func in ("sum_time", "sum_packet", "sum_all", "max_all"):
                        break
                    hole = _vrf_hole(call, carried, env)
                    if hole is not None:
                        name, digit = hole
                        message = (f"VRF operand {name} does not hold digit {digit} where the stream needs it: it "
                                   "holds a tile's extent, and the stream reads past it")  # fmt: skip
                        out += emit("0404", version, message, call.span)
                    elif (away := _read_past(call, _tiled_away(stream.source, env), env)) is not None:
                        name, digit = away
                        message = (f"VRF operand {name} does not hold digit {digit} where the stream needs it: the "
                                   f"stream reads a tile of {digit.axis} away from its start, and an operand that "
                                   "holds whole digits is read at the stream's own indices, past its values; give it "
                                   "the tile's extent (`A = n`), read by position within the tile")  # fmt: skip
                        out += emit("0404", version, message, call.span)
                else:
                    continue
                break
    return out


def _vrf_hole(call: ir.Call, carried: list[Digit], env: Env) -> tuple[str, Digit] | None:
    """The part of a restricted digit (`A % 8 = 4` holds A % 4, not A % 8 / 4) the operand lacks and
    the stream carries. Digits the operand does not hold at all are broadcast (a scalar per slice)."""
    operand = next((a.value for a in call.args if a.name == "vrf"), None)
    vrf = env.viewed(operand)
    if not isinstance(vrf, ir.DevType) or isinstance(operand, ir.Method):
        return None
    for field in env.fields(vrf.layout).values():
        if not isinstance(field, ir.MapField):
            continue
        for term in field.mapping.terms:
            digit = term_digit(term, env.axes) if term.kind == "axis" else None
            if digit is None or term.restrict is None or not 0 < term.restrict < digit.size:
                continue
            if digit.size % term.restrict:
                continue  # a ragged extent has no digit to name; the executor masks it
            upper = Digit(digit.axis, digit.stride * term.restrict, digit.size // term.restrict)
            lacking = normalise([upper], env.axes)
            for piece in lacking:
                if any(_overlaps(piece, c) for c in carried):
                    return viewed_name(operand) or "operand", piece
    return None


def _tiled_away(expr: ir.Expr | None, env: Env) -> list[Digit]:
    """Digits a view's `tile(d, offset, n)` pins where the offset is not 0 (a loop's `i * n`, or a
    number): the stream's indices there have that digit at some value other than 0."""
    away: list[Digit] = []
    while isinstance(expr, ir.Method):
        offset = expr.args[1].value if expr.name == "tile" and len(expr.args) == 3 else None
        if offset is not None and not (isinstance(offset, ir.Int) and offset.value == 0):
            pinned = _tile_pin(expr, env)
            away += [pinned] if pinned is not None else []
        expr = expr.receiver
    return away


def _read_past(call: ir.Call, away: list[Digit], env: Env) -> tuple[str, Digit] | None:
    """A digit a tile pins away from 0 that the call's VRF operand lacks while it holds a finer digit of
    that axis: the operand's values then cover the axis only up to that digit's limit, the executor
    reads it at the stream's indices, past them, and every value there is NaN. An operand holding none
    of the axis, or only coarser digits of it (a per-slice scalar over a slice's columns), is broadcast
    over the pinned digit and reads right."""
    operand = next((a.value for a in call.args if a.name == "vrf"), None)
    vrf = env.viewed(operand)
    if not away or not isinstance(vrf, ir.DevType) or isinstance(operand, ir.Method):
        return None
    held = _tensor_digits(vrf, env)
    if held is None or _restricted(vrf, env):
        return None  # an operand holding a tile's extent (`A % 8 = 4`) is read by position within the tile
    for digit in away:
        finer = any(h.axis == digit.axis and h.limit <= digit.stride for h in held)
        if finer and not any(_overlaps(digit, h) for h in held):
            return viewed_name(operand) or "operand", digit
    return None


def _restricted(tensor: ir.DevType, env: Env) -> bool:
    """Whether a mapping term of the tensor holds only part of its digit (`A % 8 = 4`)."""
    for field in env.fields(tensor.layout).values():
        if isinstance(field, ir.MapField) and any(t.restrict is not None for t in field.mapping.terms):
            return True
    return False


def _overlaps(first: Digit, second: Digit) -> bool:
    return first.axis == second.axis and first.stride < second.limit and second.stride < first.limit


def _misplaced(source: ir.DevType, trf: ir.DevType, env: Env) -> Digit | None:
    """A cluster/slice digit of a shared axis that one side places and the other does not."""
    axes_of_trf = {d.axis for d in _tensor_digits(trf, env) or []}
    axes_of_source = {d.axis for d in _tensor_digits(source, env) or []}
    stream_side = _tensor_digits(source, env, ("cluster", "slice")) or []
    trf_side = _tensor_digits(trf, env, ("cluster", "slice")) or []
    needed = [d for d in stream_side if d.axis in axes_of_trf]
    offered = [d for d in trf_side if d.axis in axes_of_source]
    hole = _uncovered(needed, trf_side) or _uncovered(offered, stream_side)
    if hole is not None:
        return hole
    # Held on both sides is not enough: a shared digit must sit at the same slice (cluster) positions.
    for name in ("cluster", "slice"):
        stream_steps, trf_steps = _atom_steps(source, name, env), _atom_steps(trf, name, env)
        if stream_steps is None or trf_steps is None:
            continue
        for digit, step in stream_steps.items():
            if digit.axis in axes_of_trf and digit in trf_steps and trf_steps[digit] != step:
                return digit
    return None


def _atom_steps(tensor: ir.DevType, name: str, env: Env) -> dict[Digit, int] | None:
    """Positions one value of each atom digit moves along a field (a slice or cluster mapping)."""
    field = env.fields(tensor.layout).get(name)
    if not isinstance(field, ir.MapField):
        return None
    positions = [env.term_positions(t) for t in field.mapping.terms]
    if any(p is None for p in positions):
        return None
    steps: dict[Digit, int] = {}
    for index, term in enumerate(field.mapping.terms):
        inner = math.prod(p for p in positions[index + 1 :] if p is not None)
        digit = term_digit(term, env.axes) if term.kind == "axis" else None
        if digit is None:
            continue
        local = 1
        for atom in reversed(env.axes.to_atoms(digit)):
            steps[atom] = inner * local
            local *= atom.size
    return steps


def _tensor_digits(tensor: ir.HbmType | ir.DevType | None, env: Env,
                   names: tuple[str, ...] = ("cluster", "slice", "lane", "elem")) -> list[Digit] | None:  # fmt: skip
    """The digits a tensor type holds; a restricted term `d = k` holds only the lowest k values of d."""
    if isinstance(tensor, ir.HbmType):
        mappings = [tensor.mapping]
    elif isinstance(tensor, ir.DevType):
        fields = env.fields(tensor.layout)
        mappings = [f.mapping for n, f in fields.items() if isinstance(f, ir.MapField) and n in names]
    else:
        return None
    digits: list[Digit] = []
    for term in (t for m in mappings for t in m.terms if t.kind == "axis"):
        digit = term_digit(term, env.axes)
        if digit is None:
            return None
        if term.restrict is not None and 0 < term.restrict < digit.size and digit.size % term.restrict == 0:
            digit = Digit(digit.axis, digit.stride, term.restrict)
        digits.append(digit)
    return normalise(digits, env.axes)


def _fixed(expr: ir.Expr | None, env: Env) -> list[Digit]:
    """Digits a view pins to one value: `at(A = p)` pins A, and `tile(d, i * n, n)` pins the part of d
    above its lowest n values (the view keeps `d % n`)."""
    fixed: list[Digit] = []
    while isinstance(expr, ir.Method):
        if expr.name == "tile":
            pinned = _tile_pin(expr, env)
            fixed += [pinned] if pinned is not None else []
        elif expr.name == "at":
            fixed += [env.axes.digit(a.name, []) for a in expr.args if a.name in env.axes.atoms or
                      a.name in env.axes.composites]  # fmt: skip
        expr = expr.receiver
    return fixed


def _tile_pin(tile: ir.Method, env: Env) -> Digit | None:
    """The part of d above its lowest n values that `tile(d, offset, n)` pins (None where it pins none)."""
    args = [a.value for a in tile.args]
    if len(args) != 3 or not isinstance(args[2], ir.Int) or args[2].value <= 0:
        return None
    digit, length = _digit_expr(args[0], env), args[2].value
    if digit is None or digit.size % length or digit.size <= length:
        return None
    return Digit(digit.axis, digit.stride * length, digit.size // length)


def _digit_expr(expr: ir.Expr, env: Env) -> Digit | None:
    """`A`, `A / d`, `A % m / d` written as an expression (a tile's first argument)."""
    ops: list[tuple[str, int]] = []
    while isinstance(expr, ir.BinOp) and expr.op in ("/", "%") and isinstance(expr.right, ir.Int):
        if expr.right.value <= 0:
            return None
        ops.append((expr.op, expr.right.value))
        expr = expr.left
    if not isinstance(expr, ir.Name) or (expr.id not in env.axes.atoms and expr.id not in env.axes.composites):
        return None
    return env.axes.digit(expr.id, list(reversed(ops)))


def _renamed(expr: ir.Expr | None) -> bool:
    while isinstance(expr, ir.Method):
        if expr.name == "rename":
            return True
        expr = expr.receiver
    return False


def _without(digits: list[Digit], fixed: list[Digit], axes: AxisSystem) -> list[Digit]:
    """`digits` less the parts of them that `fixed` covers."""
    if not fixed:
        return digits
    fixed_atoms = normalise(fixed, axes)
    try:
        pieces, _ = refine(digits, fixed_atoms)
    except NoCommonRefinement:
        return digits
    return [d for d in pieces if not any(d.within(f) for f in fixed_atoms)]


def _uncovered(held: list[Digit], other: list[Digit]) -> Digit | None:
    """A piece of `held` that `other` does not hold (raises NoCommonRefinement when they clash)."""
    pieces, _ = refine(held, other)
    return next((d for d in pieces if not any(d.within(o) for o in other)), None)


def _parts_inside(digits: list[Digit], bounds: list[Digit]) -> list[Digit]:
    """The parts of `digits` inside some digit of `bounds` (`reduce = [Qs]` reduces what the stream holds)."""
    if not digits or not bounds:
        return []
    pieces, _ = refine(digits, bounds)
    return [d for d in pieces if any(d.within(b) for b in bounds)]


def check_reducer_groups(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0430: a reduce_slices group must be the innermost live digits of the source's slice mapping."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        tensor = env.viewed(stream.source)
        if not isinstance(tensor, ir.DevType):
            continue
        slice_field = env.fields(tensor.layout).get("slice")
        if not isinstance(slice_field, ir.MapField):
            continue
        live = [t for t in slice_field.mapping.terms if t.kind == "axis"]
        for stage in stream.stages:
            if stage.name not in ("reduce_slices", "allreduce_slices"):
                continue
            group = stage.kwarg("group")
            if not isinstance(group, ir.Bracket):
                continue
            wanted = mapping_digits([group.mapping], env.axes)
            innermost = mapping_digits([ir.Mapping(terms=tuple(live[-len(group.mapping.terms) :]))], env.axes)
            if wanted is None or innermost is None or not group.mapping.terms:
                continue
            if wanted != innermost:
                out += emit("0430", version, f"reduce_slices group {print_mapping(group.mapping)} must be the "
                            f"innermost live slice digits of {print_mapping(slice_field.mapping)}",
                            stage.name_span or stage.span)  # fmt: skip
    return out
