"""Programs built to break a compiler get coded answers from `ferc check` and `fe-run submit`: deep
nesting of every construct, huge literals and loops, binary garbage, shadowed names (docs/simrngd.md
§3.1, §5.6). The subprocess campaign of 1,000 is `benchmarks/hostile_programs.py`; here a sample of
every kind runs in-process."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.simulator.dsl.parser import MAX_NESTING_DEPTH
from chiplore.simulator.fe_run import main as fe_run
from chiplore.simulator.ferc import main as ferc
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.hostile import ALL_KINDS, KERNEL_HEAD, UNCODED, answer, hostile
from chiplore.simulator.toolchain.lower import lower

SAMPLE_BYTES = 3_000  # the sample's inputs stay small: the campaign fills the 64 KB budget
TAIL = "    x.dma_into(y, engines = [0]);\n}\n"


def codes(source: str, version: str | None = None) -> list[str]:
    return [d.code for d in check(source, version).diagnostics]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_kind_of_hostile_input_gets_a_coded_answer_from_both_tools(kind: str, tmp_path: Path) -> None:
    index = ALL_KINDS.index(kind)  # input i of a campaign is of kind i % len(ALL_KINDS)
    item = hostile(20261202, index, size=SAMPLE_BYTES)
    assert item.kind == kind
    path = tmp_path / "hostile.fe"
    path.write_bytes(item.data)
    runner = CliRunner()
    checked = runner.invoke(ferc, ["check", str(path)])
    submitted = runner.invoke(fe_run, ["submit", str(path), "--kernel", item.kernel, "--fixtures", "smoke",
                                       "--data-dir", str(tmp_path / "data")])  # fmt: skip
    for tool, result in (("ferc check", checked), ("fe-run submit", submitted)):
        assert result.exception is None or isinstance(result.exception, SystemExit), (tool, repr(result.exception))
        verdict = answer(result.exit_code, result.stdout, result.stderr, tool)
        assert verdict.answer not in UNCODED, (tool, verdict, result.output[-2000:])
    if item.expect:
        assert set(answer(checked.exit_code, checked.stdout, checked.stderr, "ferc check").codes) & item.expect


# ---- the limits: nesting depth and literals (E0105) ------------------------------------------------

DEEP = {  # each construct that nests, `n` times
    "for": lambda n: KERNEL_HEAD + "for i in 0..1 {\n" * n + "}\n" * n + TAIL,
    "unary minus": lambda n: KERNEL_HEAD + f"    let n = {'-' * n}1;\n" + TAIL,
    "binary operator": lambda n: KERNEL_HEAD + f"    let n = {' + '.join(['1'] * (n + 1))};\n" + TAIL,
    "method chain": lambda n: KERNEL_HEAD + f"    let n = x{'.tile(H, 0, 64)' * n};\n" + TAIL,
    "call": lambda n: KERNEL_HEAD + f"    let n = {'exp(' * n}x{')' * n};\n" + TAIL,
}


@pytest.mark.parametrize("construct", sorted(DEEP))
def test_nesting_past_the_limit_is_one_e0105_and_within_it_is_checked_as_usual(construct: str) -> None:
    deep = check(DEEP[construct](MAX_NESTING_DEPTH + 400))
    assert [d.code for d in deep.diagnostics] == ["E0105"]
    assert "past the compiler's limit of 100 levels" in deep.diagnostics[0].message
    shallow = codes(DEEP[construct](5))
    assert "E0105" not in shallow and "E0100" not in shallow


def test_the_issue_60000_minus_signs_are_refused_with_a_short_caret_line(tmp_path: Path) -> None:
    path = tmp_path / "minus.fe"
    path.write_text(DEEP["unary minus"](60_000))
    result = CliRunner().invoke(ferc, ["check", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stdout.startswith("error[E0105]: the program's nesting is past the compiler's limit of 100 levels")
    assert max(len(line) for line in result.stdout.splitlines()) < 300  # the 60 KB line is shown around its caret
    parentheses = KERNEL_HEAD + "    let n = " + "(" * 20_000 + "1" + ")" * 20_000 + ";\n" + TAIL
    assert "E0105" not in codes(parentheses)  # parentheses add no level: the parser's own stack takes them


@pytest.mark.parametrize(("construct", "depth"), [("for", 500), ("unary minus", 60_000)], ids=["for", "minus"])
def test_the_issues_deep_files_are_one_e0105_from_both_tools(construct: str, depth: int, tmp_path: Path) -> None:
    """The issue's two inputs (a 16 KB file of 500 nested loops, 60,000 minus signs) crashed both tools
    with a RecursionError; each tool now answers with the one coded diagnostic."""
    path = tmp_path / "deep.fe"
    path.write_text(DEEP[construct](depth))
    runner = CliRunner()
    checked = runner.invoke(ferc, ["check", str(path)])
    submitted = runner.invoke(fe_run, ["submit", str(path), "--kernel", "k", "--fixtures", "smoke",
                                       "--data-dir", str(tmp_path / "data")])  # fmt: skip
    for tool, result in (("ferc check", checked), ("fe-run submit", submitted)):
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (tool, repr(result.exception))
        assert "Traceback" not in result.output and "RecursionError" not in result.output, tool
        verdict = answer(result.exit_code, result.stdout, result.stderr, tool)
        assert verdict.answer not in UNCODED and verdict.codes == ("E0105",), (tool, verdict, result.output[-2000:])


@pytest.mark.parametrize(
    ("literal", "refused"),
    [("9223372036854775807", False), ("9223372036854775808", True), ("9" * 5_000, True), ("1e308", False),
     ("1e309", True), ("9" * 400 + ".0", True), ("1e-400", False)],
    ids=["i64-max", "past-i64", "5000-digits", "f64-max", "past-f64", "long-float", "underflow"],
)  # fmt: skip
def test_integer_and_float_literals_past_64_bits_are_e0105(literal: str, refused: bool) -> None:
    place = "let n = {};" if "." in literal or "e" in literal else "let n = {} + 1;"
    found = codes(KERNEL_HEAD + "    " + place.format(literal) + "\n" + TAIL)
    assert ("E0105" in found) is refused, found
    assert "E0100" not in found


def test_an_hbm_tensor_past_a_terabyte_is_e0105() -> None:
    head = KERNEL_HEAD.replace("H = 64", "H = 64, A = 1048576, B = 1048576")
    head = head.replace("x: &hbm<bf16>[H]", "x: &hbm<bf16>[H], w: &hbm<bf16>[A, B]")
    staged = "let d: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = x.dma(engines = [1]);\n    d.dma_into"
    source = head + TAIL.replace("x.dma_into", staged)
    found = check(source).diagnostics
    assert [d.code for d in found] == ["E0105"]
    assert found[0].message.startswith("an HBM tensor of 2,199,023,255,552 bytes is past the compiler's limit")


# ---- the budget: unrolling refused by counting, not by memory (E0104) --------------------------------


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_loops_unrolling_to_a_billion_statements_are_refused_by_the_budget_without_unrolling(depth: int) -> None:
    loops = "".join(f"for i{d} in 0..1000000000 {{\n" for d in range(depth))
    body = "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = x.dma(engines = [0]);\n"
    source = KERNEL_HEAD + loops + body + "}\n" * depth + TAIL
    tracemalloc.start()
    try:
        found = check(source).diagnostics
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [d.code for d in found] == ["E0104"] and "more than 4,096 steps" in found[0].message
    assert peak < 20 * 1024 * 1024, peak  # the step counter stops at the limit: nothing of the loop is built


def test_a_fn_that_calls_itself_is_refused_by_the_budget() -> None:
    source = "axes! { H = 64 }\nfn f(v: &hbm<bf16>[H]) {\n    f(v);\n}\n" + KERNEL_HEAD.split("\n", 1)[1]
    found = check(source + "    f(x);\n" + TAIL).diagnostics
    assert [d.code for d in found] == ["E0104"] and "nest more than 32 deep" in found[0].message


# ---- names bound once (E0502) -----------------------------------------------------------------------

ISSUE = """#![toolchain = "0.6.0"]
axes! { A = 16, S = 256, B = 1024 }

kernel load(src: &hbm<i8>[A, S, B], out: &mut hbm<i8>[S, B]) {
    let d: dm<i8>{cluster: [1 # 2], slice: [S], elem: [A, B]} = src.dma(engines = [0, 1]);
    let out: dm<i8>{cluster: [at(1, 2)], slice: [S], elem: [B]} = d.tile(A, 0, 1).dma(engines = [4]);
    out.dma_into(out, engines = [5]);
}
"""


def test_a_local_tensor_named_like_the_output_is_e0502_not_an_internal_error() -> None:
    [found] = check(ISSUE).diagnostics
    assert found.code == "E0502" and found.span is not None and found.span.line == 6
    assert found.message.startswith("'out' is already bound, as a parameter (line 4): Ferrite has no shadowing")
    # the lowerer, which callers may run without checking, still reports the parameter as the output
    assert [coverage.param for coverage in lower(ISSUE).outputs] == ["out"]


LET = "    let {name}: dm<bf16>{{cluster: [1 # 2], slice: [1 # 256], elem: [H]}} = x.dma(engines = [1]);\n"


@pytest.mark.parametrize(
    ("body", "bound"),
    [
        (LET.format(name="x"), "'x' is already bound, as a parameter"),
        (LET.format(name="H"), "'H' is already bound, as an axis"),
        (LET.format(name="auto"), "'auto' is already bound, as a keyword"),
        (LET.format(name="t") + LET.format(name="t"), "'t' is already bound, as a let (line 3)"),
        ("    for i in 0..2 {\n" + LET.format(name="t") + "    }\n    for j in 0..2 {\n" + LET.format(name="t")
         + "    }\n", "'t' is already bound, as a let (line 4)"),
        (LET.format(name="t") + "    for t in 0..2 {\n    }\n", "'t' is already bound, as a let"),
        ("    for i in 0..2 {\n        for i in 0..2 {\n        }\n    }\n",
         "'i' is already bound, as a loop variable"),
        (LET.format(name="t") + "    t = x.dma(engines = [2]);\n", "'t' is already bound, as a let"),
    ],
    ids=["parameter", "axis", "keyword", "let-twice", "let-in-two-loops", "loop-over-let", "nested-loops", "assign"],
)  # fmt: skip
def test_rebinding_a_name_in_scope_is_e0502(body: str, bound: str) -> None:
    found = check(KERNEL_HEAD + body + TAIL).diagnostics
    assert [d.code for d in found if d.code != "W0801"][:1] == ["E0502"], found
    assert any(d.message.startswith(bound) for d in found), [d.message for d in found]


def test_sibling_loops_may_reuse_their_variable_and_a_let_may_take_another_loops_variable() -> None:
    body = "    for i in 0..2 {\n    }\n    for i in 0..2 {\n        let c = i * 2;\n    }\n    for c in 0..2 {}\n"
    assert "E0502" not in codes(KERNEL_HEAD + body + TAIL)


def test_a_layout_declared_twice_and_a_layout_that_spreads_itself_are_refused() -> None:
    twice = "layout One = { cluster: [1 # 2], slice: [1 # 256] };\n"
    assert "E0502" in codes("axes! { H = 64 }\n" + twice + twice + KERNEL_HEAD.split("\n", 1)[1] + TAIL)
    cycle = "layout L0 = { ..L1 };\nlayout L1 = { ..L0 };\n"
    [found] = [d for d in check("axes! { H = 64 }\n" + cycle + KERNEL_HEAD.split("\n", 1)[1] + TAIL).diagnostics]
    assert found.code == "E0501" and "layout L0 spreads itself (L0 -> L1 -> L0)" in found.message
    chain = "".join(f"layout L{i} = {{ ..L{i + 1} }};\n" for i in range(2_000))  # a chain, not nesting: no recursion
    chain += "layout L2000 = { cluster: [1 # 2], slice: [1 # 256] };\n"
    use = "    let d: dm<bf16>{..L0, elem: [H]} = x.dma(engines = [1]);\n    d.dma_into(y, engines = [0]);\n}\n"
    assert codes("axes! { H = 64 }\n" + chain + KERNEL_HEAD.split("\n", 1)[1] + use) == []


def test_an_output_of_a_literal_shape_that_nothing_writes_is_w0801_not_an_internal_error() -> None:
    """`&mut hbm<bf16>[4]` holds no axis: naming its first unwritten element crashed (E0100)."""
    source = '#![toolchain = "0.6.0"]\nkernel k(y: &mut hbm<bf16>[4]) {\n}\n'
    for version, codes in (("0.5.0", []), ("0.6.0", ["W0801"]), ("0.7.0", ["E0801"])):  # 0.5.0 had no E0801
        assert [d.code for d in check(source, version).diagnostics] == codes, version
