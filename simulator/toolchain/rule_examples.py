"""One triggering and one fixed program per legality rule (docs/simrngd.md §5.5), for every version.

The rule tests check that each pair behaves as its version says, and the diagnostics page of the
docs shows the same pairs as each code's example and fix, so what the docs show is what the
compiler does. The pairs are written for the first chip (two clusters of 256 slices, eight
engines, 8 KB TRF lanes and VRFs); `for_shape` writes them for a chip of another shape, as that
chip's docs show them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from chiplore.simulator._truth import ChipShape

PRELUDE = """axes! { H = 64, K = 32, B = 131072, C = 480000 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
layout Split = { cluster: [1 # 2], slice: [H / 16 % 4 # 64, K / 8] };
kernel k(x: &hbm<bf16>[H], q: &hbm<i8>[H], y: &mut hbm<bf16>[H]) {
    let a: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);
"""
FETCH = "fetch(time = [H / 16], packet = [H % 16])"


def widen(version: str) -> str:
    return "cast" if version != "0.7.0" else "widen"


def narrow(version: str) -> str:
    return "cast" if version != "0.7.0" else "narrow"


TRF = "    let xt: trf<bf16>{..One, lane: [1], elem: [H]} = sub(a).fetch(time = [H / 4], packet = [H % 4]).to_trf();\n"


def contraction(stream: str, context: str = "main", packet: str = "H % 32") -> str:
    source = "x" if stream == "bf16" else "q"
    return (
        TRF
        + f"    let w: dm<{stream}>{{..One, elem: [H]}} = {source}.dma(engines = [0]);\n"
        + f"    let o: dm<f32>{{..One, elem: [1 # 8]}} = {context}(w)"
        f".fetch(time = [H / {packet.split()[-1]}], packet = [{packet}])"
        ".contract(trf = xt, reduce = [H], fold = [1 # 8]).commit();\n"
    )


SLICED = "cluster: [1 # 2], slice: [H / 16 # 256]"
SPLIT_K = (
    contraction("bf16")
    .replace("dm<bf16>{..One, elem: [H]} = x.dma", f"dm<bf16>{{{SLICED}, elem: [H % 16]}} = x.dma")
    .replace("fetch(time = [H / 32], packet = [H % 32])", "fetch(time = [1], packet = [H % 16])")
    .replace("dm<f32>{..One, elem: [1 # 8]} = main(w)", f"dm<f32>{{{SLICED}, elem: [1 # 8]}} = main(w)")
)
SPLIT_K_PLACED = SPLIT_K.replace(
    "trf<bf16>{..One, lane: [1], elem: [H]}", f"trf<bf16>{{{SLICED}, lane: [1], elem: [H % 16]}}"
)
STORE = "    o.dma_into(y, engines = [0]);\n"
BIG = "    let {n}: dm<i8>{{..One, elem: [B]}} = dm::zeros();\n"
HALF_VRF = (
    "    let d: dm<f32>{..One, elem: [H]} = dm::zeros();\n"
    "    let v: vrf<f32>{..One, elem: [H = 32]} = sub(d.tile(H, 0, 32)).fetch(time = [H / 8 = 4], packet = [H % 8])"
    ".to_vrf();\n"
)
INTO = "    main({src}).fetch(time = [B / 32], packet = [B % 32]).commit_into({dst});\n"
VRF = (
    "    let d: dm<f32>{..One, elem: [H, K]} = dm::zeros();\n"
    "    let v1: vrf<f32>{..One, elem: [H, K]} = sub(d).fetch(time = [H, K / 8], packet = [K % 8]).to_vrf();\n"
)
BANK = (
    "    let p: dm<i8>{{..One, elem: [B % {n}]}} = dm::zeros();\n"
    "    main(p).fetch(time = [B % 128 / 8, B % {n} / 128], packet = [B % 8]).commit_into(p);\n"
)
REVERSED = ", ".join(f"B / {1 << i} % 2" for i in range(8, 17))  # nine digits no merge can join

# rule -> (triggering body, clean body), each a function of the version
CASES: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "0301/peak": (  # four 128 KB tensors live at once (the peak, not any one tensor)
        lambda v: (
            "".join(BIG.format(n=n) for n in ("p1", "p2", "p3", "p4"))
            + "".join(INTO.format(src=n, dst="p4") for n in ("p1", "p2", "p3"))
        ),
        lambda v: (
            "".join(BIG.format(n=n) for n in ("p1", "p2", "p3"))
            + "".join(INTO.format(src=n, dst="p3") for n in ("p1", "p2"))
        ),
    ),
    "0303/live": (  # two 8 KB VRF tensors read by one pass
        lambda v: (
            VRF + VRF.split("\n")[1].replace("v1", "v2") + "\n    main(d).fetch(time = [H, K / 8], packet = [K % 8])"
            ".vector(add(vrf = v1), add(vrf = v2)).commit_into(d);\n"
        ),
        lambda v: (
            VRF + "    main(d).fetch(time = [H, K / 8], packet = [K % 8]).vector(add(vrf = v1)).commit_into(d);\n"
        ),
    ),
    "0310": (
        lambda v: BIG.format(n="p") + f"    main(p).fetch(time = [{REVERSED}], packet = [B % 256]).commit_into(p);\n",
        lambda v: BIG.format(n="p") + "    main(p).fetch(time = [B / 256], packet = [B % 256]).commit_into(p);\n",
    ),
    "0312/contiguous": (  # four elements 32 B apart are not one DM run
        lambda v: "    main(a).fetch(time = [H % 16], packet = [H / 16]).commit_into(a);\n",
        lambda v: "    main(a).fetch(time = [H / 16], packet = [H % 16]).commit_into(a);\n",
    ),
    "0312/words": (  # a 4-B packet is half a word (the transpose repacks to 16 B for the commit)
        lambda v: (
            "    main(a).fetch(time = [H / 2], packet = [H % 2]).transpose(time = [H / 8], packet = [H % 8])"
            ".commit_into(a);\n"
        ),
        lambda v: (
            "    main(a).fetch(time = [H / 4], packet = [H % 4]).transpose(time = [H / 8], packet = [H % 8])"
            ".commit_into(a);\n"
        ),
    ),
    "0205/fetch": (  # the stream skips H / 32; pinning it with a one-value tile is a complete fetch
        lambda v: "    main(a).fetch(time = [H / 16 % 2], packet = [H % 16]).commit_into(a);\n",
        lambda v: "    main(a.tile(H / 32, 1, 1)).fetch(time = [H / 16 % 2], packet = [H % 16]).commit_into(a);\n",
    ),
    "0205/dma": (  # the destination has no place for H / 32 of x
        lambda v: "    let b: dm<bf16>{..One, elem: [H % 32]} = x.dma(engines = [0]);\n",
        lambda v: "    let b: dm<bf16>{..One, elem: [H % 32]} = x.tile(H / 32, 1, 1).dma(engines = [0]);\n",
    ),
    "0404/reduced": (  # the TRF holds half of the H it should be contracted over
        lambda v: (
            contraction("bf16")
            .replace("trf<bf16>{..One, lane: [1], elem: [H]}", "trf<bf16>{..One, lane: [1], elem: [H % 32]}")
            .replace("sub(a).fetch(time = [H / 4]", "sub(a.tile(H / 32, 0, 1)).fetch(time = [H % 32 / 4]")
        ),
        lambda v: contraction("bf16"),
    ),
    "0404/placed": (  # the stream has H / 16 on its slices; the TRF keeps all of H in every slice
        lambda v: SPLIT_K,
        lambda v: SPLIT_K.replace(
            "trf<bf16>{..One, lane: [1], elem: [H]}", f"trf<bf16>{{{SLICED}, lane: [1], elem: [H % 16]}}"
        ),
    ),
    "0710": (  # split-K partials (one per H / 16 slice) stored as if they were the sum
        lambda v: SPLIT_K_PLACED.replace("f32", "bf16").replace(".commit()", f".{narrow(v)}(bf16).commit()") + STORE,
        lambda v: (
            SPLIT_K_PLACED.replace("f32", "bf16").replace(
                ".commit()", f".reduce_slices(add, group = [H / 16], result = leader).{narrow(v)}(bf16).commit()"
            )
            + STORE
        ),
    ),
    "0404/positions": (  # the TRF holds H / 16 on its slices, but 16 slices apart instead of adjacent
        lambda v: SPLIT_K_PLACED.replace(
            f"trf<bf16>{{{SLICED}, lane", "trf<bf16>{cluster: [1 # 2], slice: [H / 16 # 16, 1 # 16], lane"
        ),
        lambda v: SPLIT_K_PLACED,
    ),
    "0404/vrf": (  # v holds 32 of H's 64 values; the stream reads all 64 (a tile of d reads 32, by position)
        lambda v: (
            HALF_VRF + "    main(d).fetch(time = [H / 8], packet = [H % 8]).vector(mul(vrf = v)).commit_into(d);\n"
        ),
        lambda v: (
            HALF_VRF + "    main(d.tile(H, 32, 32)).fetch(time = [H / 8 = 4], packet = [H % 8]).vector(mul(vrf = v))"
            ".commit_into(d.tile(H, 32, 32));\n"
        ),
    ),
    "0520": (  # 8-byte reads 128 B apart hit one bank; x's DMA may write cluster 0 meanwhile
        lambda v: BANK.format(n=8192),
        lambda v: BANK.format(n=4096),
    ),
    "0322": (
        lambda v: "    a.tile(H, 0, 32).dma_into(y, engines = [1]);\n",
        lambda v: "    a.dma_into(y, engines = [1]);\n",
    ),
    "0401": (
        lambda v: contraction("bf16").replace("fold = [1 # 8]", "fold = [1 # 16]"),
        lambda v: contraction("bf16"),
    ),
    "0413": (  # 4 valid bytes per flit reach the commit adapter
        lambda v: (
            "    let t: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 4], packet = [H % 4])"
            ".transpose(time = [H / 2], packet = [H % 2]).commit();\n"
        ),
        lambda v: (
            "    let t: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 4], packet = [H % 4])"
            ".transpose(time = [H / 4], packet = [H % 4]).commit();\n"
        ),
    ),
    "0110": (
        lambda v: f"    let t: dm<i32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(i32).commit();\n",
        lambda v: f"    let t: dm<f32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).commit();\n",
    ),
    "0120": (
        lambda v: (
            f"    let t: dm<bf16>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).vector(exp())"
            f".collect(time = [H / 16], packet = [H % 16]).{narrow(v)}(bf16).commit();\n"
        ),
        lambda v: (
            f"    let t: dm<bf16>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).vector(exp())"
            f".{narrow(v)}(bf16).commit();\n"
        ),
    ),
    "0201": (
        lambda v: "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 128], elem: [H]} = x.dma(engines = [1]);\n",
        lambda v: "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = x.dma(engines = [1]);\n",
    ),
    "0204": (
        lambda v: "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H, H % 8]} = x.dma(engines = [1]);\n",
        lambda v: "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H, K % 8]} = x.dma(engines = [1]);\n",
    ),
    "0205/read": (  # the loop writes two of b's four 16-value tiles; the store reads all four
        lambda v: (
            "    let mut b: dm<bf16>{..One, elem: [H]} = dm::empty();\n    for c in 0..2 {\n"
            "        a.tile(H / 16, c, 1).dma_into(b.tile(H / 16, c, 1), engines = [0]);\n    }\n"
            "    b.dma_into(y, engines = [1]);\n"
        ),
        lambda v: (
            "    let mut b: dm<bf16>{..One, elem: [H]} = dm::empty();\n    for c in 0..4 {\n"
            "        a.tile(H / 16, c, 1).dma_into(b.tile(H / 16, c, 1), engines = [0]);\n    }\n"
            "    b.dma_into(y, engines = [1]);\n"
        ),
    ),
    "0206": (  # nothing writes e before the store reads it (a timing probe may do this on purpose); a note
        lambda v: "    let e: dm<bf16>{..One, elem: [H]} = dm::empty();\n    e.dma_into(y, engines = [1]);\n",
        lambda v: "    let e: dm<bf16>{..One, elem: [H]} = dm::zeros();\n    e.dma_into(y, engines = [1]);\n",
    ),
    "0207": (
        lambda v: (
            "    for c in 0..5 {\n        let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, c * 16, 16)"
            ".dma(engines = [1]);\n    }\n"
        ),
        lambda v: (
            "    for c in 0..4 {\n        let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, c * 16, 16)"
            ".dma(engines = [1]);\n    }\n"
        ),
    ),
    "0301": (
        lambda v: "    let t: dm<f32>{..One, elem: [B]} = dm::empty();\n",
        lambda v: "    let t: dm<bf16>{..One, elem: [B]} = dm::empty();\n",
    ),
    "0302": (  # 16 KB in each of 8 lanes: 128 KB per slice
        lambda v: "    let t: trf<bf16>{..One, lane: [1 # 8], elem: [B / 16]} = dm::empty();\n",
        lambda v: "    let t: trf<bf16>{..One, lane: [1 # 8], elem: [B / 32]} = dm::empty();\n",
    ),
    "0302/lane": (  # 16 KB in one lane: the slice has room, the lane does not
        lambda v: "    let t: trf<bf16>{..One, lane: [1], elem: [B / 16]} = dm::empty();\n",
        lambda v: "    let t: trf<bf16>{..One, lane: [1], elem: [B / 32]} = dm::empty();\n",
    ),
    "0303": (
        lambda v: "    let t: vrf<f32>{..One, elem: [B / 32]} = dm::empty();\n",
        lambda v: "    let t: vrf<f32>{..One, elem: [B / 64]} = dm::empty();\n",
    ),
    "0321": (
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1], packet = 100);\n",
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1], packet = 128);\n",
    ),
    "0402": (lambda v: contraction("bf16", packet="H % 64"), lambda v: contraction("bf16")),
    "0320": (
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1], packet = 8192);\n",
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1], packet = 128);\n",
    ),
    "0323": (
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1, 1, 9]);\n",
        lambda v: "    let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1, 2]);\n",
    ),
    "0324": (  # x holds bf16; an f32 tensor needs a widening pass, not a DMA
        lambda v: "    let t: dm<f32>{..One, elem: [H]} = x.dma(engines = [1]);\n",
        lambda v: f"    let t: dm<f32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).commit();\n",
    ),
    "0403": (lambda v: contraction("i8"), lambda v: contraction("bf16")),
    "0405": (lambda v: contraction("bf16", context="sub"), lambda v: contraction("bf16")),
    "0410": (
        lambda v: (
            f"    let t: dm<bf16>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).vector(exp()).commit();\n"
        ),
        lambda v: f"    let t: dm<f32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).vector(exp()).commit();\n",
    ),
    "0411": (
        lambda v: f"    let t: dm<bf16>{{..One, elem: [H]}} = main(a).{FETCH}.vector(exp()).commit();\n",
        lambda v: (
            f"    let t: dm<bf16>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32).vector(exp())"
            f".{narrow(v)}(bf16).commit();\n"
        ),
    ),
    "0412": (
        lambda v: (
            f"    let t: dm<f32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32)"
            ".vector(exp(), add(1.0), mul(2.0), rsqrt(), square(), neg(), recip()).commit();\n"
        ),
        lambda v: (
            f"    let t: dm<f32>{{..One, elem: [H]}} = main(a).{FETCH}.{widen(v)}(f32)"
            ".vector(exp(), add(1.0), mul(2.0), rsqrt(), square(), neg(), recip(when = 0)).commit();\n"
        ),
    ),
    "0420": (  # gathering the cluster digit into time would cross the cluster bridge
        lambda v: (
            "    let c: dm<bf16>{cluster: [H / 32], slice: [1 # 256], elem: [H % 32]} = x.dma(engines = [0, 4]);\n"
            "    let g: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = main(c)"
            ".fetch(time = [1], packet = [H % 32]).switch(gather, slice = [1 # 256], time = [H / 32], ring = 256)"
            ".commit();\n"
        ),
        lambda v: (
            "    let c: dm<bf16>{cluster: [1 # 2], slice: [H / 32 # 256], elem: [H % 32]} = x.dma(engines = [0]);\n"
            "    let g: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = main(c)"
            ".fetch(time = [1], packet = [H % 32]).switch(gather, slice = [1 # 256], time = [H / 32], ring = 256)"
            ".commit();\n"
        ),
    ),
    "0430": (
        lambda v: (
            "    let p: dm<f32>{..Split, elem: [H % 16]} = dm::zeros();\n"
            "    let r: dm<f32>{..Split, elem: [H % 16]} = main(p)"
            ".fetch(time = [H % 16 / 8], packet = [H % 8]).reduce_slices(add, group = [H / 16 % 4], result = leader)"
            ".commit();\n"
        ),
        lambda v: (
            "    let p: dm<f32>{..Split, elem: [H % 16]} = dm::zeros();\n"
            "    let r: dm<f32>{..Split, elem: [H % 16]} = main(p)"
            ".fetch(time = [H % 16 / 8], packet = [H % 8]).reduce_slices(add, group = [K / 8], result = leader)"
            ".commit();\n"
        ),
    ),
    "0104": (  # 3,000 DMAs unrolled: past the 4,096 lowering steps; 300 are well inside
        lambda v: "    for i in 0..3000 {\n        let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n    }\n",
        lambda v: "    for i in 0..300 {\n        let t: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n    }\n",
    ),
    "0105": (  # a tile offset past 2^63 - 1: refused as the program is read, before any rule runs
        lambda v: (
            "    let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, 99999999999999999999, 16)"
            ".dma(engines = [1]);\n"
        ),
        lambda v: "    let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, 48, 16).dma(engines = [1]);\n",
    ),
    "0107": (  # a tensor where the tile's start, an integer, belongs
        lambda v: "    let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, a, 16).dma(engines = [1]);\n",
        lambda v: "    let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, 16, 16).dma(engines = [1]);\n",
    ),
    "0325": (  # HBM to HBM is not a DMA statement: stage the data in DM
        lambda v: "    x.dma_into(y, engines = [1]);\n",
        lambda v: "    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n    b.dma_into(y, engines = [1]);\n",
    ),
    "0501": (
        lambda v: "    b.dma_into(y, engines = [0]);\n    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n",
        lambda v: "    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n    b.dma_into(y, engines = [0]);\n",
    ),
    "0502": (  # a local tensor named like the output parameter: which one would the harness read?
        lambda v: "    let y: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n",
        lambda v: "    let y_d: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n",
    ),
}

# Codes a case's pair shares by construction (both store four 2-byte partials into a 128-byte y).
INCIDENTAL = {"0710": {"W0322"}}


def example_source(body: str) -> str:
    """A complete program around a case's body."""
    return PRELUDE + body + "    a.dma_into(y, engines = [0]);\n}\n"


def _vocabulary(version: str, fixed: bool) -> str:
    name = widen(version) if fixed else ("widen" if version != "0.7.0" else "cast")
    return (
        "    let s: dm<f32>{..One, elem: [H]} = "
        f"main(a).fetch(time = [H / 8], packet = [H % 8]).{name}(f32).commit();\n"
    )


_PIPELINED = "    for c in 0..2 {\n        let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n    }\n"

# Rules whose example is not a body inside the usual kernel (a syntax error, a name, the version's
# vocabulary, an attribute, an output nothing writes): whole programs, per version.
WHOLE: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "0101": (
        lambda v: example_source("    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0];\n"),
        lambda v: example_source("    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n"),
    ),
    "0102": (
        lambda v: example_source("    let b: dm<bf17>{..One, elem: [H]} = x.dma(engines = [0]);\n"),
        lambda v: example_source("    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n"),
    ),
    "0103": (lambda v: example_source(_vocabulary(v, False)), lambda v: example_source(_vocabulary(v, True))),
    "0702": (
        lambda v: example_source("    #[pipeline(depth = 2)]\n" + _PIPELINED),
        lambda v: example_source(_PIPELINED),
    ),
    "0801": (lambda v: PRELUDE + "}\n", lambda v: example_source("")),
    "0106": (  # a kernel takes its tensors in HBM: an int is a fn's parameter
        lambda v: example_source("").replace("y: &mut hbm<bf16>[H])", "y: &mut hbm<bf16>[H], n: int)"),
        lambda v: example_source(""),
    ),
}


def example(number: str, version: str, shape: ChipShape | None = None) -> tuple[str, str]:
    """A program that breaks the rule `number` in `version`, and the same program fixed (written for
    a chip of `shape`; the first chip's by default)."""
    if number in WHOLE:
        breaking, fixed = WHOLE[number]
        pair = breaking(version), fixed(version)
    else:
        case = min(c for c in CASES if c.split("/")[0] == number)
        broken, mended = CASES[case]
        pair = example_source(broken(version)), example_source(mended(version))
    return (for_shape(pair[0], shape), for_shape(pair[1], shape)) if shape is not None else pair


FIRST = ChipShape()  # the chip the pairs are written for
_OPERAND = 131072  # B: TRF and VRF operands are written as B / n, a power of two of it


def _swap(text: str, replacements: dict[str, str]) -> str:
    """Every replacement at once: one after another, a size halved and then halved again (the broken
    operand's B / 32 became the mended one's B / 64, then B / 128, and fitted: no E0302, E0303 or E0401
    on a chip of smaller register files or fewer lanes)."""
    pattern = "|".join(re.escape(old) for old in sorted(replacements, key=len, reverse=True))
    return re.sub(pattern, lambda match: replacements[match.group(0)], text)


def for_shape(source: str, shape: ChipShape) -> str:
    """A pair's program written for a chip of `shape`: its cluster and slice counts in every mapping,
    its engine numbers in every engine list, its lanes and register-file sizes in the operands that
    probe them (where a TRF lane or VRF divides B; otherwise they stay the first chip's)."""
    if shape == FIRST:
        return source
    clusters, slices = shape.clusters, shape.slices
    other = 1 if shape.engines > 1 else 0  # the examples' second engine (engines go cluster by cluster)
    remote = shape.engines_per_cluster if clusters > 1 else 0  # cluster 1's first engine
    lines = []
    for line in source.split("\n"):
        if "dm::empty()" in line and "trf<bf16>{..One, lane:" in line and _OPERAND % shape.trf_lane_bytes == 0:
            per_lane = _OPERAND // shape.trf_lane_bytes  # B / this many bf16 fill one lane twice over
            line = _swap(line, {"B / 16]": f"B / {per_lane}]", "B / 32]": f"B / {2 * per_lane}]"})
            line = line.replace("lane: [1 # 8]", f"lane: [1 # {shape.lanes}]")
        if "dm::empty()" in line and "vrf<f32>{..One, elem: [B /" in line and (2 * _OPERAND) % shape.vrf_bytes == 0:
            per_vrf = 2 * _OPERAND // shape.vrf_bytes  # B / this many f32 fill a VRF twice over
            line = _swap(line, {"B / 32]": f"B / {per_vrf}]", "B / 64]": f"B / {2 * per_vrf}]"})
        lines.append(line)
    text = "\n".join(lines)
    if shape.lanes < 8:  # a contraction's eight outputs a step on a chip of fewer lanes: as many as it has
        text = _swap(
            text,
            {"fold = [1 # 16]": f"fold = [1 # {2 * shape.lanes}]", "fold = [1 # 8]": f"fold = [1 # {shape.lanes}]"},
        ).replace("dm<f32>{..One, elem: [1 # 8]}", f"dm<f32>{{..One, elem: [1 # {shape.lanes}]}}")
    text = text.replace("cluster: [H / 32]", f"cluster: [H / 32 # {clusters}]")
    text = text.replace("cluster: [1 # 2]", f"cluster: [1 # {clusters}]")
    # Every full-cluster pad first; then the pads written as parts of it (E0201's example: half).
    text = text.replace("[1 # 128]", "[1 # HALF]")
    text = re.sub(r"# 256\b", f"# {slices}", text).replace("ring = 256", f"ring = {slices}")
    text = text.replace("[1 # HALF]", f"[1 # {slices // 2}]")
    text = text.replace("H / 16 % 4 # 64,", f"H / 16 % 4 # {slices // 4},")  # with K / 8: four times that
    text = text.replace("H / 16 # 16, 1 # 16]", f"H / 16 # 16, 1 # {slices // 16}]")
    text = text.replace("engines = [0, 4]", f"engines = [0, {remote}]")
    text = text.replace("engines = [1, 1, 9]", f"engines = [{other}, {other}, {shape.engines + 1}]")
    distinct = f"{other}, 2" if shape.engines > 2 else "0, 1" if shape.engines == 2 else "0"
    text = text.replace("engines = [1, 2]", f"engines = [{distinct}]")
    return text.replace("engines = [1]", f"engines = [{other}]").replace("engines = [1,", f"engines = [{other},")
