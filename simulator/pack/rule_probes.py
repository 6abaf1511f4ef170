"""SimRNGD's compile probes: tiny Ferrite programs that push one limit or one construct at a time.

A *pair* probe is a program that breaks a rule and the same program fixed; a *limit* probe is a
program with a knob (bytes, ops, a run length) that compiles below some value and not above it,
found by bisection. Each names the quantity its rule constrains, so the rule's predicate says
something a screener can check against a design before compiling it.

The programs use only what the docs teach, written for the chip's shape as the shape probe (MB00,
compile only) found it: its cluster and slice counts in every layout, its engine numbers in every
engine list. The construct names a version accepts (`cast` or `widen`/`narrow`, `lut` or `decode`)
are learnt first, by the vocabulary probes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from chiplore.core.probes import ConstructProbe, LimitProbe, PairProbe, RuleProbes, Vocabulary
from chiplore.core.rules import AtMost, Forbidden, MultipleOf, NotIn, OneOf, Stated
from chiplore.simulator.shape import Chip

# role -> the construct name this version accepts (up, down, lut); and the shape the programs are
# written for: clusters, slices, `other` (an engine beside engine 0, for a second DMA), `remote`
# (cluster 1's first engine; "" on a chip of one cluster)
Names = Vocabulary

HEADER = '#![toolchain = "{version}"]\n'


def cluster0(n: Names) -> str:
    """The mapping digit of a tensor in cluster 0 only."""
    return f"cluster: [1 # {n['clusters']}]"


def layouts(n: Names) -> str:
    """Row: H spread over the first slices of cluster 0, 128 values each; One: slice 0 of cluster 0."""
    return (f"layout Row = {{ {cluster0(n)}, slice: [H / 128 # {n['slices']}] }};\n"
            f"layout One = {{ {cluster0(n)}, slice: [1 # {n['slices']}] }};\n")  # fmt: skip


def kernel(version: str, n: Names, axes: str, params: str, body: str) -> str:
    return f"{HEADER.format(version=version)}axes! {{ {axes} }}\n{layouts(n)}\nkernel probe({params}) {{\n{body}}}\n"


def copy_kernel(version: str, n: Names, body: str, axes: str = "H = 2048") -> str:
    """x -> DM -> y, with `body` in between (the probes' common frame)."""
    return kernel(
        version, n, axes, "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n" + body
        + "    a.dma_into(y, engines = [0]);\n",
    )  # fmt: skip


def _pass(names: Names, stages: str, into: str = "a", source: str = "a") -> str:
    return (
        f"    main({source}).fetch(time = [H % 128 / 16], packet = [H % 16]).{names['up']}(f32){stages}"
        f".{names['down']}(bf16).commit_into({into});\n"
    )


def rule(number: str) -> Callable[[str], bool]:
    """The codes of one rule whatever severity a version gives it (E0302, W0302, N0302)."""
    return lambda code: code[1:] == number


def _vector_chain(version: str, names: Names, ops: int) -> str:
    chain = ", ".join(["add(1.0)"] * ops)
    return copy_kernel(version, names, _pass(names, f".vector({chain})"))


def _dm_bytes(version: str, names: Names, words: int) -> str:
    body = "    let big: dm<i8>{..One, elem: [B]} = dm::zeros();\n    main(big).fetch(time = [B / 8], packet = [B % 8]).commit_into(big);\n"
    return copy_kernel(version, names, body, axes=f"H = 2048, B = {8 * words}")


def _vrf_bytes(version: str, names: Names, words: int) -> str:
    body = (
        "    let f: dm<f32>{..One, elem: [V]} = dm::zeros();\n"
        "    let v: vrf<f32>{..One, elem: [V]} = sub(f).fetch(time = [V / 2], packet = [V % 2]).to_vrf();\n"
        "    main(f).fetch(time = [V / 2], packet = [V % 2]).vector(add(vrf = v)).commit_into(f);\n"
    )
    return copy_kernel(version, names, body, axes=f"H = 2048, V = {2 * words}")


def _trf_bytes(version: str, names: Names, words: int) -> str:
    body = (
        "    let t: dm<bf16>{..One, elem: [T]} = dm::zeros();\n"
        "    let xt: trf<bf16>{..One, lane: [1], elem: [T]} = sub(t).fetch(time = [T / 4], packet = [T % 4]).to_trf();\n"
        "    let o: dm<f32>{..One, elem: [1 # 8]} = main(t).fetch(time = [T / 32], packet = [T % 32])"
        ".contract(trf = xt, reduce = [T], fold = [1 # 8]).commit();\n"
    )
    return copy_kernel(version, names, body, axes=f"H = 2048, T = {32 * words}")


def _bank_run(version: str, names: Names, run: int) -> str:
    # the DMA only has to run beside the reads: 4 KB of it (64 KB left a 64 KB DM no room, and every
    # run drew E0301 instead of the bank-run diagnostic: the rule read as retired by 0.7.0)
    body = (
        f"    let p: dm<i8>{{..One, elem: [B % {128 * run}]}} = dm::zeros();\n"
        f"    let q: dm<i8>{{..One, elem: [B % 4096]}} = z.tile(B / 4096, 1, 1).dma(engines = [{names['other']}]);\n"
        f"    main(p).fetch(time = [B % 128 / 8, B % {128 * run} / 128], packet = [B % 8]).commit_into(p);\n"
    )
    return kernel(
        version, names, "H = 2048, B = 131072", "x: &hbm<bf16>[H], z: &hbm<i8>[B], y: &mut hbm<bf16>[H]",
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n" + body
        + "    a.dma_into(y, engines = [0]);\n",
    )  # fmt: skip


def _dma_packet(version: str, names: Names, packet: int) -> str:
    body = f"    let w: dm<i8>{{..One, elem: [B]}} = z.dma(engines = [{names['other']}], packet = {8 * packet});\n"
    return kernel(
        version, names, "H = 2048, B = 65536", "x: &hbm<bf16>[H], z: &hbm<i8>[B], y: &mut hbm<bf16>[H]",
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n" + body
        + "    a.dma_into(y, engines = [0]);\n",
    )  # fmt: skip


LIMITS = (
    LimitProbe(
        "dm.bytes_per_slice",
        "the largest DM buffer a slice can hold",
        _dm_bytes,
        1,
        1 << 18,
        step=8,
        frame=256,
        marks=rule("0301"),
    ),
    LimitProbe("vector.chain_ops", "the longest vector chain", _vector_chain, 1, 33, marks=rule("0412")),
    LimitProbe("vrf.bytes_per_slice", "the largest VRF operand", _vrf_bytes, 1, 1 << 12, step=8, marks=rule("0303")),
    LimitProbe(
        "trf.bytes_per_lane", "the largest TRF operand of one lane", _trf_bytes, 1, 1 << 12, step=64, marks=rule("0302")
    ),
    LimitProbe(
        "dm.bank_run", "the longest run of reads from one DM bank beside a DMA", _bank_run, 1, 512, marks=rule("0520")
    ),
    LimitProbe("dma.packet_bytes", "the largest DMA packet", _dma_packet, 1, 8192, step=8, marks=rule("0320")),
)


def _contraction(version: str, names: Names, stream: str = "bf16", context: str = "main", packet: int = 32) -> str:
    source = "x" if stream == "bf16" else "q"
    body = (
        "    let xt: trf<bf16>{..One, lane: [1], elem: [K]} = sub(k).fetch(time = [K / 4], packet = [K % 4]).to_trf();\n"
        f"    let w: dm<{stream}>{{..One, elem: [K]}} = {source}.dma(engines = [{names['other']}]);\n"
        f"    let o: dm<f32>{{..One, elem: [1 # 8]}} = {context}(w).fetch(time = [K / {packet}], packet = [K % {packet}])"
        ".contract(trf = xt, reduce = [K], fold = [1 # 8]).commit();\n"
    )
    return kernel(
        version, names, "H = 2048, K = 64",
        f"x: &hbm<bf16>[K], q: &hbm<{stream if stream.startswith('f') else 'i8'}>[K], c: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
        "    let k: dm<bf16>{..One, elem: [K]} = x.dma(engines = [0]);\n"
        "    let a: dm<bf16>{..Row, elem: [H % 128]} = c.dma(engines = [0]);\n" + body
        + "    a.dma_into(y, engines = [0]);\n",
    )  # fmt: skip


def _engines_pair(n: Names, engines: str) -> str:
    return f"    let b: dm<bf16>{{..Row, elem: [H % 128]}} = x.dma(engines = [{engines}]);\n"


def _store_rows(version: str, n: Names) -> str:
    """A store whose rows (64 bf16, 128 bytes) are half an HBM unit."""
    return kernel(version, n, "H = 2048", "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
                  f"    let a: dm<bf16>{{{cluster0(n)}, slice: [H / 64 # {n['slices']}], elem: [H % 64]}} = "
                  "x.dma(engines = [0]);\n    a.dma_into(y, engines = [0]);\n")  # fmt: skip


def _gather(version: str, n: Names, across: bool) -> str:
    """Two slices' halves gathered into one slice by the switch: across the first two clusters, or
    (`across` false, or a chip of one cluster, where there is nothing to cross) within cluster 0."""
    clusters, slices = n["clusters"], n["slices"]
    if across and n["remote"]:
        place, engines = f"cluster: [H / 32 # {clusters}], slice: [1 # {slices}]", f"0, {n['remote']}"
    else:
        place, engines = f"{cluster0(n)}, slice: [H / 32 # {slices}]", "0"
    return kernel(version, n, "H = 64", "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
                  f"    let c: dm<bf16>{{{place}, elem: [H % 32]}} = x.dma(engines = [{engines}]);\n"
                  f"    let g: dm<bf16>{{{cluster0(n)}, slice: [1 # {slices}], elem: [H]}} = main(c)"
                  f".fetch(time = [1], packet = [H % 32]).switch(gather, slice = [1 # {slices}], time = [H / 32], "
                  f"ring = {slices}).commit();\n"
                  "    g.dma_into(y, engines = [0]);\n")  # fmt: skip


PAIRS = (
    PairProbe("fetch.packet_bytes", "fetch packets are whole 8-byte words",
              lambda v, n: copy_kernel(v, n, "    main(a).fetch(time = [H % 128 / 2], packet = [H % 2]).commit_into(a);\n"),
              lambda v, n: copy_kernel(v, n, "    main(a).fetch(time = [H % 128 / 4], packet = [H % 4]).commit_into(a);\n"),
              MultipleOf(value=8)),
    PairProbe("contract.stream_packet_bytes", "what one contraction step can take",
              lambda v, n: _contraction(v, n, packet=64), lambda v, n: _contraction(v, n),
              AtMost(value=64)),
    PairProbe("contract.stream_dtype", "the stream types a contraction accepts against a bf16 operand",
              lambda v, n: _contraction(v, n, stream="i8"), lambda v, n: _contraction(v, n),
              NotIn(value=["i8"])),
    # Whether quantised weights can be contracted as they stream in, or need a decode pass first.
    PairProbe("contract.stream_dtype", "does a contraction take an f8 stream against a bf16 operand",
              lambda v, n: _contraction(v, n, stream="f8e4m3"), lambda v, n: _contraction(v, n),
              NotIn(value=["f8e4m3"])),
    PairProbe("contract.stream_dtype", "does a contraction take an f4 stream against a bf16 operand",
              lambda v, n: _contraction(v, n, stream="f4e2m1"), lambda v, n: _contraction(v, n),
              NotIn(value=["f4e2m1"])),
    PairProbe("contract.context", "where a contraction may run",
              lambda v, n: _contraction(v, n, context="sub"), lambda v, n: _contraction(v, n),
              NotIn(value=["sub"])),
    PairProbe("commit.cast", "a narrower destination needs a narrowing cast before the commit",
              lambda v, n: copy_kernel(v, n, f"    main(a).fetch(time = [H % 128 / 16], packet = [H % 16]).{n['up']}(f32)"
                                             ".vector(add(1.0)).commit_into(a);\n"),
              lambda v, n: copy_kernel(v, n, _pass(n, ".vector(add(1.0))")),
              Stated(op="requires", value="narrowing cast")),
    PairProbe("vector.input_dtype", "the vector engine computes on f32",
              lambda v, n: copy_kernel(v, n, "    main(a).fetch(time = [H % 128 / 16], packet = [H % 16]).vector(add(1.0))"
                                             ".commit_into(a);\n"),
              lambda v, n: copy_kernel(v, n, _pass(n, ".vector(add(1.0))")),
              OneOf(value=["f32", "i32"])),
    PairProbe("fetch.coverage", "a fetch reads every element of its source view",
              lambda v, n: copy_kernel(v, n, "    main(a).fetch(time = [H % 128 / 16 % 2], packet = [H % 16]).commit_into(a);\n"),
              lambda v, n: copy_kernel(v, n, "    main(a).fetch(time = [H % 128 / 16], packet = [H % 16]).commit_into(a);\n"),
              Stated(op="covers", value="source")),
    PairProbe("hbm.store_row_bytes", "stores should fill whole HBM units",
              _store_rows, lambda v, n: copy_kernel(v, n, ""),
              MultipleOf(value=256)),
    PairProbe("output.coverage", "every output element is written",
              lambda v, n: kernel(v, n, "H = 2048", "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]",
                                  "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n"
                                  "    a.tile(H / 128, 0, 8).dma_into(y.tile(H / 128, 0, 8), engines = [0]);\n"),
              lambda v, n: copy_kernel(v, n, ""),
              Stated(op="covers", value="outputs")),
    # Two engines where the chip has two (on a chip of one engine the fixed program names it once).
    PairProbe("dma.engines", "an engine list names distinct engines of the chip",
              lambda v, n: copy_kernel(v, n, _engines_pair(n, "0, 0")),
              lambda v, n: copy_kernel(v, n, _engines_pair(n, "0" if n["other"] == "0" else f"0, {n['other']}")),
              Stated(op="distinct", value=True)),
    PairProbe("view.tile_extent", "a tile stays inside its digit",
              lambda v, n: copy_kernel(v, n, f"    a.tile(H % 128, 100, 64).dma_into(y.tile(H % 128, 0, 64), engines = [{n['other']}]);\n"),
              lambda v, n: copy_kernel(v, n, f"    a.tile(H % 128, 0, 128).dma_into(y.tile(H % 128, 0, 128), engines = [{n['other']}]);\n"),
              Stated(op="within", value="extent")),
    PairProbe("names.defined", "a tensor is defined before it is used",
              lambda v, n: copy_kernel(v, n, f"    b.dma_into(y, engines = [{n['other']}]);\n" + _engines_pair(n, n["other"])),
              lambda v, n: copy_kernel(v, n, _engines_pair(n, n["other"])),
              Stated(op="defined_before_use", value=True)),
    PairProbe("names.known", "types, axes and layouts are ones the program declares",
              lambda v, n: copy_kernel(v, n, _engines_pair(n, n["other"]).replace("bf16", "bf17")),
              lambda v, n: copy_kernel(v, n, _engines_pair(n, n["other"])),
              Stated(op="declared", value=True)),
    PairProbe("switch.crosses_clusters", "whether the switch can move data between the clusters",
              lambda v, n: _gather(v, n, across=True), lambda v, n: _gather(v, n, across=False),
              Forbidden()),
    PairProbe("pass.stage_order", "the Tensor-Unit stages run in a fixed order",
              lambda v, n: copy_kernel(v, n, f"    main(a).fetch(time = [H % 128 / 16], packet = [H % 16]).{n['up']}(f32)"
                                             f".vector(add(1.0)).{n['down']}(bf16).vector(add(1.0)).commit_into(a);\n"),
              lambda v, n: copy_kernel(v, n, _pass(n, ".vector(add(1.0), add(1.0))")),
              Stated(op="order", value="fetch, decode/widen, switch, collect, contract, vector, reduce_slices, "
                                       "vector, narrow, transpose, commit")),
)  # fmt: skip


def _construct(version: str, n: Names, use: str, params: str = "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]") -> str:
    return kernel(version, n, "H = 2048", params,
                  "    let a: dm<bf16>{..Row, elem: [H % 128]} = x.dma(engines = [0]);\n" + use
                  + "    a.dma_into(y, engines = [0]);\n")  # fmt: skip


FETCH = "main(a).fetch(time = [H % 128 / 16], packet = [H % 16])"


def _decode(version: str, n: Names, stage: str) -> str:
    return _construct(
        version, n, f"    let q8: dm<f8e4m3>{{..Row, elem: [H % 128]}} = q.dma(engines = [{n['other']}]);\n"
        f"    let d: dm<bf16>{{..Row, elem: [H % 128]}} = main(q8).fetch(time = [H % 128 / 32], packet = [H % 32])"
        f".{stage}(bf16).commit();\n",
        "x: &hbm<bf16>[H], q: &hbm<f8e4m3>[H], y: &mut hbm<bf16>[H]")  # fmt: skip


def _sum(version: str, n: Names, reducer: str) -> str:
    return _construct(
        version, n, f"    let s: dm<f32>{{{cluster0(n)}, slice: [H / 128 # {n['slices']}], elem: [1 # 8]}} = "
        f"{FETCH}.{'widen' if version == '0.7.0' else 'cast'}(f32).vector(square(), sum_all()).{reducer}.commit();\n")  # fmt: skip


CONSTRUCTS = (
    ConstructProbe("cast", lambda v, n: _construct(v, n, f"    {FETCH}.cast(f32).vector(add(1.0)).cast(bf16).commit_into(a);\n")),
    ConstructProbe("widen", lambda v, n: _construct(v, n, f"    {FETCH}.widen(f32).vector(add(1.0)).narrow(bf16).commit_into(a);\n")),
    ConstructProbe("lut", lambda v, n: _decode(v, n, "lut")),
    ConstructProbe("decode", lambda v, n: _decode(v, n, "decode")),
    ConstructProbe("dma.order", lambda v, n: _construct(
        v, n, f"    let b: dm<bf16>{{..Row, elem: [H % 128]}} = x.dma(engines = [{n['other']}], order = [H / 128, H % 128]);\n")),
    ConstructProbe("allreduce_slices", lambda v, n: _sum(v, n, "allreduce_slices(add, group = [H / 128])")),
    ConstructProbe("reduce_clusters", lambda v, n: _sum(v, n, "reduce_clusters(add)")),
    ConstructProbe("buffers", lambda v, n: _construct(
        v, n, "    for c in 0..2 {\n        let b: dm<bf16>{..Row, elem: [H % 128], buffers: 2} = "
              f"x.dma(engines = [{n['other']}]);\n    }}\n")),
)  # fmt: skip


def vocabulary(available: Mapping[str, bool], found: Mapping[str, float]) -> Names:
    """The names the other probes are written in: the construct names this version has, and the
    shape MB00 found (`found`, by its fit's names; the documented shape where it found nothing)."""
    chip = Chip.named(found)
    return {
        "up": "widen" if available.get("widen") else "cast",
        "down": "narrow" if available.get("widen") else "cast",
        "lut": "decode" if available.get("decode") else "lut",
        "clusters": str(chip.clusters),
        "slices": str(chip.slices),
        "other": str(chip.beside_first(1)[0]),
        "remote": str(chip.engine(1, 0)) if chip.clusters > 1 else "",
    }


RULE_PROBES = RuleProbes(constructs=CONSTRUCTS, pairs=PAIRS, limits=LIMITS, vocabulary=vocabulary, structure=("MB00",))
