"""Table-driven rule tests: for every checked rule and every version, a program that triggers it at
the severity that version gives it, and a near-identical one that is clean."""

from __future__ import annotations

import pytest

from simulator.toolchain.check import RULES_CHECKED, check
from simulator.toolchain.rules import BY_NUMBER, VERSIONS

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
CASES = {
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
    "0302": (
        lambda v: "    let t: trf<bf16>{..One, lane: [1 # 8], elem: [B / 16]} = dm::empty();\n",
        lambda v: "    let t: trf<bf16>{..One, lane: [1 # 2], elem: [B / 16]} = dm::empty();\n",
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
    "0501": (
        lambda v: "    b.dma_into(y, engines = [0]);\n    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n",
        lambda v: "    let b: dm<bf16>{..One, elem: [H]} = x.dma(engines = [1]);\n    b.dma_into(y, engines = [0]);\n",
    ),
}

# Codes a case's pair shares by construction (both store four 2-byte partials into a 128-byte y).
INCIDENTAL = {"0710": {"W0322"}}


def _source(body: str) -> str:
    return PRELUDE + body + "    a.dma_into(y, engines = [0]);\n}\n"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_triggers_at_its_severity_and_not_on_the_fixed_program(case: str, version: str) -> None:
    triggering, clean = CASES[case]
    number = case.split("/")[0]  # "0301/peak": a second case of rule 0301
    expected = BY_NUMBER[number].code(version)
    incidental = INCIDENTAL.get(case, set())
    found = [d.code for d in check(_source(triggering(version)), version).diagnostics if d.code not in incidental]
    if expected is None:
        assert not any(code.endswith(number) for code in found)
    else:
        assert expected in found, found
        assert all(code == expected for code in found), f"only {expected} expected, got {found}"
    assert [d.code for d in check(_source(clean(version)), version).diagnostics if d.code not in incidental] == []


def test_e0410_is_a_warning_in_050_and_an_error_after() -> None:
    body = CASES["0410"][0]
    result = check(_source(body("0.5.0")), "0.5.0")
    assert [(d.code, d.severity) for d in result.diagnostics] == [("W0410", "warning")] and result.ok
    assert not check(_source(body("0.6.0")), "0.6.0").ok


def test_mixed_precision_contraction_arrives_in_060() -> None:
    body = contraction("bf16").replace("dm<bf16>{..One, elem: [H]} = x.dma", "dm<f8e4m3>{..One, elem: [H]} = z.dma")
    source = _source(body).replace("y: &mut hbm<bf16>[H]", "y: &mut hbm<bf16>[H], z: &hbm<f8e4m3>[H]")
    assert [d.code for d in check(source, "0.5.0").diagnostics] == ["E0403"]
    assert check(source, "0.6.0").diagnostics == ()


@pytest.mark.parametrize("version", VERSIONS)
def test_fetch_must_refactor_the_source_elem_digits(version: str) -> None:
    bad = "    let t: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 3], packet = [H % 3]).commit();\n"
    found = check(_source(bad), version).diagnostics
    assert [d.code for d in found] == ["E0204"] and "no common refinement" in found[0].message
    twice = "    let t: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 8], packet = [H % 16]).commit();\n"
    assert [d.code for d in check(_source(twice), version).diagnostics] == ["E0204"]
    good = "    let t: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 16 % 2, H / 32], packet = [H % 16])"
    assert check(_source(good + ".commit();\n"), version).diagnostics == ()


def test_pipeline_buffers_count_towards_dm_capacity() -> None:
    body = (
        "    #[pipeline(depth = 2)]\n    for c in 0..2 {\n"
        "        let t: dm<bf16>{..One, elem: [B]} = dm::empty();\n    }\n"
    )
    [diagnostic] = check(_source(body), "0.6.0").diagnostics
    assert diagnostic.code == "E0301"
    assert "peaks at 524,288 B (> 491,520 B usable)" in diagnostic.message


def test_070_reserves_more_dm() -> None:
    body = "    let t: dm<i8>{..One, elem: [C]} = dm::empty();\n"  # 480,000 B per slice
    assert check(_source(body), "0.6.0").diagnostics == ()
    [diagnostic] = check(_source(body), "0.7.0").diagnostics
    assert diagnostic.code == "E0301" and "475,136 B usable" in diagnostic.message


@pytest.mark.parametrize("version", VERSIONS)
def test_an_output_nothing_writes(version: str) -> None:
    source = _source("").replace("    a.dma_into(y, engines = [0]);\n", "")
    expected = BY_NUMBER["0801"].code(version)
    assert [d.code for d in check(source, version).diagnostics] == ([expected] if expected else [])


def test_a_loop_that_never_runs_tiles_nothing() -> None:
    # Found by the fuzz test: an empty range once crashed the tile-extent rule.
    body = (
        "    for c in 4..0 {\n"
        "        let t: dm<bf16>{..One, elem: [H % 16]} = x.tile(H % 64, c * 16, 16).dma(engines = [1]);\n    }\n"
    )
    assert check(_source(body), "0.6.0").diagnostics == ()


def test_a_bank_run_is_legal_when_no_dma_can_overlap_the_pass() -> None:
    """The only DMA into the cluster produces what the pass reads, so it has finished before."""
    source = """axes! { B = 131072, H = 64 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel k(x: &hbm<i8>[B], y: &mut hbm<i8>[B]) {
    let p: dm<i8>{..One, elem: [B % 8192]} = x.tile(B / 8192, 0, 1).dma(engines = [0]);
    main(p).fetch(time = [B % 128 / 8, B % 8192 / 128], packet = [B % 8]).commit_into(p);
    p.dma_into(y.tile(B / 8192, 0, 1), engines = [0]);
}
"""
    codes = [d.code for d in check(source, "0.7.0").diagnostics]
    assert "E0520" not in codes and "E0801" in codes  # y is only partly written; nothing overlaps the pass
    second = "    let q: dm<i8>{..One, elem: [B % 8192]} = x.tile(B / 8192, 1, 1).dma(engines = [1]);\n"
    store = "\n    q.dma_into(y.tile(B / 8192, 1, 1), engines = [1]);"
    concurrent = source.replace("    main(p)", second + "    main(p)").replace(
        "commit_into(p);", "commit_into(p);" + store
    )
    assert "E0520" in [d.code for d in check(concurrent, "0.7.0").diagnostics]


# Checked rules whose per-version tests live outside the table (they need a whole program or a header).
TESTED_ELSEWHERE = {
    "0101": "test_toolchain.test_ferc_check_shows_a_caret_and_fails and the parser tests",
    "0102": "test_toolchain.test_unknown_names_are_e0102_with_a_suggestion",
    "0103": "test_toolchain.test_version_vocabulary",
    "0702": "test_toolchain.test_pipeline_attribute_is_deprecated_only_in_070",
    "0801": "test_an_output_nothing_writes",
}


def test_every_checked_rule_has_a_triggering_and_a_clean_program() -> None:
    tabled = {case.split("/")[0] for case in CASES}
    assert set(RULES_CHECKED) == tabled | set(TESTED_ELSEWHERE)
    assert not tabled & set(TESTED_ELSEWHERE)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_output_written_only_in_part(version: str) -> None:
    """The bug zoo's incomplete coverage: a tile length of 48 where y has 64 elements."""
    partial = PRELUDE + "    a.tile(H, 0, 48).dma_into(y.tile(H, 0, 48), engines = [0]);\n}\n"
    found = [(d.code, d.message) for d in check(partial, version).diagnostics if d.code != "W0322"]
    expected = BY_NUMBER["0801"].code(version)
    if expected is None:
        assert found == []
    else:
        assert found == [(expected, "output y is not fully written: 48 of 64 elements, the first missing at H=48")]
    assert check(PRELUDE + "    a.dma_into(y, engines = [0]);\n}\n", version).diagnostics == ()


def test_a_double_buffered_trf_holds_32_kb_per_buffer() -> None:
    """0.7.0's `buffers: 2` on a TRF halves what each buffer may hold (E0302)."""
    body = "    let t: trf<bf16>{{..One, lane: [1 # {lanes}], elem: [B / 16], buffers: 2}} = dm::empty();\n"
    found = [(d.code, d.message) for d in check(_source(body.format(lanes=3)), "0.7.0").diagnostics]
    assert found == [("E0302", "TRF use 49,152 B per slice exceeds 32,768 B per buffer when the TRF has 2 buffers")]
    assert check(_source(body.format(lanes=2)), "0.7.0").diagnostics == ()


def test_a_digit_that_cuts_an_atom_of_a_composite_axis_is_e0204() -> None:
    source = """axes! { Ns = 8, Ds = 256, Qs = (Ns, Ds) }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel k(x: &hbm<bf16>[Qs], y: &mut hbm<bf16>[Qs]) {
    let a: dm<bf16>{..One, elem: [Qs / 320 % 6, Qs % 320]} = x.dma(engines = [0]);
    a.dma_into(y, engines = [0]);
}
"""
    found = [d for d in check(source, "0.6.0").diagnostics if d.code == "E0204"]
    assert found and found[0].message.startswith("Qs / 320 % 6 cuts an atom of Qs (Ns, Ds)")
    assert check(source.replace("Qs / 320 % 6, Qs % 320", "Qs / 256, Qs % 256"), "0.6.0").diagnostics == ()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("main(a)", "main()", "main(..) needs a source tensor"),
        (".commit_into(a)", ".commit_into()", "commit_into(view) ends a pass in an existing tensor"),
    ],
)
def test_a_pass_without_source_or_destination_is_e0120(old: str, new: str, message: str) -> None:
    body = "    main(a).fetch(time = [H / 16], packet = [H % 16]).commit_into(a);\n"
    found = [d for d in check(_source(body.replace(old, new)), "0.6.0").diagnostics if d.code == "E0120"]
    assert found and found[0].message.startswith(message)
    assert check(_source(body), "0.6.0").diagnostics == ()
