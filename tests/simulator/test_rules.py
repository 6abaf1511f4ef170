"""Table-driven rule tests: for every checked rule and every version, a program that triggers it at
the severity that version gives it, and a near-identical one that is clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from chiplore.simulator.toolchain.check import RULES_CHECKED, check
from chiplore.simulator.toolchain.rule_examples import CASES, INCIDENTAL, PRELUDE, WHOLE, contraction, example
from chiplore.simulator.toolchain.rule_examples import example_source as _source
from chiplore.simulator.toolchain.rules import BY_NUMBER, VERSIONS
from tests.simulator.programs import all_programs, label


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


@pytest.mark.parametrize("version", VERSIONS)
def test_a_file_holds_one_kernel_whose_parameters_are_in_hbm(version: str) -> None:
    breaking, fixed = example("0106", version)
    assert [d.code for d in check(breaking, version).diagnostics] == ["E0106"]
    assert check(fixed, version).diagnostics == ()
    second = fixed + "kernel k2(x: &hbm<bf16>[H]) {\n}\n"
    [found] = check(second, version).diagnostics
    assert found.code == "E0106" and "kernel k2 is a second one (after k)" in found.message
    assert [d.code for d in check("axes! { H = 64 }\n", version).diagnostics] == ["E0106"]
    in_dm = fixed.replace("x: &hbm<bf16>[H]", "x: dm<bf16>{..One, elem: [H]}")
    assert "x of kernel k is not in HBM" in check(in_dm, version).diagnostics[0].message


# Checked rules whose per-version tests live outside the table (they need a whole program or a header).
TESTED_ELSEWHERE = {
    "0101": "test_toolchain.test_ferc_check_shows_a_caret_and_fails and the parser tests",
    "0102": "test_toolchain.test_unknown_names_are_e0102_with_a_suggestion",
    "0103": "test_toolchain.test_version_vocabulary",
    "0106": "test_a_file_holds_one_kernel_whose_parameters_are_in_hbm",
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
    """0.7.0's `buffers: 2` on a TRF halves what each buffer may hold (E0302), per slice and per lane."""
    body = "    let t: trf<bf16>{{..One, lane: [1 # {lanes}], elem: [{elem}], buffers: 2}} = dm::empty();\n"
    found = [(d.code, d.message) for d in check(_source(body.format(lanes=8, elem="B / 32")), "0.7.0").diagnostics]
    assert found == [("E0302", "TRF use 65,536 B per slice exceeds 32,768 B per buffer when the TRF has 2 buffers")]
    [lane] = check(_source(body.format(lanes=1, elem="B / 32")), "0.7.0").diagnostics
    assert lane.code == "E0302" and "8,192 B per lane exceeds 4,096 B per buffer" in lane.message
    assert check(_source(body.format(lanes=8, elem="B / 64")), "0.7.0").diagnostics == ()


SINGLE_LANE_TRF = """axes! {{ L = {size} }}
layout One = {{ cluster: [1 # 2], slice: [1 # 256] }};
kernel k(x: &hbm<bf16>[L], y: &mut hbm<bf16>[L]) {{
    let a: dm<bf16>{{..One, elem: [L]}} = x.dma(engines = [0]);
    let xt: trf<bf16>{{..One, lane: [1], elem: [L]}} = sub(a).fetch(time = [L / 16], packet = [L % 16]).to_trf();
    a.dma_into(y, engines = [0]);
}}
"""


@pytest.mark.parametrize("version", VERSIONS)
def test_a_trf_lane_holds_8_kb(version: str) -> None:
    """Issue 20, finding 3: the docs say a TRF holds 8 KB per lane, and an 11,264-byte single-lane
    TRF compiled (only the 64 KB per slice was checked)."""
    [diagnostic] = check(SINGLE_LANE_TRF.format(size=5632), version).diagnostics
    assert diagnostic.code == "E0302" and "11,264 B per lane exceeds 8,192 B" in diagnostic.message
    assert check(SINGLE_LANE_TRF.format(size=4096), version).diagnostics == ()


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


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("number", sorted(WHOLE))
def test_whole_program_examples_trigger_their_rule(number: str, version: str) -> None:
    """The docs' examples for the rules tested elsewhere: the breaking one has the code, the fix none."""
    breaking, fixed = example(number, version)
    expected = BY_NUMBER[number].code(version)
    found = [d.code for d in check(breaking, version).diagnostics]
    assert found == ([expected] if expected else []), found
    assert [d.code for d in check(fixed, version).diagnostics] == []


BUDGET_BUSTER = """#![toolchain = "0.6.0"]
// Issue 21: a small program whose kernel loop unrolls into thousands of passes kept ferc busy for minutes.
axes! {{ H = 4096, Q = 1000 }}
layout Row = {{ cluster: [1 # 2], slice: [H / 16 % 256] }};

fn scale(t: dm<bf16>{{..Row, elem: [H % 16]}}) -> dm<bf16>{{..Row, elem: [H % 16]}} {{
    let w: dm<f32>{{..Row, elem: [H % 16]}} = main(t).fetch(time = [H % 16 / 8], packet = [H % 8]).cast(f32)
        .vector(mul(2.0)).commit();
    main(w).fetch(time = [H % 16 / 8], packet = [H % 8]).vector(add(1.0)).cast(bf16).commit()
}}

kernel busy(x: &hbm<bf16>[Q, H], y: &mut hbm<bf16>[Q, H]) {{
    for q in 0..{count} {{
        let a: dm<bf16>{{..Row, elem: [H % 16]}} = x.tile(Q, q % 1000, 1).dma(engines = [0, 1]);
        let b = scale(a);
        b.dma_into(y.tile(Q, q % 1000, 1), engines = [2]);
    }}
}}
"""


@pytest.mark.parametrize("count", [1000, 10**9])
def test_a_program_past_the_budget_is_one_diagnostic(count: int) -> None:
    """Refused before anything is unrolled: a loop of a billion iterations answers as fast as one of
    a thousand (lowering it would never finish)."""
    [diagnostic] = check(BUDGET_BUSTER.format(count=count), "0.6.0").diagnostics
    assert diagnostic.code == "E0104" and "more than 4,096 steps" in diagnostic.message
    assert diagnostic.span is not None and diagnostic.span.line == 13  # the loop


def test_programs_inside_the_budget_compile_and_recursion_does_not() -> None:
    assert check(BUDGET_BUSTER.format(count=100), "0.6.0").ok
    recursive = BUDGET_BUSTER.format(count=1).replace("main(w).fetch(", "let again = scale(t);\n    main(w).fetch(")
    [diagnostic] = check(recursive, "0.6.0").diagnostics
    assert diagnostic.code == "E0104" and "calls of fn scale nest more than 32 deep" in diagnostic.message
    padded = BUDGET_BUSTER.format(count=1) + "// " + "x" * 70_000 + "\n"
    [diagnostic] = check(padded, "0.6.0").diagnostics
    assert diagnostic.code == "E0104" and "bytes of source" in diagnostic.message


@pytest.mark.parametrize("path", all_programs(), ids=label)
def test_shipped_programs_are_well_inside_the_budget(path: Path) -> None:
    from chiplore.simulator.dsl.parser import parse
    from chiplore.simulator.toolchain.budget import MAX_LOWERING_STEPS, MAX_SOURCE_BYTES, lowering_steps

    source = path.read_text()
    assert lowering_steps(parse(source)) <= MAX_LOWERING_STEPS // 4 and len(source) <= MAX_SOURCE_BYTES // 4
