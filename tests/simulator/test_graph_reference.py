"""The reference derived from a kernel's op graph (simulator/execute/graph_reference.py): it agrees
with each shipped pack's hand-written reference.py on every fixture set, computes each op as
chiplore/core/ops.py says (codes decoded, one dot product per distinct row, rounding where the graph
rounds), and names the op when the inputs do not fit the graph."""

from __future__ import annotations

import numpy as np
import pytest

from chiplore.core.ops import OpGraph
from chiplore.core.target import KernelParam
from chiplore.simulator.execute.criterion import grade_outputs
from chiplore.simulator.execute.fixtures import SETS
from chiplore.simulator.execute.grading import case_inputs
from chiplore.simulator.execute.graph_reference import GraphReferenceError, graph_reference, rounding_envelope
from chiplore.simulator.execute.numerics import bf16, f4_unpack, f8_decode
from chiplore.simulator.execute.signature import KernelSignature
from chiplore.simulator.execute.values import Periodic, RopeTable
from chiplore.simulator.kernels.pack import read_pack
from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

SHIPPED = ("sliding_attention_output", "sliding_project_qkv", "decoder_feedforward", "gqa_project_qkv",
           "swiglu_feedforward", "vocab_projection")  # fmt: skip


def agreement(name: str, sets: tuple[str, ...]) -> None:
    pack = read_pack(BUILTIN_PACKS / name, "installed")
    derived = graph_reference(pack.manifest.graph, pack.signature)
    for fixture_set in sets:
        inputs = case_inputs(pack.case, fixture_set)
        written, derived_outputs = pack.reference(inputs), derived(inputs)
        assert set(derived_outputs) == set(written)
        result = grade_outputs({fixture_set: derived_outputs}, {fixture_set: written}, pack.manifest.atol,
                               pack.manifest.rtol)  # fmt: skip
        assert result.passed, (name, fixture_set, result.message)
        for output, value in derived_outputs.items():
            assert value.shape == np.shape(written[output]) and value.dtype == np.float32


def test_the_derived_reference_of_a_shipped_pack_agrees_with_its_reference_py_on_the_smoke_and_cancel_sets() -> None:
    agreement("sliding_attention_output", ("g0", "cancel"))


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_pack_s_derived_reference_agrees_with_its_reference_py_on_every_fixture_set(name: str) -> None:
    agreement(name, SETS)


# ---- each op as ops.py says -------------------------------------------------------------------------


def param(name: str, dtype: str, *shape: int, mutable: bool = False) -> KernelParam:
    dims = tuple((f"A{i}", size) for i, size in enumerate(shape))
    ref = "&mut " if mutable else "&"
    return KernelParam(name=name, type=f"{ref}hbm<{dtype}>[...]", mutable=mutable, dtype=dtype, shape=dims)


def run(ops: list[dict[str, object]], params: list[KernelParam], inputs: dict[str, object]) -> dict[str, np.ndarray]:
    signature = KernelSignature(name="k", params=tuple(params), axes={})
    return graph_reference(OpGraph.model_validate({"ops": ops}), signature)(inputs)  # type: ignore[arg-type]


def test_a_matvec_decodes_its_codes_and_scales_them_per_block_row_and_tensor_on_distinct_rows_only() -> None:
    rng = np.random.default_rng(0)
    rows, k, block = 60, 64, 16
    codes = rng.integers(0, 256, size=(7, k // 2), dtype=np.uint8)  # f4: two codes a byte, 7 distinct rows
    blocks = rng.integers(0x30, 0x48, size=(5, k // block), dtype=np.uint8)  # f8 block scales, 5 distinct rows
    row_scale = rng.uniform(0.5, 1.5, size=rows).astype(np.float32)
    x = bf16(rng.uniform(-1, 1, size=k).astype(np.float32))
    params = [param("x", "bf16", k), param("w", "f4e2m1", rows, k), param("s", "f8e4m3", rows, k // block),
              param("t", "f32", 1), param("g", "f32", 1), param("r", "f32", rows),
              param("y", "f32", rows, mutable=True), param("z", "f32", rows, mutable=True)]  # fmt: skip
    inputs = {"x": x, "w": Periodic(codes, rows), "s": Periodic(blocks, rows), "t": np.array([0.5], np.float32),
              "g": np.array([0.25], np.float32), "r": row_scale}  # fmt: skip
    ops = [{"op": "matvec", "input": "x", "weight": "w", "scale": "s", "scale_kind": "block", "block": block,
            "global_scale": "g", "out": "blocked"},
           {"op": "matvec", "input": "x", "weight": "w", "scale": "r", "scale_kind": "row", "out": "by_row"},
           {"op": "store", "input": "blocked", "to": "y"}, {"op": "store", "input": "by_row", "to": "z"}]  # fmt: skip
    out = run(ops, params, inputs)
    dense_w = f4_unpack(codes)[np.arange(rows) % 7].astype(np.float64)
    dense_s = np.repeat(f8_decode(blocks)[np.arange(rows) % 5], block, axis=1).astype(np.float64)
    np.testing.assert_allclose(out["y"], ((dense_w * dense_s) @ x * 0.25).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(out["z"], (dense_w @ x * row_scale).astype(np.float32), rtol=1e-6)


def test_rounding_happens_where_the_graph_says_and_where_a_bf16_output_stores() -> None:
    x = np.array([1.0 + 2.0**-10, 3.0], dtype=np.float32)  # 1 + 2^-10 is no bf16 value
    params = [param("x", "f32", 2), param("a", "f32", 2, mutable=True), param("b", "f32", 2, mutable=True),
              param("c", "bf16", 2, mutable=True)]  # fmt: skip
    ops = [{"op": "scale", "input": "x", "by": 1.0, "out": "kept"},
           {"op": "scale", "input": "x", "by": 1.0, "out": "narrowed", "round_bf16": True},
           {"op": "store", "input": "kept", "to": "a"}, {"op": "store", "input": "narrowed", "to": "b"},
           {"op": "store", "input": "kept", "to": "c"}]  # fmt: skip
    out = run(ops, params, {"x": x})
    assert out["a"][0] == np.float32(1.0 + 2.0**-10) and out["b"][0] == 1.0 and out["c"][0] == 1.0


def test_the_rounding_envelope_is_an_ulp_where_an_add_cancels_a_rounded_value_and_bf16_where_a_matvec_reads() -> None:
    """y = x * 3 rounds to bf16 and an add cancels most of it: either neighbour of y is what a program
    computing y in another order may keep, so the output may move by an ulp of y (2^-6 near 3). A
    matvec of an f32 input reads it in bf16; a rounding point a matvec reads from rounds to nearest
    (its flips at a tie are summed away, where all rounded one way would add up)."""
    x = np.array([1.0 + 2.0**-9, 1.0], dtype=np.float32)
    params = [param("x", "f32", 2), param("c", "f32", 2), param("w", "f32", 1, 2), param("out", "f32", 2, mutable=True),
              param("z", "f32", 1, mutable=True)]  # fmt: skip
    ops = [{"op": "scale", "input": "x", "by": 3.0, "out": "y", "round_bf16": True},
           {"op": "add", "a": "y", "b": "c", "out": "d"}, {"op": "store", "input": "d", "to": "out"},
           {"op": "scale", "input": "x", "by": 1.0, "out": "v", "round_bf16": True},
           {"op": "matvec", "input": "v", "weight": "w", "out": "m"},
           {"op": "store", "input": "m", "to": "z"}]  # fmt: skip
    inputs = {"x": x, "c": -3.0 * x, "w": np.array([[1.0, 1.0]], dtype=np.float32)}
    signature = KernelSignature(name="k", params=tuple(params), axes={})
    graph = OpGraph.model_validate({"ops": ops})
    spread = rounding_envelope(graph, signature, inputs)  # type: ignore[arg-type]
    assert spread["out"][0] == pytest.approx(2.0**-6, rel=1e-6) and spread["out"][1] == 0.0  # 3 is a bf16 value
    assert spread["z"][0] == 0.0  # v is rounded to nearest, as the reference does, and is bf16 already
    inputs["x"] = np.array([1.0 + 2.0**-9, 1.0 + 2.0**-9], dtype=np.float32)
    ops[3] = {"op": "scale", "input": "x", "by": 1.0, "out": "v"}  # v unrounded: the TRF rounds it
    graph = OpGraph.model_validate({"ops": ops})
    assert rounding_envelope(graph, signature, inputs)["z"][0] == pytest.approx(2 * 2.0**-9, rel=1e-6)  # type: ignore[arg-type]


def test_rope_rotates_each_head_with_the_table_s_row_and_a_cache_write_keeps_the_other_rows() -> None:
    head, positions = 8, 16
    q = np.arange(16, dtype=np.float32) / 10  # two heads
    cos, sin = RopeTable(positions, head, "cos"), RopeTable(positions, head, "sin", negate_low_half=True)
    cache = np.full((4, 16), 7.0, dtype=np.float32)
    params = [param("q", "bf16", 16), param("cos", "bf16", positions, head), param("sin", "bf16", positions, head),
              param("p", "i32", 1), param("row", "i32", 1), param("cache", "bf16", 4, 16, mutable=True)]  # fmt: skip
    ops = [{"op": "rope", "input": "q", "cos": "cos", "sin": "sin", "position": "p", "head_dim": head, "out": "r"},
           {"op": "cache_write", "input": "r", "cache": "cache", "position": "row"}]  # fmt: skip
    out = run(ops, params, {"q": q, "cos": cos, "sin": sin, "p": np.array([5]), "row": np.array([2]), "cache": cache})
    c, s = cos[5].astype(np.float64), sin[5].astype(np.float64)
    heads = bf16(q).reshape(2, head).astype(np.float64)  # a bf16 parameter holds its values rounded
    rotated = heads * c + np.concatenate([heads[:, 4:], heads[:, :4]], axis=1) * s
    np.testing.assert_array_equal(out["cache"][2], bf16(rotated.reshape(-1).astype(np.float32)))
    assert (np.delete(out["cache"], 2, axis=0) == 7.0).all()
    angles = 5 * 10000.0 ** (-np.arange(4) * 2 / head)  # a table whose low half is negated: the usual rotation
    usual = np.concatenate([heads[:, :4] * np.cos(angles) - heads[:, 4:] * np.sin(angles),
                            heads[:, 4:] * np.cos(angles) + heads[:, :4] * np.sin(angles)], axis=1)  # fmt: skip
    np.testing.assert_allclose(rotated, usual, atol=0.02)  # the table holds bf16 values


def test_inputs_that_do_not_fit_the_graph_name_the_op() -> None:
    params = [param("q", "bf16", 16), param("cos", "bf16", 4, 8), param("sin", "bf16", 4, 8), param("p", "i32", 1),
              param("o", "bf16", 16, mutable=True)]  # fmt: skip
    ops = [{"op": "rope", "input": "q", "cos": "cos", "sin": "sin", "position": "p", "head_dim": 16, "out": "qr"},
           {"op": "store", "input": "qr", "to": "o"}]  # fmt: skip
    inputs = {"q": np.ones(16, np.float32), "cos": RopeTable(4, 8, "cos"), "sin": RopeTable(4, 8, "sin"),
              "p": np.array([1])}  # fmt: skip
    with pytest.raises(GraphReferenceError) as error:
        run(ops, params, inputs)
    assert str(error.value) == "op 1 (rope qr): cos has rows of 8, the heads are 16 wide"


def test_block_scales_that_do_not_fit_the_weight_name_what_they_need() -> None:
    """A block of 64 over a scale declared for blocks of 32 read as '18,432 rows, the weight 9,216' (the scale
    has 9,216 rows: its columns are wrong); a block that does not divide K names the way round it."""
    rows, k = 8, 96
    params = [param("x", "bf16", k), param("w", "bf16", rows, k), param("s", "f32", rows, k // 32),
              param("y", "f32", rows, mutable=True)]  # fmt: skip
    inputs = {"x": np.ones(k, np.float32), "w": np.ones((rows, k), np.float32), "s": np.ones((rows, 3), np.float32)}

    def matvec(block: int) -> list[dict[str, object]]:
        return [{"op": "matvec", "input": "x", "weight": "w", "scale": "s", "scale_kind": "block", "block": block,
                 "out": "h"}, {"op": "store", "input": "h", "to": "y"}]  # fmt: skip

    with pytest.raises(GraphReferenceError) as error:
        run(matvec(48), params, inputs)
    needed = "block scale s is declared [8, 3], but blocks of 48 over the weight's 8 rows of 96 columns need 8 x 2"
    assert needed in str(error.value), error.value
    with pytest.raises(GraphReferenceError) as error:
        run(matvec(40), params, inputs)
    assert "96 columns are not whole blocks of 40: the op graph's reference takes a block that divides K" in str(
        error.value
    )
