"""Lowering (docs/simrngd.md §6) against hand counts of the official baselines.

calibrate.py lowered the three baseline programs by hand; the counts below are its numbers for
the ops the shipped programs share with it (weights, scales, decode and contraction passes,
broadcasts, relayouts). Where calibrate's count contradicts the packet rule of 2.2 (largest run
contiguous on *both* sides) the lowering follows the rule, and the test says so:
  * x / residual into the 8 x 480 layout: the DM side holds 960 B per slice, so 960-B packets
    (calibrate: 3840);
  * q_out / k_cache / v_cache stores from slice 0: 8 KB / 4 KB contiguous on both sides, so 4 KB
    packets (calibrate: 512);
  * FFN x replication into every slice: 960-B packets, limited by the 480-element source slices
    (calibrate: 3840);
  * FFN baseline program: one relayout of the activations (DRrep, 120-B packets from 60-row
    slices) where calibrate has two 3840-B ones;
  * calibrate's small_pass(n) sets every stage of a small pass to n flits; the lowering counts
    each stage (so those passes are compared on their largest stage only).
"""

from __future__ import annotations

import pytest

from chiplore.simulator.toolchain.lower import lower
from chiplore.simulator.toolchain.lowered import DmaOp, LoweredProgram, PassOp
from chiplore.simulator.toolchain.placement import LoweringError
from tests.simulator.programs import program_text

H, L, QS, PS = 3840, 15360, 4096, 2048


def lowered(name: str, version: str | None = None) -> LoweredProgram:
    return lower(program_text(name), version)


def dma(program: LoweredProgram, label: str) -> DmaOp:
    op = program.op(label)
    assert isinstance(op, DmaOp), label
    return op


def work(program: LoweredProgram, label: str) -> dict[str, float]:
    op = program.op(label)
    assert isinstance(op, PassOp), label
    return op.work.model_dump()


# (label, bytes, packet bytes, kind), from calibrate.py's Op(nbytes=..., packet=..., kind=...)
HAND_DMAS = {
    "qkv_baseline": [
        ("q/w8", QS * H, 4096, "h2d"),  # proj_rows q: 16 rows x 3840 per slice
        ("k/w8", PS * H, 3840, "h2d"),
        ("v/w8", PS * H, 3840, "h2d"),
        ("q/s_d", QS * 2, 32, "h2d"),
        ("xn/w_d", 7680, 960, "h2d"),  # rmsnorm_ops dma_w
        ("qw_d", 16 * 512, 512, "h2d"),  # headnorm dma_w, copied to the 16 head slices
        ("c_d", 16 * 512, 512, "gather"),  # rope.g_cos, likewise
    ],
    "o_baseline": [
        # each chunk in two pipelined halves (calibrate: one 1,024-column DMA, see o_baseline.fe)
        *[(f"c={c}/h={h}/w8", H * 512, 512, "h2d") for c in range(4) for h in range(2)],
        ("x1", QS * 2, 4096, "h2d"),
        ("s_d", H * 2, 240, "h2d"),  # os.dma
        ("y8", H * 2, 240, "d2d"),  # relayout
        ("yn/w_d", 7680, 960, "h2d"),
    ],
    "ffn_baseline": [
        ("up/p4", L * H // 2, 3840, "h2d"),
        ("gate/p4", L * H // 2, 3840, "h2d"),
        ("up/sd", L * H // 16, 3600, "h2d"),
        ("dsd", H * L // 16, 3840, "h2d"),  # dn.sdma
        ("xa", 256 * H * 2, 960, "d2d"),  # x.rep (bytes as calibrate; packet by the rule)
        *[(f"i={i}/j={j}/p4", 32 * 2 * L // 2, 3840, "h2d") for i in (0, 29) for j in (0, 1)],
        *[(f"i={i}/j={j}/wt<-wb", 32 * 2 * L * 2, 3840, "d2d") for i in (0, 29) for j in (0, 1)],  # shuf
        ("gd", 32, 4, "h2d"),
    ],
}

DOWN_REDUCE = {"reduce_ring": 8, "reduce_flits": 1, "commit_writes": 1}  # dn.mm: isr_r=8, isr_flits=1
# (label, {work field: calibrate's count}) for calibrate's tu_pass(...) calls
HAND_PASSES = {
    "qkv_baseline": [
        ("q/w16", {"fetch_reads": 3840, "decode_bytes": 61440, "flits": 3840, "commit_writes": 3840}),
        ("q/y", {"fetch_reads": 3840, "flits": 3840, "contract_bytes": 122880}),
        ("k/w16", {"fetch_reads": 1920, "decode_bytes": 30720, "flits": 1920, "commit_writes": 1920}),
        ("k/y", {"fetch_reads": 1920, "flits": 1920, "contract_bytes": 61440, "commit_writes": 1}),
        ("v/y", {"fetch_reads": 1920, "flits": 1920, "contract_bytes": 61440, "commit_writes": 1}),
        ("xa", {"fetch_reads": 240, "flits": 240, "switch_ring": 256, "switch_flits": 240, "commit_writes": 240}),
        ("xt", {"fetch_reads": 960, "commit_writes": 960}),  # xtrf: small_pass(960)
        ("xn/part", {"flits": 60}),  # rms.sq: small_pass(60)
        ("xn/inv", {"reduce_ring": 8, "reduce_flits": 1, "transcendentals": 1}),  # rms.isr + rsqrt
        ("xn/w_v", {"fetch_reads": 120}),  # rms.vrf_w: small_pass(120)
        ("q/tmp<-main", {"switch_ring": 256, "switch_flits": 1}),  # proj sw: small_pass(1, ring=256)
    ],
    "o_baseline": [
        *[
            (
                f"c={c}/h={h}/w16<-main",
                {"fetch_reads": 1920, "decode_bytes": 61440, "flits": 3840, "commit_writes": 3840},
            )
            for c in range(4)
            for h in range(2)
        ],
        *[(f"c={c}/part", {"fetch_reads": 7680, "flits": 7680, "contract_bytes": 245760}) for c in range(4)],
        ("xr", {"fetch_reads": 256, "flits": 256, "switch_ring": 256, "switch_flits": 256, "commit_writes": 256}),
        ("c=0/xt", {"fetch_reads": 256, "commit_writes": 256}),  # small_pass(256)
    ],
    "ffn_baseline": [
        ("up/p8", {"fetch_reads": 3600, "decode_bytes": 115200, "flits": 7200, "commit_writes": 7200}),
        ("gate/p8", {"fetch_reads": 3600, "decode_bytes": 115200, "flits": 7200, "commit_writes": 7200}),
        *[(f"up/i={i}/wb", {"fetch_reads": 480, "flits": 1920, "vector_flits": 1920}) for i in (0, 14)],
        *[
            (f"up/i={i}/out<-main", {"fetch_reads": 960, "flits": 960, "contract_bytes": 30720, "commit_writes": 1})
            for i in (0, 14)
        ],
        ("i=0/j=0/p8", {"fetch_reads": 480, "decode_bytes": 15360, "flits": 960, "commit_writes": 960}),
        ("i=0/j=1/wb", {"fetch_reads": 960, "flits": 3840, "vector_flits": 3840}),
        *[
            (f"i={i}/down<-main", {"fetch_reads": 480, "flits": 480, "contract_bytes": 15360, **DOWN_REDUCE})
            for i in (0, 29)
        ],
        ("xt", {"fetch_reads": 960, "commit_writes": 960}),
    ],
}


@pytest.mark.parametrize(("kernel", "label", "nbytes", "packet", "kind"),
                         [(k, *row) for k, rows in HAND_DMAS.items() for row in rows])  # fmt: skip
def test_dma_matches_the_hand_count(kernel: str, label: str, nbytes: int, packet: int, kind: str) -> None:
    op = dma(lowered(kernel), label)
    assert (op.bytes, op.packet_bytes, op.dma_kind) == (nbytes, packet, kind)
    assert op.packets == -(-nbytes // packet)
    assert sum(f.bytes for f in op.flows) == op.bytes
    assert op.engines == (0,)  # `engines = auto` is one engine of cluster 0 in 0.6.0


@pytest.mark.parametrize(("kernel", "label", "counts"), [(k, *row) for k, rows in HAND_PASSES.items() for row in rows])
def test_pass_matches_the_hand_count(kernel: str, label: str, counts: dict[str, float]) -> None:
    got = work(lowered(kernel), label)
    assert {k: got[k] for k in counts} == counts


@pytest.mark.parametrize(
    ("kernel", "matrices"),
    [
        ("qkv_baseline", QS * H + 2 * PS * H),
        ("qkv_opt", QS * H + 2 * PS * H),
        ("o_baseline", H * QS),
        ("o_opt", H * QS),
        ("ffn_baseline", 3 * L * H // 2),
        ("ffn_opt", 3 * L * H // 2),
    ],
)
def test_every_weight_byte_is_moved_once(kernel: str, matrices: int) -> None:
    program = lowered(kernel)
    matrix = ("q_weight", "k_weight", "v_weight", "o_weight", "up_weight_packed", "gate_weight_packed",
              "down_weight_packed")  # fmt: skip
    moved = sum(op.bytes for op in program.dmas if op.source in matrix)
    assert moved == matrices


@pytest.mark.parametrize("kernel", ["qkv_baseline", "o_baseline", "ffn_baseline", "qkv_opt", "o_opt", "ffn_opt"])
def test_ops_are_ordered_and_their_dependencies_come_first(kernel: str) -> None:
    program = lowered(kernel)
    seen: set[str] = set()
    for op in program.ops:
        assert op.id not in seen
        assert set(op.deps) <= seen, op.label
        seen.add(op.id)
    known = {b.id for b in program.buffers}
    assert all(set(op.writes) <= known for op in program.ops)


def test_op_counts_of_the_baselines() -> None:
    # calibrate.py's FFN has 139 DMA ops and 329 passes; the program folds a few of them.
    assert (len(lowered("ffn_baseline").dmas), len(lowered("o_baseline").dmas)) == (137, 14)
    assert len(lowered("qkv_baseline").dmas) == 16


def test_pipeline_depth_rotates_buffers_and_plain_loops_reuse_one() -> None:
    opt = lowered("qkv_opt")
    assert [opt.op(f"c={c}/w8<-q_weight").writes for c in range(4)] == [("c/w8[0]",), ("c/w8[1]",)] * 2
    base = lowered("o_baseline")
    assert {base.op(f"c={c}/part").writes for c in range(4)} == {("c/part[0]",)}  # a plain loop
    assert [base.op(f"c=0/h={h}/w8").writes for h in range(2)] == [("c/h/w8[0]",), ("c/h/w8[1]",)]


def test_explicit_engines_split_packets_evenly_within_each_cluster() -> None:
    op = dma(lowered("o_opt"), "c=0/w8")
    assert op.engines == tuple(range(8))
    assert {f.bytes for f in op.flows} == {op.bytes // 8}
    assert not any(f.cross_cluster for f in op.flows)
    assert {f.cluster for f in op.flows if f.engine < 4} == {0}


def test_auto_is_one_local_engine_per_destination_cluster_in_every_version() -> None:
    """P13, and docs/simrngd.md §4.3: the default engines do not change with the toolchain."""
    source = program_text("o_baseline")
    assert {dma(lower(source, v), "c=0/h=0/w8").engines for v in ("0.5.0", "0.6.0", "0.7.0")} == {(0,)}


def test_renamed_tiles_meet_at_absolute_indices() -> None:
    program = lowered("qkv_opt")
    # out.tile(Hd, 16, 8) -> k_cache.at(Ts = kv_pos).rename(Ps, Rall, 4096): 8 heads x 256 bf16
    assert dma(program, "k_cache<-out").bytes == 8 * 256 * 2
    assert dma(program, "k_cache<-out").dma_kind == "scatter"
    assert dma(program, "c=0/w8<-k_weight").bytes == PS * H // 4


def test_store_alignment_is_seen_in_hbm_units() -> None:
    aligned = dma(lowered("o_opt"), "residual<-out")  # 30 rows of 256 B
    assert aligned.packet_bytes == 256 and all(f.partial_units == 0 for f in aligned.flows)
    misaligned = dma(lowered("o_baseline"), "residual<-out")  # 8 rows of 960 B
    assert sum(f.partial_units for f in misaligned.flows) > 0


def test_cross_cluster_relayout_is_its_own_kind() -> None:
    op = dma(lowered("ffn_opt"), "a2")
    assert op.dma_kind == "d2d_x"
    assert any(f.cross_cluster for f in op.flows)


def test_unlowerable_programs_raise_a_lowering_error() -> None:
    source = """axes! { H = 64 }
kernel k(x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]) {
    let a = missing_tensor;
    a.dma_into(y, engines = [0]);
}
"""
    with pytest.raises(LoweringError, match="missing_tensor"):
        lower(source)


# ---- partial sums (E0710) ---------------------------------------------------------------------


def test_no_shipped_program_stores_or_mixes_partial_sums() -> None:
    for name in ("qkv_baseline", "o_baseline", "ffn_baseline", "qkv_opt", "o_opt", "ffn_opt"):
        program = lowered(name)
        assert not any(op.partial for op in program.dmas if op.dma_kind == "d2h"), name
        assert not any(op.mixes_partial for op in program.passes), name


@pytest.mark.parametrize(
    ("reducer", "digit"),
    [
        (".reduce_slices(add, group = [H / 1920], result = leader)\n        .vector(mul(vrf = gu_v)", "H / 1920 % 2"),
        (".reduce_slices(add, group = [L / 960], result = leader)", "L / 960 % 16"),
    ],
)
def test_a_split_k_result_without_its_reducer_reaches_hbm_as_partial_sums(reducer: str, digit: str) -> None:
    """The bug zoo's missing reduction: the partials flow through DM, TRF and VRF operands to the store."""
    source = program_text("ffn_opt")
    broken = source.replace(reducer, reducer.split("\n")[-1].strip() if "\n" in reducer else "", 1)
    assert broken != source
    store = dma(lower(broken), "residual<-out")
    assert [p.digit for p in store.partial] == [digit]


def test_a_tile_of_an_axis_the_other_side_does_not_hold_keeps_its_offset() -> None:
    """`src.tile(C, c, 1)` into a DM tensor without C reads row c, and its store writes row c."""
    source = """#![toolchain = "0.6.0"]
axes! { C = 4, S = 256, B = 2048 }
kernel stream(src: &hbm<i8>[C, S, B], out: &mut hbm<i8>[C, S, B]) {
    for c in 0..4 {
        let d: dm<i8>{cluster: [1 # 2], slice: [S], elem: [B]} = src.tile(C, c, 1).dma(engines = [0, 1]);
        d.dma_into(out.tile(C, c, 1), engines = [2, 3]);
    }
}
"""
    (coverage,) = lower(source, "0.6.0").outputs
    assert coverage.written == coverage.elements == 4 * 256 * 2048
