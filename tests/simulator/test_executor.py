"""The functional executor against the references (docs/simrngd.md §9.3, §13): the shipped programs
pass with the official tolerances, and the bug zoo fails where the table says."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chiplore.simulator.execute.executor import Executor, IndexOutOfRange, execute, execute_program
from chiplore.simulator.execute.factored import Rows
from chiplore.simulator.execute.fixtures import fixture
from chiplore.simulator.execute.reference import grade, reference
from chiplore.simulator.toolchain.check import check
from tests.simulator.ports import port
from tests.simulator.programs import program_text

QKV, OUT, FFN = "sliding_project_qkv", "sliding_attention_output", "decoder_feedforward"


def worst_ratio(kernel: str, fixture_set: str, outputs: dict[str, np.ndarray]) -> float:
    result = grade(kernel, {fixture_set: outputs})
    assert result.worst is not None
    return result.worst.abs_err / result.worst.tol


@pytest.mark.parametrize(
    ("name", "kernel"),
    [("o_baseline", OUT), ("o_opt", OUT), ("qkv_baseline", QKV),
     ("qkv_opt", QKV)],
)  # fmt: skip
@pytest.mark.parametrize("fixture_set", ["g0", "exact", "cancel"])
def test_shipped_programs_pass_with_the_official_tolerances(name: str, kernel: str, fixture_set: str) -> None:
    outputs = execute(program_text(name), kernel, fixture_set)
    assert set(outputs) == set(reference(kernel, fixture_set))
    ratio = worst_ratio(kernel, fixture_set, outputs)
    assert ratio <= 0.5, ratio  # every set with a margin of at least 2x


def test_the_qkv_baseline_rounds_where_the_reference_does() -> None:
    outputs, expected = execute(program_text("qkv_baseline"), QKV, "g3"), reference(QKV, "g3")
    for name, value in expected.items():
        assert np.array_equal(outputs[name], value), name  # bit for bit, caches included


@pytest.mark.parametrize(
    ("bug", "kernel", "fixture_set", "at_least"),
    [
        ("o_bf16_accumulation", OUT, "cancel", 3.0),  # caught only by the cancel set ...
        ("o_opt_bf16_halves", OUT, "cancel", 3.0),
        ("o_incomplete_coverage", OUT, "g0", 3.0),
        ("o_missing_reduction", OUT, "g0", 3.0),
        ("qkv_wrong_rope_half", QKV, "g0", 3.0),
        ("o_f8_intermediate", OUT, "g0", 3.0),
        ("ffn_missing_global_scale", FFN, "g0", 3.0),
        ("o_missing_cast", OUT, "g0", 3.0),  # 0.5.0 warns (W0410) and reinterprets the f32 bytes
    ],
)
def test_the_bug_zoo_fails_where_the_table_says(bug: str, kernel: str, fixture_set: str, at_least: float) -> None:
    outputs = execute(program_text(bug), kernel, fixture_set)
    assert worst_ratio(kernel, fixture_set, outputs) >= at_least


@pytest.mark.parametrize("bug", ["o_bf16_accumulation", "o_opt_bf16_halves"])
def test_bf16_accumulation_of_wide_chunks_passes_the_random_sets(bug: str) -> None:
    outputs = execute(program_text(bug), OUT, "g0")  # ... and passes a random one
    assert worst_ratio(OUT, "g0", outputs) <= 1.0


def test_a_missing_reduction_is_a_compile_error_from_070() -> None:
    ported = port(program_text("o_missing_reduction"), "0.7.0")
    codes = [d.code for d in check(ported, "0.7.0").diagnostics]
    assert "E0710" in codes
    assert "E0710" not in [d.code for d in check(port(program_text("o_opt"), "0.7.0"), "0.7.0").diagnostics]


@pytest.mark.slow
def test_the_ffn_baseline_keeps_its_weights_as_distinct_rows() -> None:
    """All 15,360 up rows sit in DM at once (59 M values): they stay 509 distinct rows throughout."""
    executor = Executor(program_text("ffn_baseline"), fixture(FFN, "g0"))
    outputs = executor.run()
    decoded = [s.value for s in executor.stored.values() if s.name == "p8" and math.prod(s.held) == 15_360 * 3_840]
    assert len(decoded) == 2  # the f8 up and gate weights, after the decode pass
    assert all(isinstance(d, Rows) and d.pool.shape[0] <= 510 for d in decoded)
    assert worst_ratio(FFN, "g0", outputs) <= 1.0


def test_the_optimised_ffn_passes_at_full_shape() -> None:
    """f4 decode, block scales, split-K, GeGLU with erf."""
    outputs = execute(program_text("ffn_opt"), FFN, "g0")
    assert worst_ratio(FFN, "g0", outputs) <= 0.6


ALL_SETS = ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "exact", "cancel"]


SLOW = pytest.mark.slow  # the executor on the full FFN and QKV shapes, all nine sets: a minute or more


@pytest.mark.parametrize(
    ("name", "kernel"),
    [("o_baseline", OUT), ("o_opt", OUT), ("qkv_baseline", QKV), pytest.param("qkv_opt", QKV, marks=SLOW),
     pytest.param("ffn_opt", FFN, marks=SLOW), pytest.param("ffn_baseline", FFN, marks=SLOW)],
)  # fmt: skip
def test_every_fixture_set_passes(name: str, kernel: str) -> None:
    """The official criterion on all nine sets."""
    text = program_text(name)
    ratios = {s: worst_ratio(kernel, s, execute(text, kernel, s)) for s in ALL_SETS}
    assert all(r <= 1.0 for r in ratios.values()), ratios


def test_a_run_time_index_outside_its_axis_is_reported() -> None:
    inputs = dict(fixture(QKV, "g0"))
    inputs["kv_pos"] = np.array([5000], dtype=np.int32)  # beyond the 1,024-row cache
    with pytest.raises(IndexOutOfRange, match="kv_pos = 5000 selects outside Ts"):
        execute_program(program_text("qkv_opt"), inputs)


# Rows R = (Hh, Dh) of three stacked matrices, 512 rows a slice: `R / 12288` (the cluster) and `R % 512`
# (a chunk's rows) are both digits of Hh, so a piece tiled on both shifts Hh twice. Against a chunk
# buffer that holds `R % 512 = 8`, only the chunk's part of that shift is positional: the cluster's
# part stays absolute (random pack 135's k rows of cluster 1 landed on q's rows of cluster 0).
STACKED_CHUNKS = """#![toolchain = "0.7.0"]
axes! {
    Hh = 96, Dh = 256, Q = 8192, KV = 8192, R = (Hh, Dh),
}
layout Lead = { cluster: [R / 12288], slice: [R / 512 % 24 # 32, 1 # 8] };
kernel stacked(
    q: &hbm<f32>[Q],
    k: &hbm<f32>[KV],
    v: &hbm<f32>[KV],
    o: &mut hbm<f32>[R],
) {
    let mut acc: dm<f32>{..Lead, elem: [R % 512]} = dm::empty();
    for c in 0..64 {
        let b: dm<f32>{..Lead, elem: [R % 512 = 8], buffers: 2} = dm::empty();
        q.rename(Q, R, 0).tile(R % 512, c * 8, 8).dma_into(b, engines = [0, 1]);
        k.rename(KV, R, 8192).tile(R / 12288, 0, 1).tile(R % 512, c * 8, 8).dma_into(b, engines = [0, 1]);
        k.rename(KV, R, 8192).tile(R / 12288, 1, 1).tile(R % 512, c * 8, 8).dma_into(b, engines = [4, 5]);
        v.rename(KV, R, 16384).tile(R % 512, c * 8, 8).dma_into(b, engines = [4, 5]);
        main(b).fetch(time = [1], packet = [R % 512 = 8]).commit_into(acc.tile(R % 512, c * 8, 8));
    }
    acc.dma_into(o, engines = [0, 4]);
}
"""


def test_a_piece_tiled_on_two_digits_of_one_atom_lands_where_its_rows_are() -> None:
    assert check(STACKED_CHUNKS, "0.7.0").ok
    q = np.arange(8192, dtype=np.float32)
    inputs = {"q": q, "k": q + 10_000, "v": q + 20_000, "o": np.zeros(96 * 256, dtype=np.float32)}
    out = np.asarray(execute_program(STACKED_CHUNKS, inputs)["o"])
    np.testing.assert_array_equal(out, np.concatenate([q, q + 10_000, q + 20_000]))
