"""Programs the pack writes for constructs the vendor docs name but show in no code block: each the
smallest program that uses the construct the way the docs describe it, in the spelling of the
version for everything else (the construct itself is written as named: a version that lacks it
refuses it, and that refusal is the finding). Every kernel is `op_<construct>`, so `host.py` can
state what it computes.

Each program is written for a chip's shape (`Chip`: the documented one, or what the shape probe
found): its cluster and slice counts in every layout, its engine numbers in every engine list, and
the cross-cluster reduction over every cluster it has."""

from __future__ import annotations

import functools
from collections.abc import Callable

from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip

HEADER = '#![toolchain = "{version}"]\n'
FETCH = "main(a).fetch(time = [H % 128 / 16], packet = [H % 16])"
PER_CLUSTER = 512  # reduce_clusters: the values each cluster sums (8 slices of 64)


def _cluster0(chip: Chip) -> str:
    """The mapping digit of a tensor in cluster 0 only."""
    return f"cluster: [1 # {chip.clusters}]"


def _row(chip: Chip) -> str:
    """Row: H spread over the first slices of cluster 0, 128 values each."""
    return f"layout Row = {{ {_cluster0(chip)}, slice: [H / 128 # {chip.slices}] }};\n"


def _one(chip: Chip) -> str:
    """One: slice 0 of cluster 0."""
    return f"layout One = {{ {_cluster0(chip)}, slice: [1 # {chip.slices}] }};\n"


def _split(chip: Chip) -> str:
    """Split: H over the first slices of cluster 0, 64 values each."""
    return f"layout Split = {{ {_cluster0(chip)}, slice: [H / 64 # {chip.slices}] }};\n"


def _e0(chip: Chip) -> str:
    """The engine list of a DMA in cluster 0: its first engine."""
    return f"engines = [{chip.engine(0, 0)}]"


def _up(version: str) -> str:
    return "widen" if version >= "0.7.0" else "cast"


def _down(version: str) -> str:
    return "narrow" if version >= "0.7.0" else "cast"


def _lut(version: str) -> str:
    return "lut" if version < "0.6.0" else "decode"


def _program(version: str, name: str, axes: str, layouts: str, params: str, body: str) -> str:
    return (f"{HEADER.format(version=version)}axes! {{ {axes} }}\n{layouts}\n"
            f"kernel op_{name}({params}) {{\n{body}}}\n")  # fmt: skip


def _map(version: str, chip: Chip, name: str, chain: str) -> str:
    """y = f(x) element-wise: x into DM, one pass with `chain` between the casts, back to HBM."""
    body = (
        f"    let a: dm<bf16>{{..Row, elem: [H % 128]}} = x.dma({_e0(chip)});\n"
        f"    let b: dm<bf16>{{..Row, elem: [H % 128]}} = {FETCH}.{_up(version)}(f32)\n"
        f"        .vector({chain})\n        .{_down(version)}(bf16)\n        .commit();\n"
        f"    b.dma_into(y, {_e0(chip)});\n"
    )
    return _program(version, name, "H = 2048", _row(chip), "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]", body)


def _collect(version: str, chip: Chip) -> str:
    """y = exp(x), the stream repacked into flits (`collect`) before the vector engine."""
    collect = "        .collect(time = [H % 128 / 16], packet = [H % 16])\n"
    program = _map(version, chip, "collect", "exp()")
    return program.replace("        .vector(exp())\n", collect + "        .vector(exp())\n")


def _total(version: str, chip: Chip, name: str, op: str, reduce: str, tile: int = 0) -> str:
    """y[0] = a reduction of x: each slice reduces its 64 values, a reducer the slices' partials."""
    body = (
        f"    let a: dm<bf16>{{..Split, elem: [H % 64]}} = x.dma({_e0(chip)});\n"
        f"    let s: dm<f32>{{..Split, elem: [1 # 8]}} = main(a)\n"
        f"        .fetch(time = [H % 64 / 16], packet = [H % 16]).{_up(version)}(f32)\n"
        f"        .vector({op})\n        .{reduce}\n        .commit();\n"
        f"    s.tile(H / 64, {tile}, 1).dma_into(y, {_e0(chip)});\n"
    )
    return _program(version, name, "H = 512", _split(chip), "x: &hbm<bf16>[H], y: &mut hbm<f32>[1]", body)


def _per_row(version: str, chip: Chip, name: str, op: str, out: str, tail: str = "") -> str:
    """A reduction inside one slice: 16 rows of T x P values, one row per slice."""
    rows = f"{_cluster0(chip)}, slice: [R # {chip.slices}]"
    body = (
        f"    let a: dm<bf16>{{{rows}, elem: [T, P]}} = x.dma({_e0(chip)});\n"
        f"    let s: dm<f32>{{{rows}, elem: [{out}]}} = main(a)\n"
        f"        .fetch(time = [T], packet = [P]).{_up(version)}(f32)\n        .vector({op}){tail}\n"
        f"        .commit();\n    s.dma_into(y, {_e0(chip)});\n"
    )
    return _program(version, name, "R = 16, T = 8, P = 16", "",
                    f"x: &hbm<bf16>[R, T, P], y: &mut hbm<f32>[R, {out}]", body)  # fmt: skip


def _copy(version: str, chip: Chip, name: str, load: str,
          params: str = "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]") -> str:  # fmt: skip
    """`load` puts x in `b` (Row); b back to HBM."""
    body = f"{load}    b.dma_into(y, {_e0(chip)});\n"
    return _program(version, name, "H = 2048", _row(chip), params, body)


def _view(version: str, chip: Chip, name: str, axes: str, params: str, body: str) -> str:
    return _program(version, name, axes, _one(chip), params, body)


def _op(op: str, operand: str, version: str, chip: Chip) -> str:
    return _map(version, chip, op, f"{op}({operand})")


def _fn(version: str, chip: Chip) -> str:
    """y = 2 x through a `fn` of the program's own."""
    tensor = "dm<bf16>{..Row, elem: [H % 128]}"
    program = _program(
        version, "fn", "H = 2048", _row(chip), "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
        f"    let a: {tensor} = x.dma({_e0(chip)});\n"
        f"    let b: {tensor} = double(a);\n    b.dma_into(y, {_e0(chip)});\n",
    )  # fmt: skip
    double = (f"\nfn double(t: {tensor}) -> {tensor} {{\n"
              f"    main(t).fetch(time = [H % 128 / 16], packet = [H % 16]).{_up(version)}(f32).vector(mul(2.0))"
              f".{_down(version)}(bf16).commit()\n}}\n\nkernel")  # fmt: skip
    return program.replace("\nkernel", double, 1)


def _rename(version: str, chip: Chip) -> str:
    """y = a ++ b: two DMAs, each by an engine beside engine 0, into one DM tensor."""
    first, second = chip.beside_first(2)
    return _view(version, chip, "rename", "A = 128, B = 128, R = 256",
                 "a: &hbm<bf16>[A], b: &hbm<bf16>[B], y: &mut hbm<bf16>[R]",
                 "    let ab: dm<bf16>{..One, elem: [R]} = dm::empty();\n"
                 f"    a.rename(A, R, 0).dma_into(ab, engines = [{first}]);\n"
                 f"    b.rename(B, R, 128).dma_into(ab, engines = [{second}]);\n"
                 f"    ab.dma_into(y, {_e0(chip)});\n")  # fmt: skip


def _reduce_clusters(version: str, chip: Chip) -> str:
    """y[0] = sum(x): each cluster sums its share (PER_CLUSTER values over 8 slices, each cluster's
    share moved by its first engine), then the clusters' partials are reduced. On a chip of one
    cluster the reduction is over that one cluster (it compiles, and computes the same)."""
    engines = ", ".join(str(chip.engine(c, 0)) for c in chip.every)
    clusters = f"cluster: [H / {PER_CLUSTER}]"
    return _program(
        version, "reduce_clusters", f"H = {PER_CLUSTER * chip.clusters}",
        f"layout Both = {{ {clusters}, slice: [H / 64 % 8 # {chip.slices}] }};\n"
        f"layout Lead = {{ {clusters}, slice: [1 # {chip.slices}] }};\n",
        "x: &hbm<bf16>[H], y: &mut hbm<f32>[1]",
        f"    let a: dm<bf16>{{..Both, elem: [H % 64]}} = x.dma(engines = [{engines}]);\n"
        "    let part: dm<f32>{..Lead, elem: [1 # 8]} = main(a)\n"
        f"        .fetch(time = [H % 64 / 16], packet = [H % 16]).{_up(version)}(f32)\n"
        "        .vector(sum_all())\n        .reduce_slices(add, group = [H / 64 % 8], result = leader)\n"
        "        .commit();\n"
        "    let total: dm<f32>{..Lead, elem: [1 # 8]} = main(part)\n"
        "        .fetch(time = [1], packet = [1 # 8])\n        .reduce_clusters(add)\n        .commit();\n"
        f"    total.tile(H / {PER_CLUSTER}, 0, 1).dma_into(y, {_e0(chip)});\n",
    )  # fmt: skip


UNARY = ("exp", "erf", "tanh", "rsqrt", "recip", "square", "neg")
BINARY = ("add", "sub", "mul", "div", "max", "min")

Writer = Callable[[str, Chip], str]  # (version, chip) -> the program
WRITERS: dict[str, Writer] = {
    **{f"op.{op}": functools.partial(_op, op, "") for op in UNARY},
    **{f"op.{op}": functools.partial(_op, op, "1.5") for op in BINARY},
    "op.stash": lambda v, c: _map(v, c, "stash", "stash(), add(1.0), mul(stash)"),
    "collect": _collect,
    "op.sum_all": lambda v, c: _total(v, c, "sum_all", "sum_all()",
                                      "reduce_slices(add, group = [H / 64], result = leader)"),
    "op.max_all": lambda v, c: _total(v, c, "max_all", "max_all()",
                                      "reduce_slices(max, group = [H / 64], result = leader)"),
    "result_all": lambda v, c: _total(v, c, "result_all", "sum_all()",
                                      "reduce_slices(add, group = [H / 64], result = all)", tile=3),
    "allreduce_slices": lambda v, c: _total(v, c, "allreduce_slices", "sum_all()",
                                            "allreduce_slices(add, group = [H / 64])", tile=3),
    "op.sum_time": lambda v, c: _per_row(v, c, "sum_time", "sum_time([T])", "P"),
    "op.sum_packet": lambda v, c: _per_row(v, c, "sum_packet", "sum_packet()", "T",
                                           "\n        .transpose(time = [1], packet = [T])"),
    "lut": lambda v, c: _copy(v, c, "lut", f"    let a: dm<f8e4m3>{{..Row, elem: [H % 128]}} = x.dma({_e0(c)});\n"
                                           "    let b: dm<bf16>{..Row, elem: [H % 128]} = main(a)\n"
                                           "        .fetch(time = [H % 128 / 32], packet = [H % 32]).lut(bf16)"
                                           ".commit();\n",
                              "x: &hbm<f8e4m3>[H], y: &mut hbm<bf16>[H]"),
    "dtype.f4e2m1": lambda v, c: _copy(v, c, "f4e2m1",
                                       f"    let a: dm<f4e2m1>{{..Row, elem: [H % 128]}} = x.dma({_e0(c)});\n"
                                       "    let b: dm<f8e4m3>{..Row, elem: [H % 128]} = main(a)\n"
                                       f"        .fetch(time = [H % 128 / 64], packet = [H % 64]).{_lut(v)}(f8e4m3)"
                                       ".commit();\n",
                                       "x: &hbm<f4e2m1>[H], y: &mut hbm<f8e4m3>[H]"),
    "dma_at": lambda v, c: _copy(v, c, "dma_at",
                                 f"    let b: dm<bf16>{{..Row, elem: [H % 128]}} = x.dma({_e0(c)}, at = 0);\n"),
    "at_addr": lambda v, c: _copy(v, c, "at_addr",
                                  "    let b: dm<bf16>{..Row, elem: [H % 128]} = dm::at_addr(0);\n"
                                  f"    x.dma_into(b, {_e0(c)});\n"),
    "fn": _fn,
    "at": lambda v, c: _view(v, c, "at", "E = 64, D = 256",
                             "table: &hbm<bf16>[E, D], pos: &hbm<i32>[1], y: &mut hbm<bf16>[D]",
                             f"    let row: dm<bf16>{{..One, elem: [D]}} = table.at(E = pos).dma({_e0(c)});\n"
                             f"    row.dma_into(y, {_e0(c)});\n"),
    "rename": _rename,
    "roll": lambda v, c: _view(v, c, "roll", "D = 256", "x: &hbm<bf16>[D], y: &mut hbm<bf16>[D]",
                               f"    let row: dm<bf16>{{..One, elem: [D]}} = x.dma({_e0(c)});\n"
                               "    let b: dm<bf16>{..One, elem: [D]} = main(row.roll(D / 128, 1))\n"
                               "        .fetch(time = [D / 16], packet = [D % 16]).commit();\n"
                               f"    b.dma_into(y, {_e0(c)});\n"),
    "fill": lambda v, c: _view(v, c, "fill", "D = 256", "x: &hbm<bf16>[D], y: &mut hbm<bf16>[D]",
                               f"    let row: dm<bf16>{{..One, elem: [D]}} = x.dma({_e0(c)});\n"
                               f"    row.tile(D, 0, 16).fill(0.0);\n    row.dma_into(y, {_e0(c)});\n"),
    "reduce_clusters": _reduce_clusters,
}  # fmt: skip


def example(construct: str, version: str, chip: Chip = DOCUMENTED_CHIP) -> str | None:
    """The pack's program for `construct` under `version`, written for `chip`, or None when it writes none."""
    writer = WRITERS.get(construct)
    return writer(version, chip) if writer else None
