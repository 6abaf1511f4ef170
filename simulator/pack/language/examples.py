"""Programs the pack writes for constructs the vendor docs name but show in no code block: each the
smallest program that uses the construct the way the docs describe it, in the spelling of the
version for everything else (the construct itself is written as named: a version that lacks it
refuses it, and that refusal is the finding). Every kernel is `op_<construct>`, so `host.py` can
state what it computes."""

from __future__ import annotations

import functools
from collections.abc import Callable

HEADER = '#![toolchain = "{version}"]\n'
ROW = "layout Row = { cluster: [1 # 2], slice: [H / 128 # 256] };\n"
ONE = "layout One = { cluster: [1 # 2], slice: [1 # 256] };\n"
SPLIT = "layout Split = { cluster: [1 # 2], slice: [H / 64 # 256] };\n"
FETCH = "main(a).fetch(time = [H % 128 / 16], packet = [H % 16])"


def _up(version: str) -> str:
    return "widen" if version >= "0.7.0" else "cast"


def _down(version: str) -> str:
    return "narrow" if version >= "0.7.0" else "cast"


def _lut(version: str) -> str:
    return "lut" if version < "0.6.0" else "decode"


def _program(version: str, name: str, axes: str, layouts: str, params: str, body: str) -> str:
    return (f"{HEADER.format(version=version)}axes! {{ {axes} }}\n{layouts}\n"
            f"kernel op_{name}({params}) {{\n{body}}}\n")  # fmt: skip


def _map(version: str, name: str, chain: str) -> str:
    """y = f(x) element-wise: x into DM, one pass with `chain` between the casts, back to HBM."""
    body = (
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n"
        f"    let b: dm<bf16>{{..Row, elem: [H % 128]}} = {FETCH}.{_up(version)}(f32)\n"
        f"        .vector({chain})\n        .{_down(version)}(bf16)\n        .commit();\n"
        "    b.dma_into(y, engines = [0]);\n"
    )
    return _program(version, name, "H = 2048", ROW, "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]", body)


def _collect(version: str) -> str:
    """y = exp(x), the stream repacked into flits (`collect`) before the vector engine."""
    collect = "        .collect(time = [H % 128 / 16], packet = [H % 16])\n"
    return _map(version, "collect", "exp()").replace("        .vector(exp())\n", collect + "        .vector(exp())\n")


def _total(version: str, name: str, op: str, reduce: str, tile: int = 0) -> str:
    """y[0] = a reduction of x: each slice reduces its 64 values, a reducer the slices' partials."""
    body = (
        "    let a: dm<bf16>{..Split, elem: [H % 64]} = x.dma(engines = [0]);\n"
        f"    let s: dm<f32>{{..Split, elem: [1 # 8]}} = main(a)\n"
        f"        .fetch(time = [H % 64 / 16], packet = [H % 16]).{_up(version)}(f32)\n"
        f"        .vector({op})\n        .{reduce}\n        .commit();\n"
        f"    s.tile(H / 64, {tile}, 1).dma_into(y, engines = [0]);\n"
    )
    return _program(version, name, "H = 512", SPLIT, "x: &hbm<bf16>[H], y: &mut hbm<f32>[1]", body)


def _per_row(version: str, name: str, op: str, out: str, tail: str = "") -> str:
    """A reduction inside one slice: 16 rows of T x P values, one row per slice."""
    body = (
        "    let a: dm<bf16>{cluster: [1 # 2], slice: [R # 256], elem: [T, P]} = x.dma(engines = [0]);\n"
        f"    let s: dm<f32>{{cluster: [1 # 2], slice: [R # 256], elem: [{out}]}} = main(a)\n"
        f"        .fetch(time = [T], packet = [P]).{_up(version)}(f32)\n        .vector({op}){tail}\n"
        "        .commit();\n    s.dma_into(y, engines = [0]);\n"
    )
    return _program(version, name, "R = 16, T = 8, P = 16", "",
                    f"x: &hbm<bf16>[R, T, P], y: &mut hbm<f32>[R, {out}]", body)  # fmt: skip


def _copy(version: str, name: str, load: str, params: str = "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]") -> str:
    body = f"{load}    b.dma_into(y, engines = [0]);\n"
    return _program(version, name, "H = 2048", ROW, params, body)


def _view(version: str, name: str, axes: str, params: str, body: str) -> str:
    return _program(version, name, axes, ONE, params, body)


def _op(op: str, operand: str, version: str) -> str:
    return _map(version, op, f"{op}({operand})")


UNARY = ("exp", "erf", "tanh", "rsqrt", "recip", "square", "neg")
BINARY = ("add", "sub", "mul", "div", "max", "min")

WRITERS: dict[str, Callable[[str], str]] = {
    **{f"op.{op}": functools.partial(_op, op, "") for op in UNARY},
    **{f"op.{op}": functools.partial(_op, op, "1.5") for op in BINARY},
    "op.stash": lambda v: _map(v, "stash", "stash(), add(1.0), mul(stash)"),
    "collect": _collect,
    "op.sum_all": lambda v: _total(v, "sum_all", "sum_all()", "reduce_slices(add, group = [H / 64], result = leader)"),
    "op.max_all": lambda v: _total(v, "max_all", "max_all()", "reduce_slices(max, group = [H / 64], result = leader)"),
    "result_all": lambda v: _total(v, "result_all", "sum_all()", "reduce_slices(add, group = [H / 64], result = all)",
                                   tile=3),
    "allreduce_slices": lambda v: _total(v, "allreduce_slices", "sum_all()",
                                         "allreduce_slices(add, group = [H / 64])", tile=3),
    "op.sum_time": lambda v: _per_row(v, "sum_time", "sum_time([T])", "P"),
    "op.sum_packet": lambda v: _per_row(v, "sum_packet", "sum_packet()", "T",
                                        "\n        .transpose(time = [1], packet = [T])"),
    "lut": lambda v: _copy(v, "lut", "    let a: dm<f8e4m3>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n"
                                     "    let b: dm<bf16>{..Row, elem: [H % 128]} = main(a)\n"
                                     "        .fetch(time = [H % 128 / 32], packet = [H % 32]).lut(bf16).commit();\n",
                           "x: &hbm<f8e4m3>[H], y: &mut hbm<bf16>[H]"),
    "dtype.f4e2m1": lambda v: _copy(v, "f4e2m1",
                                    "    let a: dm<f4e2m1>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n"
                                    "    let b: dm<f8e4m3>{..Row, elem: [H % 128]} = main(a)\n"
                                    f"        .fetch(time = [H % 128 / 64], packet = [H % 64]).{_lut(v)}(f8e4m3)"
                                    ".commit();\n",
                                    "x: &hbm<f4e2m1>[H], y: &mut hbm<f8e4m3>[H]"),
    "dma_at": lambda v: _copy(v, "dma_at",
                              "    let b: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0], at = 0);\n"),
    "at_addr": lambda v: _copy(v, "at_addr", "    let b: dm<bf16>{..Row, elem: [H % 128]} = dm::at_addr(0);\n"
                                             "    x.dma_into(b, engines = [0]);\n"),
    "fn": lambda v: _program(
        v, "fn", "H = 2048", ROW, "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n"
        "    let b: dm<bf16>{..Row, elem: [H % 128]} = double(a);\n    b.dma_into(y, engines = [0]);\n",
    ).replace("\nkernel", "\nfn double(t: dm<bf16>{..Row, elem: [H % 128]}) -> dm<bf16>{..Row, elem: [H % 128]} {\n"
              f"    main(t).fetch(time = [H % 128 / 16], packet = [H % 16]).{_up(v)}(f32).vector(mul(2.0))"
              f".{_down(v)}(bf16).commit()\n}}\n\nkernel", 1),
    "at": lambda v: _view(v, "at", "E = 64, D = 256",
                          "table: &hbm<bf16>[E, D], pos: &hbm<i32>[1], y: &mut hbm<bf16>[D]",
                          "    let row: dm<bf16>{..One, elem: [D]} = table.at(E = pos).dma(engines = [0]);\n"
                          "    row.dma_into(y, engines = [0]);\n"),
    "rename": lambda v: _view(v, "rename", "A = 128, B = 128, R = 256",
                              "a: &hbm<bf16>[A], b: &hbm<bf16>[B], y: &mut hbm<bf16>[R]",
                              "    let ab: dm<bf16>{..One, elem: [R]} = dm::empty();\n"
                              "    a.rename(A, R, 0).dma_into(ab, engines = [1]);\n"
                              "    b.rename(B, R, 128).dma_into(ab, engines = [2]);\n"
                              "    ab.dma_into(y, engines = [0]);\n"),
    "roll": lambda v: _view(v, "roll", "D = 256", "x: &hbm<bf16>[D], y: &mut hbm<bf16>[D]",
                            "    let row: dm<bf16>{..One, elem: [D]} = x.dma(engines = [0]);\n"
                            "    let b: dm<bf16>{..One, elem: [D]} = main(row.roll(D / 128, 1))\n"
                            "        .fetch(time = [D / 16], packet = [D % 16]).commit();\n"
                            "    b.dma_into(y, engines = [0]);\n"),
    "fill": lambda v: _view(v, "fill", "D = 256", "x: &hbm<bf16>[D], y: &mut hbm<bf16>[D]",
                            "    let row: dm<bf16>{..One, elem: [D]} = x.dma(engines = [0]);\n"
                            "    row.tile(D, 0, 16).fill(0.0);\n    row.dma_into(y, engines = [0]);\n"),
    "reduce_clusters": lambda v: _program(
        v, "reduce_clusters", "H = 1024",
        "layout Both = { cluster: [H / 512], slice: [H / 64 % 8 # 256] };\n"
        "layout Lead = { cluster: [H / 512], slice: [1 # 256] };\n",
        "x: &hbm<bf16>[H], y: &mut hbm<f32>[1]",
        "    let a: dm<bf16>{..Both, elem: [H % 64]} = x.dma(engines = [0, 4]);\n"
        "    let part: dm<f32>{..Lead, elem: [1 # 8]} = main(a)\n"
        f"        .fetch(time = [H % 64 / 16], packet = [H % 16]).{_up(v)}(f32)\n"
        "        .vector(sum_all())\n        .reduce_slices(add, group = [H / 64 % 8], result = leader)\n"
        "        .commit();\n"
        "    let total: dm<f32>{..Lead, elem: [1 # 8]} = main(part)\n"
        "        .fetch(time = [1], packet = [1 # 8])\n        .reduce_clusters(add)\n        .commit();\n"
        "    total.tile(H / 512, 0, 1).dma_into(y, engines = [0]);\n",
    ),
}  # fmt: skip


def example(construct: str, version: str) -> str | None:
    """The pack's program for `construct` under `version`, or None when it writes none."""
    writer = WRITERS.get(construct)
    return writer(version) if writer else None
