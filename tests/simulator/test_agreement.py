"""The compiler and the executor agree (issue 20): the findings of writing new kernels as a user
would, each a regression test, and the executor serving a kernel the harness does not run."""

from __future__ import annotations

import numpy as np
import pytest

from chiplore.core.target import KernelParam
from chiplore.simulator.execute.cases import KernelCase
from chiplore.simulator.execute.executor import execute_program
from chiplore.simulator.execute.grading import grade_case, host_test
from chiplore.simulator.execute.numerics import F8_VALUES, bf16, f8_encode
from chiplore.simulator.execute.recipe import FixtureRecipe, draw_inputs
from chiplore.simulator.execute.signature import kernel_signature
from chiplore.simulator.execute.values import InputError, Inputs, Periodic, decode
from chiplore.simulator.toolchain.check import check

HALF_TILE = """#![toolchain = "0.6.0"]
axes! { H = 8, K = 64 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };

kernel half(x: &hbm<f32>[H, K], s: &hbm<f32>[H, K], y: &mut hbm<f32>[H, K]) {
    let d8: dm<f32>{..One, elem: [H % 8, K]} = x.dma(engines = [0]);
    let sd: dm<f32>{..One, elem: [H % 8 = 4, K]} = s.tile(H % 8, 4, 4).dma(engines = [0]);
    let sv: vrf<f32>{..One, elem: [H % 8 = 4, K]} = sub(sd).fetch(time = [H % 8 = 4, K / 8], packet = [K % 8]).to_vrf();
    let mut out: dm<f32>{..One, elem: [H % 8, K]} = dm::zeros();
    main(STREAM)
        .fetch(time = [TIME, K / 8], packet = [K % 8])
        .vector(mul(vrf = sv))
        .commit_into(INTO);
    out.dma_into(y, engines = [0]);
}
"""


def _uniform(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_finding_1_a_tile_meets_a_tile_sized_operand_by_position() -> None:
    """Rows 4..7 of an 8-row tensor times a 4-row VRF into rows 4..7 of an 8-row tensor compiled
    clean, yet the executor read the VRF at rows 4..7 (past its 4 rows) and wrote NaN."""
    source = HALF_TILE.replace("STREAM", "d8.tile(H % 8, 4, 4)").replace("TIME", "H % 8 = 4")
    source = source.replace("INTO", "out.tile(H % 8, 4, 4)")
    assert check(source).diagnostics == ()
    x, s = _uniform((8, 64), 1), _uniform((8, 64), 2)
    y = execute_program(source, {"x": x, "s": s, "y": np.zeros((8, 64), np.float32)})["y"]
    expected = np.zeros((8, 64), np.float32)
    expected[4:] = x[4:] * s[4:]  # the VRF holds rows 4..7 of s at its positions 0..3
    assert np.array_equal(y, expected)


def test_finding_1_an_operand_smaller_than_the_stream_is_refused() -> None:
    """The same VRF against a stream over all 8 rows reads outside it: the compiler refuses."""
    source = HALF_TILE.replace("STREAM", "d8").replace("TIME", "H % 8").replace("INTO", "out")
    [diagnostic] = check(source).diagnostics
    assert diagnostic.code == "E0404" and "VRF operand sv does not hold digit H / 4 % 2" in diagnostic.message


TILED_NORM = """#![toolchain = "0.6.0"]
axes! { H = 64 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };

kernel tiled(residual: &mut hbm<bf16>[H], w: &hbm<bf16>[H]) {
    let xd: dm<bf16>{..One, elem: [H]} = residual.dma(engines = [0]);
    let pn: dm<bf16>{..One, elem: [H]} = w.dma(engines = [1]);
    let mut h: dm<bf16>{..One, elem: [H]} = dm::empty();
    for i in 0..2 {
        let pv: vrf<f32>{..One, elem: [HELD]} = sub(pn.tile(H, i * 32, 32))
            .fetch(time = [H % 32 / 16], packet = [H % 16]).cast(f32).to_vrf();
        main(xd.tile(H, i * 32, 32))
            .fetch(time = [H % 32 / 16], packet = [H % 16])
            .cast(f32)
            .vector(mul(vrf = pv))
            .cast(bf16)
            .commit_into(h.tile(H, i * 32, 32));
    }
    h.dma_into(residual, engines = [0]);
}
"""


def test_a_whole_digit_operand_read_over_a_tile_away_from_its_start_is_refused() -> None:
    """A norm weight applied half by half: an operand of `H % 32` (whole digits) meets the second
    half's stream at rows 32..63, past its 32 values. It compiled clean and computed NaN there; now
    E0404 says so, and the tile's extent (`H = 32`), read by position within the tile, computes it."""
    refused = check(TILED_NORM.replace("HELD", "H % 32"))
    [diagnostic] = refused.diagnostics
    assert diagnostic.code == "E0404" and "VRF operand pv does not hold digit H / 32 % 2" in diagnostic.message
    assert "the tile's extent (`A = n`)" in diagnostic.message
    extent = TILED_NORM.replace("HELD", "H = 32")
    assert check(extent).diagnostics == ()
    x, w = np.arange(1, 65, dtype=np.float32), np.repeat(np.float32([2.0, 3.0]), 32)
    out = execute_program(extent, {"residual": x, "w": w})["residual"]
    assert np.array_equal(out, bf16(x * w))


SPLIT_TILED_NORM = """#![toolchain = "0.6.0"]
axes! { K = 960 }
layout KIn = { cluster: [1 # 2], slice: [K / 480 # 256] };

kernel tiled(x: &hbm<bf16>[K], w: &hbm<bf16>[K], s: &hbm<f32>[1], y: &mut hbm<bf16>[K]) {
    let xd: dm<bf16>{..KIn, elem: [K % 480]} = x.dma(engines = [0]);
    let wd: dm<bf16>{..KIn, elem: [K % 480]} = w.dma(engines = [1]);
    let sd: dm<f32>{..KIn, elem: [1 # 8]} = s.dma(engines = [1]);
    let sv: vrf<f32>{..KIn, elem: [1 # 8]} = main(sd).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let mut h: dm<bf16>{..KIn, elem: [K % 480]} = dm::empty();
    for i in 0..10 {
        let wv: vrf<f32>{..KIn, elem: [WV]} = sub(wd.tile(K % 480, i * 48, 48))
            .fetch(time = [K % 48 / 8], packet = [K % 8]).cast(f32).to_vrf();
        main(xd.tile(K % 480, i * 48, 48))
            .fetch(time = [K % 48 / 8], packet = [K % 8])
            .cast(f32)
            .vector(mul(vrf = sv), mul(vrf = wv))
            .cast(bf16)
            .commit_into(h.tile(K % 480, i * 48, 48));
    }
    h.dma_into(y, engines = [0]);
}
"""


def test_an_operand_holding_only_coarser_digits_of_a_tiled_axis_is_broadcast_over_the_tile() -> None:
    """A norm over a slice's 480 columns, applied 48 at a time (how the generator writes it where the
    VRF holds no slice's columns): the per-slice scalar holds the slice digit `K / 480`, coarser than
    the pinned `K / 48 % 10`, and is broadcast over it; it was refused E0404 though the executor computes
    it. The weight's register with whole digits (`K % 48`) still reads past its values: E0404."""
    x, w = np.arange(1, 961, dtype=np.float32) / 100, np.linspace(0.5, 2.0, 960, dtype=np.float32)
    extent = SPLIT_TILED_NORM.replace("WV", "K % 480 = 48")
    assert [d for d in check(extent).diagnostics if d.is_error] == []
    out = execute_program(extent, {"x": x, "w": w, "s": np.float32([3.0]), "y": np.zeros(960, np.float32)})["y"]
    assert np.array_equal(out, bf16(bf16(x) * np.float32(3.0) * bf16(w)))
    [refused] = [d for d in check(SPLIT_TILED_NORM.replace("WV", "K % 48")).diagnostics if d.is_error]
    assert refused.code == "E0404" and refused.message.startswith("VRF operand wv does not hold digit K / 48 % 10")


CHUNKED_CONTRACTION = """#![toolchain = "0.6.0"]
axes! { R = 64, L = 5632 }
layout Rows = { cluster: [1 # 2], slice: [R / 8 # 256] };
layout Every = { cluster: [1 # 2], slice: [rep(8) # 256] };

kernel chunked(w: &hbm<bf16>[R, L], x: &hbm<bf16>[L], y: &mut hbm<f32>[R]) {
    let xa: dm<bf16>{..Every, elem: [L]} = x.dma(engines = [0]);
    let wf: dm<bf16>{..Rows, elem: [R % 8, L]} = w.dma(engines = [0]);
    let mut acc: dm<f32>{..Rows, elem: [R % 8]} = dm::zeros();
    for c in 0..2 {
        let xt: trf<bf16>{..Rows, lane: [1], elem: [L = 2816]} = sub(xa.tile(L, c * 2816, 2816))
            .fetch(time = [L / 16 = 176], packet = [L % 16]).to_trf();
        let part: dm<f32>{..Rows, elem: [R % 8]} = main(wf.tile(L, c * 2816, 2816))
            .fetch(time = [R % 8, L / 32 = 88], packet = [L % 32])
            .contract(trf = xt, reduce = [L], fold = [R % 8])
            .commit();
        let pv: vrf<f32>{..Rows, elem: [R % 8]} = sub(part).fetch(time = [1], packet = [R % 8]).to_vrf();
        main(acc).fetch(time = [1], packet = [R % 8]).vector(add(vrf = pv)).commit_into(acc);
    }
    let out: dm<f32>{cluster: [1 # 2], slice: [1 # 256], elem: [R]} = acc.dma(engines = [0]);
    out.dma_into(y, engines = [0]);
}
"""


def test_finding_2_a_chunk_contracts_against_a_trf_of_its_extent() -> None:
    """`wf.tile(L, c * 2816, 2816)` against a TRF loaded with the same extent was E0404 ("does not
    hold digit L / 2816 % 2"), though the executor computes it exactly."""
    assert check(CHUNKED_CONTRACTION).diagnostics == ()
    w, x = bf16(_uniform((64, 5632), 3)), bf16(_uniform((5632,), 4))
    y = execute_program(CHUNKED_CONTRACTION, {"w": w, "x": x, "y": np.zeros(64, np.float32)})["y"]
    assert np.allclose(y, w.astype(np.float64) @ x.astype(np.float64), rtol=1e-5, atol=1e-5)


# Finding 3 (a TRF lane holds 8 KB) is test_rules.test_a_trf_lane_holds_8_kb.

NARROW_ONLY = """#![toolchain = "0.6.0"]
axes! { H = 64 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel narrow_only(x: &hbm<f32>[H], y: &mut hbm<bf16>[H]) {
    let a: dm<f32>{..One, elem: [H]} = x.dma(engines = [0]);
    let b: dm<bf16>{..One, elem: [H]} = main(a).fetch(time = [H / 8], packet = [H % 8]).CHAIN.commit();
    b.dma_into(y, engines = [0]);
}
"""


def test_finding_4_a_narrowing_cast_straight_after_the_fetch_says_what_to_do() -> None:
    [diagnostic] = check(NARROW_ONLY.replace("CHAIN", "cast(bf16)")).diagnostics
    assert diagnostic.code == "E0110" and "contract or vector stage" in diagnostic.message
    fixed = NARROW_ONLY.replace("CHAIN", "vector(mul(1.0)).cast(bf16)")  # the fix the message gives
    assert check(fixed).diagnostics == ()
    x = _uniform((64,), 5)
    assert np.array_equal(execute_program(fixed, {"x": x, "y": np.zeros(64, np.float32)})["y"], bf16(x))
    ported = NARROW_ONLY.replace('"0.6.0"', '"0.7.0"')
    [widen] = check(ported.replace("CHAIN", "widen(bf16)")).diagnostics
    assert widen.code == "E0110" and "write `.narrow(bf16)`" in widen.message
    assert check(ported.replace("CHAIN", "narrow(bf16)")).diagnostics == ()


# ---- finding 5: an executor for any kernel ------------------------------------------------------

GEMV = """#![toolchain = "0.6.0"]
// A kernel the harness does not run: y = bf16((w @ x) * s), f8 weights against a bf16 activation.
axes! { R = 96, H = 256 }
layout Rows = { cluster: [1 # 2], slice: [R / 8 # 256] };
layout Every = { cluster: [1 # 2], slice: [rep(256)] };

kernel scaled_gemv(w: &hbm<f8e4m3>[R, H], s: &hbm<bf16>[R], x: &hbm<bf16>[H], y: &mut hbm<bf16>[R]) {
    let xa: dm<bf16>{..Every, elem: [H]} = x.dma(engines = [0]);
    let xt: trf<bf16>{..Rows, lane: [1], elem: [H]} = sub(xa).fetch(time = [H / 16], packet = [H % 16]).to_trf();
    let wd: dm<f8e4m3>{..Rows, elem: [R % 8, H]} = w.dma(engines = [0, 1]);
    let acc: dm<f32>{..Rows, elem: [R % 8]} = main(wd)
        .fetch(time = [R % 8, H / 64], packet = [H % 64])
        .contract(trf = xt, reduce = [H], fold = [R % 8])
        .commit();
    let sd: dm<bf16>{..Rows, elem: [R % 8]} = s.dma(engines = [2]);
    let sv: vrf<f32>{..Rows, elem: [R % 8]} = sub(sd).fetch(time = [1], packet = [R % 8]).cast(f32).to_vrf();
    let yb: dm<bf16>{..Rows, elem: [R % 8]} = main(acc)
        .fetch(time = [1], packet = [R % 8])
        .vector(mul(vrf = sv))
        .cast(bf16)
        .commit();
    let out: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [R]} = yb.dma(engines = [0]);
    out.dma_into(y, engines = [0]);
}
"""
RECIPE = FixtureRecipe.model_validate({
    "inputs": {
        "w": {"dist": {"kind": "f8_codes", "exponent_low": 5, "exponent_high": 8}, "distinct_rows": 7},
        "s": {"dist": {"kind": "uniform", "low": 0.5, "high": 1.5}},
        "x": {"dist": {"kind": "normal", "std": 0.5}, "sets": {"exact": {"dist": {"kind": "signs"}}}},
    },
    "sets": ["g0", "g1", "exact"],
})  # fmt: skip


def gemv_reference(inputs: Inputs) -> dict[str, np.ndarray]:
    w = inputs["w"]
    codes = w.dense() if isinstance(w, Periodic) else np.asarray(w)
    product = F8_VALUES[codes].astype(np.float64) @ np.asarray(inputs["x"], dtype=np.float64)
    return {"y": bf16(product.astype(np.float32) * np.asarray(inputs["s"], dtype=np.float32))}


CASE = KernelCase(name="scaled_gemv", signature=kernel_signature(GEMV), recipe=RECIPE, reference=gemv_reference,
                  atol=1e-2, rtol=1e-2, key="test:scaled_gemv")  # fmt: skip


def test_a_kernel_outside_the_harness_runs_from_its_inputs_and_is_graded() -> None:
    assert check(GEMV).ok
    for fixture_set in RECIPE.sets:
        inputs = draw_inputs(RECIPE, CASE.signature, fixture_set, seed="scaled_gemv")
        got, want = execute_program(GEMV, inputs)["y"], gemv_reference(inputs)["y"]
        assert np.allclose(got, want, atol=1e-2, rtol=1e-2), fixture_set
    correctness = grade_case(GEMV, CASE, "0.6.0", RECIPE.sets)
    assert correctness.passed and correctness.sets == ("g0", "g1", "exact"), correctness
    broken = GEMV.replace(".vector(mul(vrf = sv))", ".vector(add(vrf = sv))")
    failed = grade_case(broken, CASE, "0.6.0", ("g0",))
    assert not failed.passed and failed.message == "fails on g0:y"
    result = host_test(GEMV, CASE, "0.6.0")
    assert result.compiled and result.correctness is not None and result.correctness.passed


def test_codes_are_read_by_the_declared_dtype_whatever_their_container() -> None:
    inputs = draw_inputs(RECIPE, CASE.signature, "g0", seed="scaled_gemv")
    periodic = inputs["w"]
    assert isinstance(periodic, Periodic) and periodic.period == 7 and periodic.rows == 96
    plain = dict(inputs, w=np.ascontiguousarray(periodic.dense()))  # the same codes as a plain uint8 array
    values = dict(inputs, w=F8_VALUES[periodic.dense()])  # and as f32 values
    results = [execute_program(GEMV, given)["y"] for given in (inputs, plain, values)]
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])
    assert np.array_equal(results[0], bf16(gemv_reference(inputs)["y"]))


@pytest.mark.parametrize("period", [1, 3, 96, 509])
def test_periodic_weights_take_any_number_of_distinct_rows(period: int) -> None:
    rng = np.random.default_rng(period)
    distinct = f8_encode(rng.uniform(-2, 2, (period, 256)).astype(np.float32))
    x = bf16(rng.uniform(-1, 1, 256).astype(np.float32))
    inputs = {"w": Periodic(distinct, 96), "s": np.ones(96, np.float32), "x": x, "y": np.zeros(96, np.float32)}
    dense = np.ascontiguousarray(distinct[np.arange(96) % period])
    got = execute_program(GEMV, inputs)["y"]
    assert np.array_equal(got, execute_program(GEMV, dict(inputs, w=dense))["y"])
    assert np.allclose(got, F8_VALUES[dense].astype(np.float64) @ x, atol=1e-2, rtol=1e-2)


def test_f4_codes_unpack_low_nibble_first_in_any_container() -> None:
    param = KernelParam(name="w", type="&hbm<f4e2m1>[R, H]", mutable=False, dtype="f4e2m1",
                        shape=(("R", 2), ("H", 4)))  # fmt: skip
    packed = np.array([[0x21, 0xF9], [0x70, 0x00]], dtype=np.uint8)
    expected = [[0.5, 1.0, -0.5, -6.0], [0.0, 6.0, 0.0, 0.0]]
    assert decode(packed, param).tolist() == expected
    assert decode(Periodic(packed[:1], 2), param).distinct.tolist() == [expected[0]]
    assert decode(np.array(expected, dtype=np.float32) * 1.1, param).tolist() == expected  # values: rounded to f4


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"s": 1, "x": 1, "y": 1}, "no value for w"),
        ({"w": np.zeros((96, 256), np.uint8), "s": 1, "x": 1, "y": 1, "z": 1}, "no parameter named z"),
        ({"w": np.zeros((96, 255), np.uint8), "s": np.ones(96), "x": np.ones(256), "y": np.ones(96)}, "w: 24,480"),
        ({"w": np.full((96, 256), 300), "s": np.ones(96), "x": np.ones(256), "y": np.ones(96)}, "codes must lie"),
    ],
)
def test_inputs_that_do_not_fit_the_signature_are_one_line_errors(inputs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=message):
        execute_program(GEMV, inputs)
