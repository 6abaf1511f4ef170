"""Element-wise programs: y = chain(x [, s]) over a random placement of [A, B], optionally in chunks
of a tiled digit, with a VRF operand that is whole, per row, per column or a chunk's tile, and a
DM -> DM relayout before the store. Whatever the placement, y means the same numpy expression."""

from __future__ import annotations

import random

import numpy as np

from chiplore.simulator.execute.difftest.layouts import Digit, Placement, cut, fetch, packet_size, place
from chiplore.simulator.execute.difftest.program import Generated, dense, engines, header, narrow, stored, widen
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.values import Inputs, Outputs

CONSTANTS = ("0.5", "2.0", "1.5", "-1.0", "0.25", "3.0")
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
UNARY = {"square": np.square, "neg": np.negative}
OPERANDS = ("none", "full", "row", "col")


def generate(rng: random.Random, seed: int, version: str) -> Generated | None:
    a, b = 1 << rng.randint(1, 5), 1 << rng.randint(3, 7)
    dx = rng.choice(["bf16", "f32", "f8e4m3"])
    dy = rng.choice(["bf16", "f32"])
    digits = cut(rng, "A", a, rng.randint(1, 3)) + cut(rng, "B", b, rng.randint(1, 3))
    px = place(rng, digits, dx, narrowest=dy)
    if px is None:
        return None
    operand = rng.choice(OPERANDS)
    ops = _chain(rng, operand != "none")
    copy = not ops and dx == dy  # a plain copy pass: fetch and commit
    if not ops and not copy:
        ops = [("mul", rng.choice(CONSTANTS))]
    features = [f"x:{dx}", f"y:{dy}", f"operand:{operand}"]
    tiled = _tiled_digit(rng, px)
    chunk = 0
    if tiled is not None:
        chunk = tiled.size >> rng.randint(1, (tiled.size.bit_length() - 1))
        features.append("chunked")
    axes_of_s = {"full": {"A", "B"}, "row": {"A"}, "col": {"B"}, "none": set()}[operand]
    ps = px.keeping(axes_of_s)
    tile_vrf = tiled is not None and tiled in ps.elem[:-1] and rng.random() < 0.6
    if tile_vrf:
        features.append("vrf-tile")
    relayout = rng.random() < 0.3
    py = place(rng, digits, dy, narrowest=dy) if relayout else None
    if relayout and py is None:
        return None
    if relayout:
        features.append("relayout")
    dest_per_chunk = tiled is not None and rng.random() < 0.3
    if dest_per_chunk:
        features.append("chunk-store")
    rolled = _rolled_digit(rng, px) if tiled is None else None
    if rolled is not None:
        features.append("roll")
    pd = _reordered(rng, px) if tiled is None and rng.random() < 0.2 else px  # the pass's destination
    if pd is not px:
        features.append("reordered-commit")
    composite = rng.random() < 0.2
    if composite:
        features.append("composite")
    helper = tiled is None and rolled is None and rng.random() < 0.2
    if helper:
        features.append("fn")
    padded = rng.random() < 0.15 and len(px.elem) > 1
    pad = {px.elem[0]: px.elem[0].size * 2} if padded else {}
    if padded:
        features.append("padding")

    s_shape = {"full": "[A, B]", "row": "[A]", "col": "[B]"}.get(operand)
    both = "[C]" if composite else "[A, B]"
    s_shape = both if operand == "full" else s_shape
    ds = "bf16" if not ps.elem or ps.elem[-1].size >= 4 else "f32"  # a fetch packet holds at least 8 B
    params = [f"x: &hbm<{dx}>{both}"] + ([f"s: &hbm<{ds}>{s_shape}"] if s_shape else []) + [f"y: &mut hbm<{dy}>{both}"]
    axes = {"A": a, "B": b}
    lines = [header(version, axes).replace(" }\n", ", C = (A, B) }\n") if composite else header(version, axes)]
    chain = _stages(rng, version, dx, dy, ops)
    packet = packet_size(rng, px.elem[-1], (dx, dy))
    if helper:
        vrf_param = f", sv: vrf<f32>{{{ps.fields()}}}" if operand != "none" else ""
        lines += [f"fn apply(t: dm<{dx}>{{{px.fields()}}}{vrf_param}) -> dm<{dy}>{{{pd.fields()}}} {{",
                  f"    main(t).{fetch(px, packet)}{chain}.commit()", "}"]  # fmt: skip
    lines.append(f"kernel map({', '.join(params)}) {{")
    lines.append(f"    let xd: dm<{dx}>{{{_padded(px, pad)}}} = x.dma(engines = {engines(rng.choice)});")
    if operand != "none" and not tile_vrf:
        lines += _vrf(rng, version, ps, "s", {}, ds)
    if helper:
        lines.append(f"    let yd = apply(xd{', sv' if operand != 'none' else ''});")
    elif tiled is None:
        view = f"xd.roll({rolled[0].text()}, {rolled[1]})" if rolled is not None else "xd"
        lines.append(f"    let yd: dm<{dy}>{{{pd.fields()}}} = main({view}).{fetch(px, packet)}{chain}.commit();")
    else:
        restrict = {tiled: chunk}
        if not dest_per_chunk:
            lines.append(f"    let mut yd: dm<{dy}>{{{px.fields()}}} = dm::empty();")
        lines.append(f"    for c in 0..{tiled.size // chunk} {{")
        if tile_vrf:
            view = f"s.tile({tiled.text()}, c * {chunk}, {chunk})"
            lines += ["    " + line for line in _vrf(rng, version, ps, view, restrict, ds)]
        stream = f"main(xd.tile({tiled.text()}, c * {chunk}, {chunk})).{fetch(px, packet, restrict)}{chain}"
        if dest_per_chunk:
            y_tile = f"y.tile({tiled.text()}, c * {chunk}, {chunk})"
            lines.append(f"        let t: dm<{dy}>{{{px.fields(restrict)}}} = {stream}.commit();")
            lines.append(f"        t.dma_into({y_tile}, engines = {engines(rng.choice)});")
        else:
            lines.append(f"        {stream}.commit_into(yd.tile({tiled.text()}, c * {chunk}, {chunk}));")
        lines.append("    }")
    if not dest_per_chunk:
        if py is not None:
            lines.append(f"    let yr: dm<{dy}>{{{py.fields()}}} = yd.dma(engines = {engines(rng.choice)});")
            lines.append(f"    yr.dma_into(y, engines = {engines(rng.choice)});")
        else:
            lines.append(f"    yd.dma_into(y, engines = {engines(rng.choice)});")
    lines.append("}")

    inputs = {"x": _x_recipe(dx)}
    if s_shape:
        inputs["s"] = {"dist": {"kind": "uniform", "low": -2.0, "high": 2.0}}
    recipe = FixtureRecipe.model_validate({"inputs": inputs, "sets": ["g0"]})

    def meaning(given: Inputs) -> Outputs:
        x = dense(given["x"]).astype(np.float32).reshape(a, b)
        if rolled is not None:
            x = _roll(x, *rolled)
        s = _broadcast(dense(given["s"]), operand, a, b) if s_shape else None
        return {"y": stored(_apply(ops, x, s), dy)}

    source = "\n".join(lines) + "\n"
    return Generated("map", seed, version, source, recipe, meaning, tuple(features))


def _chain(rng: random.Random, with_operand: bool) -> list[tuple[str, str]]:
    """Up to four vector ops: (name, operand) with operand a constant, "vrf", "stash" or ""."""
    ops: list[tuple[str, str]] = []
    for _ in range(rng.randint(0 if not with_operand else 1, 4)):
        roll = rng.random()
        if roll < 0.45:
            ops.append((rng.choice(list(BINARY)), rng.choice(CONSTANTS)))
        elif roll < 0.65 and with_operand:
            ops.append((rng.choice(["add", "mul", "sub", "max"]), "vrf"))
        elif roll < 0.85:
            ops.append((rng.choice(list(UNARY)), ""))
        elif not any(op == "stash" for op, _ in ops):
            ops += [("stash", ""), (rng.choice(["add", "mul"]), rng.choice(CONSTANTS)), ("mul", "stash")]
    if with_operand and not any(arg == "vrf" for _, arg in ops):
        ops.append(("mul", "vrf"))
    return ops[:6]


def _stages(rng: random.Random, version: str, dx: str, dy: str, ops: list[tuple[str, str]]) -> str:
    if not ops:
        return ""
    text = f".{widen(version)}(f32)" if dx != "f32" else ""
    calls = []
    for name, arg in ops:
        if arg == "vrf":
            calls.append(f"{name}(vrf = sv)")
        elif arg == "stash":
            calls.append(f"{name}(stash)")
        else:
            calls.append(f"{name}({arg})")
    text += f".vector({', '.join(calls)})"
    if dy != "f32":
        text += f".{narrow(version)}({dy})"
    return text


def _vrf(rng: random.Random, version: str, ps: Placement, source: str, restrict: dict[Digit, int],
         dtype: str) -> list[str]:  # fmt: skip
    """The operand s: DMA into DM on the stream's slices, then a sub pass into the VRF (f32)."""
    kept = {d: k for d, k in restrict.items() if d in ps.elem}
    fields = ps.fields(kept)
    packet = packet_size(rng, ps.elem[-1], (dtype, "f32"), most=32) if ps.elem else 8
    up = f".{widen(version)}(f32)" if dtype != "f32" else ""
    return [
        f"    let sd: dm<{dtype}>{{{fields}}} = {source}.dma(engines = {engines(rng.choice)});",
        f"    let sv: vrf<f32>{{{fields}}} = sub(sd).{fetch(ps, packet, kept)}{up}.to_vrf();",
    ]


def _rolled_digit(rng: random.Random, px: Placement) -> tuple[Digit, int] | None:
    """A digit of the source to stream rotated (`xd.roll(d, k)`), or None."""
    candidates = [d for d in px.digits() if d.size >= 2]
    if not candidates or rng.random() < 0.85:
        return None
    digit = rng.choice(candidates)
    return digit, rng.randint(1, digit.size - 1)


def _roll(x: np.ndarray, digit: Digit, amount: int) -> np.ndarray:
    """x read through `roll(digit, amount)`: index i reads i with the digit's value moved by amount."""
    axis = 0 if digit.axis == "A" else 1
    index = np.arange(x.shape[axis])
    value = (index // digit.stride) % digit.size
    source = index + (((value + amount) % digit.size) - value) * digit.stride
    return np.take(x, source, axis=axis)


def _reordered(rng: random.Random, px: Placement) -> Placement:
    """The same placement with the outer elem digits in another order (the packet's digit stays last)."""
    head = list(px.elem[:-1])
    if len(head) < 2:
        return px
    rng.shuffle(head)
    return Placement(list(px.cluster), list(px.slice), [*head, px.elem[-1]])


def _padded(px: Placement, pad: dict[Digit, int]) -> str:
    """The placement's fields with some elem digits padded (`A % 4 # 8`: positions 4..7 hold nothing)."""
    if not pad:
        return px.fields()
    terms = [f"{d.text()} # {pad[d]}" if d in pad else d.text() for d in px.elem]
    return f"{px.spatial_text()}, elem: [{', '.join(terms)}]"


def _tiled_digit(rng: random.Random, px: Placement) -> Digit | None:
    """An outer elem digit to walk in chunks (None: no loop)."""
    candidates = [d for d in px.elem[:-1] if d.size >= 2]
    if not candidates or rng.random() < 0.5:
        return None
    return rng.choice(candidates)


def _x_recipe(dtype: str) -> dict[str, object]:
    if dtype == "f8e4m3":
        return {"dist": {"kind": "f8_codes", "exponent_low": 5, "exponent_high": 8}}
    return {"dist": {"kind": "uniform", "low": -2.0, "high": 2.0}}


def _broadcast(values: np.ndarray, operand: str, a: int, b: int) -> np.ndarray:
    values = values.astype(np.float32)
    if operand == "row":
        return np.broadcast_to(values.reshape(a, 1), (a, b))
    if operand == "col":
        return np.broadcast_to(values.reshape(1, b), (a, b))
    return values.reshape(a, b)


def _apply(ops: list[tuple[str, str]], x: np.ndarray, s: np.ndarray | None) -> np.ndarray:
    value, stash = x, x
    with np.errstate(all="ignore"):
        for name, arg in ops:
            if name == "stash":
                stash = value
            elif name in UNARY:
                value = UNARY[name](value).astype(np.float32)
            else:
                other = s if arg == "vrf" else stash if arg == "stash" else np.float32(arg)
                value = BINARY[name](value, other).astype(np.float32)
    return value
