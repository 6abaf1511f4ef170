"""Differential testing (issue 20): the generator's programs mean what numpy says, the judges classify,
and every disagreement the campaigns found is a regression test here (each failed before its fix)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from chiplore.simulator.execute.difftest import family_gemv, family_map, family_reduce
from chiplore.simulator.execute.difftest.campaign import Tally, program, run
from chiplore.simulator.execute.difftest.judges import AGREEMENTS, DISAGREEMENTS, judge
from chiplore.simulator.execute.difftest.program import VERSIONS, Generated
from chiplore.simulator.execute.executor import execute_program
from chiplore.simulator.toolchain.check import check

FAMILIES = {"map": family_map, "gemv": family_gemv, "reduce": family_reduce}


def generated(family: str, seed: int) -> Generated:
    rng = random.Random(seed)
    while True:
        made = FAMILIES[family].generate(rng, seed, rng.choice(VERSIONS))
        if made is not None:
            return made


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generated_programs_compile_and_mean_what_numpy_says(family: str) -> None:
    verdicts = [judge(generated(family, seed)) for seed in range(8)]
    assert [v.cls for v in verdicts] == ["accepted-correct"] * 8, [(v.cls, v.detail) for v in verdicts]


def test_the_judges_report_a_wrong_answer_as_a_disagreement() -> None:
    made = generated("map", 3)
    off = Generated(made.family, made.seed, made.version, made.source, made.recipe,
                    lambda inputs: {k: v + 1 for k, v in made.meaning(inputs).items()})  # type: ignore[misc]  # fmt: skip
    verdict = judge(off)
    assert verdict.cls == "accepted-wrong" and verdict.disagrees and "numpy says" in verdict.detail


def test_a_campaign_program_is_regenerated_alone() -> None:
    first = [v.program.source for v in run(5, seed=11)]
    assert [program(11, i).source for i in range(5)] == first
    assert set(AGREEMENTS).isdisjoint(DISAGREEMENTS)


@pytest.mark.slow
def test_a_seeded_sample_has_no_disagreements() -> None:
    """300 programs of every source (generated, mutants of generated, docs and shipped programs)."""
    tally = Tally()
    for verdict in run(300, seed=20):
        tally.add(verdict)
    unexplained = {cls: [(v.detail, v.program.source) for v in vs] for cls, vs in tally.examples.items()}
    assert tally.disagreements == 0, unexplained
    assert tally.counts["accepted-correct"] > 100 and tally.counts["refused-wrong"] > 0, tally.counts


# ---- what the campaigns found (each failed before its fix) ---------------------------------------

PRELUDE = """#![toolchain = "0.6.0"]
axes! { A = 8, B = 32 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel k(x: &hbm<f32>[A, B], s: &hbm<f32>[B], y: &mut hbm<f32>[A, B]) {
    let xd: dm<f32>{..One, elem: [A, B]} = x.dma(engines = [0]);
    let sd: dm<f32>{..One, elem: [B]} = s.dma(engines = [1]);
    let sv: vrf<f32>{..One, elem: [B]} = sub(sd).fetch(time = [B / 8], packet = [B % 8]).to_vrf();
"""
STORE = "    yd.dma_into(y, engines = [0]);\n}\n"
INPUTS = {
    "x": np.arange(256, dtype=np.float32).reshape(8, 32) / 64,
    "s": np.linspace(-1, 1, 32, dtype=np.float32),
    "y": np.zeros((8, 32), np.float32),
}


def _program(body: str) -> str:
    return PRELUDE + body + STORE


def test_sub_is_a_vector_op_not_a_second_pass() -> None:
    """`.vector(sub(vrf = sv))` was E0120 ("sub(..) needs a source tensor")."""
    source = _program("    let yd: dm<f32>{..One, elem: [A, B]} = main(xd).fetch(time = [A, B / 8], packet = [B % 8])"
                      ".vector(sub(vrf = sv), sub(0.5)).commit();\n")  # fmt: skip
    assert check(source).diagnostics == ()
    y = execute_program(source, INPUTS)["y"]
    assert np.array_equal(y, INPUTS["x"] - INPUTS["s"] - np.float32(0.5))


def test_a_negative_constant_reaches_the_executor() -> None:
    """`min(-1.0)` compiled, and the executor could not lower it ("expected an integer, found float")."""
    source = _program("    let yd: dm<f32>{..One, elem: [A, B]} = main(xd).fetch(time = [A, B / 8], packet = [B % 8])"
                      ".vector(neg(), max(-1.0)).commit();\n")  # fmt: skip
    assert check(source).diagnostics == ()
    assert np.array_equal(execute_program(source, INPUTS)["y"], np.maximum(-INPUTS["x"], -1.0))


def test_a_tile_streamed_into_a_whole_tensor_leaves_the_rest_alone() -> None:
    """Each pass streams one row into the whole of yd; the executor wrote NaN over the other rows."""
    body = ("    let mut yd: dm<f32>{..One, elem: [A, B]} = dm::zeros();\n    for c in 0..8 {\n"
            "        main(xd.tile(A, c, 1)).fetch(time = [A = 1, B / 8], packet = [B % 8]).vector(mul(2.0))"
            ".commit_into(yd);\n    }\n")  # fmt: skip
    source = _program(body)
    assert check(source).ok
    assert np.array_equal(execute_program(source, INPUTS)["y"], INPUTS["x"] * 2)


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ("    let yd: dm<f32>{cluster: [1 # 2], slice: [1 # 256], elem: [A / 0 % 8, B]} = x.dma(engines = [0]);\n",
         "E0201", "divides by 0"),
        ("    let yd: dm<f32>{..One, elem: [A, B]} = xd.tile(One % 4, 0, 4).dma(engines = [0]);\n", "E0102",
         "unknown axis 'One'"),
        ("    for c in 0..2 {\n        let t: dm<f32>{..One, elem: [A, B]} = xd.dma(engines = [0]);\n    }\n"
         "    let yd: dm<f32>{..One, elem: [A, B]} = t.dma(engines = [1]);\n", "E0501", "'t' is used before"),
        ("    for c in 0..2 {\n        let u: dm<f32>{..One, elem: [A = 1, B]} = xd.tile(A, c, 1).dma(engines = [0]);\n"
         "    }\n    let yd: dm<f32>{..One, elem: [A, B]} = xd.tile(A, c, 1).dma(engines = [1]);\n", "E0501",
         "'c' is used before"),
        ("    let yd: dm<f32>{..One, elem: [A, B]} = dm::zeros();\n    xd.tile(A, 2, 0).dma_into(yd.tile(A, 2, 0), "
         "engines = [0]);\n", "E0207", "is empty"),
        ("    let h: dm<bf16>{..One, elem: [A, B]} = x.dma(engines = [0]);\n"
         "    let yd: dm<f32>{..One, elem: [A, B]} = xd.dma(engines = [0]);\n", "E0324", "cannot turn f32 into bf16"),
        ("    let yd: dm<f32>{cluster: [1 # 2], slice: [A # 4, 1 # 64], elem: [B]} = xd.dma(engines = [0]);\n",
         "E0201", "[A # 4] has 8 positions, more than the 4 it is padded to"),
    ],
    ids=["zero-divisor", "layout-as-axis", "let-after-loop", "loop-variable-after-loop", "empty-tile", "dma-dtype",
         "pad-under-its-term"],
)  # fmt: skip
def test_what_crashed_the_compiler_is_now_a_coded_diagnostic(body: str, code: str, message: str) -> None:
    """Each was E0100 ("internal compiler error" or "cannot lower the kernel"), or accepted (a term padded
    under its size put its last values past the cluster's slices: the device ran it, `ferc stats` crashed)."""
    found = [d for d in check(_program(body)).diagnostics if d.is_error]
    assert found and found[0].code == code and message in found[0].message, [(d.code, d.message) for d in found]


def test_a_stash_a_reduction_dropped_is_refused_where_the_executor_could_not_run_it() -> None:
    """A user's RMS norm `.vector(stash(), square(), sum_all(), ..., mul(stash))` passed the check and the
    executor refused it ("vector mul needs an operand"): a reduction drops the saved value, whose shape
    the stream no longer has. Now E0501 at the read, as is a read no `stash()` precedes; a stash saved
    again after the reduction, or one whose reduction is removed with `when = 0`, runs."""
    line = "    let yd: dm<f32>{{..One, elem: [A, B]}} = main(xd).fetch(time = [A, B / 8], packet = [B % 8]){};\n"
    for chain, why in ((".vector(stash(), square(), sum_all(), add(1.0), mul(stash)).commit()", "the sum_all between"),
                       (".vector(mul(stash)).commit()", "no stash() before it")):  # fmt: skip
        [refused] = [d for d in check(_program(line.format(chain))).diagnostics if d.is_error]
        assert refused.code == "E0501" and "'stash' in mul(stash)" in refused.message and why in refused.message
    for chain, expected in ((".vector(stash(), square(), sum_all(when = 0), add(1.0), mul(stash)).commit()",
                             (INPUTS["x"] ** 2 + 1) * INPUTS["x"]),
                            (".vector(square(), stash(), add(1.0), mul(stash)).commit()",
                             (INPUTS["x"] ** 2 + 1) * INPUTS["x"] ** 2)):  # fmt: skip
        source = _program(line.format(chain))
        assert check(source).ok, check(source).diagnostics
        assert np.allclose(execute_program(source, INPUTS)["y"], expected, rtol=1e-6)


def test_a_digit_placed_twice_says_so_rather_than_quoting_it_twice() -> None:
    """`w: [N, K]` with `K = (Kh, N)` places N's digit twice: E0204 said "N % 512 and N % 512 have no
    common refinement (a digit is used twice)", which read as two digits."""
    source = (
        PRELUDE.replace("axes! { A = 8, B = 32 }", "axes! { A = 8, B = 32, C = (A, B) }").replace(
            "s: &hbm<f32>[B]", "s: &hbm<f32>[B], w: &hbm<f32>[A, C]"
        )
        + "    let yd: dm<f32>{..One, elem: [A, B]} = xd.dma(engines = [0]);\n"
        + STORE
    )
    [twice] = [d for d in check(source).diagnostics if d.is_error]
    assert twice.code == "E0204" and "(A % 8 is used twice: the axis, or a composite axis" in twice.message


def test_a_tile_of_a_composite_axis_must_keep_its_atoms_whole() -> None:
    """`o_weight.tile(Qs, c * 1024 + h * 511, 512)` crossed an atom of Qs: E0100 before, E0204 now
    (the rule now evaluates tile offsets over two loop variables, not only one)."""
    source = """#![toolchain = "0.6.0"]
axes! { Ns = 8, Ds = 256, Qs = (Ns, Ds) }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel k(x: &hbm<bf16>[Qs], y: &mut hbm<bf16>[Qs]) {
    for c in 0..2 {
        for h in 0..2 {
            let t: dm<bf16>{..One, elem: [Qs = 512]} = x.tile(Qs, c * 1024 + h * 511, 512).dma(engines = [0]);
        }
    }
    let a: dm<bf16>{..One, elem: [Qs]} = x.dma(engines = [0]);
    a.dma_into(y, engines = [0]);
}
"""
    [diagnostic] = [d for d in check(source).diagnostics if d.is_error]
    assert diagnostic.code == "E0204" and "wraps an atom digit" in diagnostic.message


def test_reading_what_nothing_wrote() -> None:
    """A loop that writes two of four rows, then a store of all four, compiled and stored NaN: now
    E0205 (a warning in 0.5.0). A tensor read before anything writes it is a note: a timing probe's
    contents do not matter."""
    body = ("    let mut yd: dm<f32>{..One, elem: [A, B]} = dm::empty();\n    for c in 0..4 {\n"
            "        xd.tile(A, c, 1).dma_into(yd.tile(A, c, 1), engines = [0]);\n    }\n")  # fmt: skip
    [hole] = check(_program(body)).diagnostics
    assert hole.code == "E0205" and "yd is read by y<-yd where nothing wrote it before" in hole.message
    assert "A % 8 = 4" in hole.message
    assert check(_program(body.replace("0..4", "0..8"))).diagnostics == ()
    assert [d.code for d in check(_program(body).replace('"0.6.0"', '"0.5.0"'), "0.5.0").diagnostics] == ["W0205"]
    never = _program("    let yd: dm<f32>{..One, elem: [A, B]} = dm::empty();\n")
    [note] = check(never).diagnostics
    assert note.code == "N0206" and check(never).ok


@pytest.mark.slow
def test_every_limit_the_docs_state_is_enforced_at_its_value() -> None:
    """Issue 20: a limit the docs state is enforced by a coded rule (or the docs state it wrongly on
    purpose, and the fact table says so). The TRF's 8 KB per lane was stated and not enforced."""
    from chiplore.simulator.execute.difftest.limits import LIMITS, check_limits

    checks = check_limits()
    assert len(checks) == len(LIMITS) * len(VERSIONS)
    failing = [(c.limit.name, c.version, c.documented, c.at_ok, c.past_refused) for c in checks if not c.enforced]
    assert failing == []


def test_a_tensor_named_where_rename_wants_an_axis_is_e0102() -> None:
    """Found by the shipped-program fuzz test: `k_weight.rename(v_weight_scale, Rall, 4096)` crashed the
    lowerer (KeyError) behind an internal compiler error."""
    body = "    let yd: dm<f32>{..One, elem: [A, B]} = x.rename(s, A, 0).dma(engines = [0]);\n"
    found = [(d.code, d.message) for d in check(_program(body)).diagnostics if d.is_error]
    assert found and found[0] == ("E0102", "unknown axis 's'"), found


def test_a_rename_past_its_target_is_e0207() -> None:
    """`rename(Ps, H, 6144)` (8,192 values of H, which has 3,840) was E0100 "cannot lower the kernel"."""
    body = "    let yd: dm<f32>{..One, elem: [A, B]} = x.rename(A, B, 30).dma(engines = [0]);\n"
    found = [(d.code, d.message) for d in check(_program(body)).diagnostics if d.is_error]
    assert found and found[0] == ("E0207", "rename of A into B[30..38) exceeds extent 32"), found


def test_folded_rows_a_contraction_commits_are_the_rows_it_writes() -> None:
    """The docs' chunked GEMV with `.commit_into(acc)` for `.commit_into(acc.tile(R % 8, c * 4, 4))`
    writes rows 0..3 of each slice twice and 4..7 never; the store read NaN and the program compiled
    (the coverage rule took the fold's digit for a reduced one)."""
    source = """#![toolchain = "0.7.0"]
axes! { R = 2048, H = 512 }
layout Rows = { cluster: [1 # 2], slice: [R / 8] };
layout Every = { cluster: [1 # 2], slice: [rep(256)] };
kernel gemv(w: &hbm<bf16>[R, H], x: &hbm<bf16>[H], y: &mut hbm<f32>[R]) {
    let xa: dm<bf16>{..Every, elem: [H]} = x.dma(engines = [0]);
    let xt: trf<bf16>{..Rows, lane: [1], elem: [H]} = sub(xa).fetch(time = [H / 16], packet = [H % 16]).to_trf();
    let mut acc: dm<f32>{..Rows, elem: [R % 8]} = dm::empty();
    for c in 0..2 {
        let wd: dm<bf16>{..Rows, elem: [R % 8 = 4, H], buffers: 2} = w.tile(R % 8, c * 4, 4).dma(engines = [0, 1]);
        main(wd).fetch(time = [R % 8 = 4, H / 32], packet = [H % 32]).contract(trf = xt, reduce = [H], fold = [R % 4])
            .commit_into(INTO);
    }
    acc.dma_into(y, engines = [0]);
}
"""
    [hole] = [d for d in check(source.replace("INTO", "acc")).diagnostics if d.is_error]
    assert hole.code == "E0205" and "acc is read by y<-acc" in hole.message and "R % 8 = 4" in hole.message
    assert check(source.replace("INTO", "acc.tile(R % 8, c * 4, 4)")).ok


@pytest.mark.slow
def test_an_output_too_large_to_follow_is_a_clean_refusal() -> None:
    """A mutant's output of 2^30 elements (refused, E0204) made the executor ask for 24 GiB."""
    from chiplore.simulator.execute.factored import ExecutionError
    from chiplore.simulator.toolchain.placement import LoweringError

    source = """#![toolchain = "0.7.0"]
axes! { C = 4, S = 256, B = 2048 }
kernel stream(src: &hbm<i8>[C, S, B], out: &mut hbm<i8>[B, S, B]) {
    for c in 0..4 {
        let d: dm<i8>{cluster: [1 # 2], slice: [S], elem: [B], buffers: 2} = src.tile(C, c, 1).dma(engines = [0, 1]);
        d.dma_into(out.tile(C, c, 1), engines = [2, 3]);
    }
}
"""
    assert "E0204" in [d.code for d in check(source).diagnostics]
    inputs = {"src": np.zeros((4, 256, 2048), np.int8), "out": np.zeros(1, np.int8)}
    with pytest.raises((LoweringError, ExecutionError)):
        execute_program(source, inputs)


def test_a_digit_a_fn_parameter_breaks_gets_the_rule_it_breaks() -> None:
    """`Q % n` and `Q / n % m` with n, m from a fn's int parameters (zero, or cutting an atom of a
    composite axis) are only known once lowering binds them: E0100 before, E0201 and E0204 now."""
    source = """#![toolchain = "0.6.0"]
axes! { Ns = 8, Ds = 256, Q = (Ns, Ds) }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
fn copy(t: dm<bf16>{..One, elem: [Q]}, n: int) -> dm<bf16>{..One, elem: [Q]} {
    main(t).fetch(time = [Q / n], packet = [Q % n]).commit()
}
kernel k(x: &hbm<bf16>[Q], y: &mut hbm<bf16>[Q]) {
    let a: dm<bf16>{..One, elem: [Q]} = x.dma(engines = [0]);
    let b = copy(a, N);
    b.dma_into(y, engines = [0]);
}
"""
    assert check(source.replace("N)", "16)")).ok
    [zero] = [d for d in check(source.replace("N)", "0)")).diagnostics if d.is_error]
    assert zero.code == "E0201" and "operands must be positive" in zero.message
    [cut] = [d for d in check(source.replace("N)", "300)")).diagnostics if d.is_error]
    assert cut.code == "E0204", cut
