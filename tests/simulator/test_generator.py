"""SimRNGD's design generator: design spaces written from a kernel's op graph, for the Gemma kernels
and for the shipped packs it was not written for (each pack's own kernel.toml graph). Its programs use
the constructs the learnt facts allow, compile (or `valid` refuses them) and compute what the graph
says on the host."""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from chiplore.agents.proposers import BuiltinArchitect
from chiplore.core.ops import OpGraph
from chiplore.core.pack import DesignSpace, points, settings
from chiplore.simulator.cost.estimate import estimate
from chiplore.simulator.execute.grading import expected_outputs, host_test
from chiplore.simulator.kernels.builtin import shipped_folders
from chiplore.simulator.kernels.pack import KernelPack, read_pack
from chiplore.simulator.pack import capabilities as C
from chiplore.simulator.pack import params as P
from chiplore.simulator.pack.generator import generated_space, generation_problem
from chiplore.simulator.pack.generator.geometry import even_cut
from chiplore.simulator.pack.generator.graph import analyse
from chiplore.simulator.pack.generator.lanes import fuse
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.pack.generator.program import store_engines
from chiplore.simulator.pack.generator.signature import read_signature
from chiplore.simulator.pack.generator.space import SHARE_NONE, STAGE_NONE, SUBDECODE_NONE, GeneratedSpace, Twin
from chiplore.simulator.pack.generator.stream import share_out
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.testing import random_pack
from chiplore.simulator.testing.campaign import sample_points
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.harness import builtin_kernels
from tests.helpers import kernel_view
from tests.simulator.test_kernel_packs import copy_pack, edit

OLD = {C.WIDEN: 0.0, C.DECODE: 1.0, C.ALLREDUCE: 0.0, C.BRIDGE: 0.0, C.F8_STREAM: 1.0, C.F4_STREAM: 0.0}
NEWER = {C.WIDEN: 1.0, C.DECODE: 1.0, C.ALLREDUCE: 1.0, C.BRIDGE: 1.0, C.F8_STREAM: 1.0, C.F4_STREAM: 1.0}


GEMMA = builtin_kernels()  # the built-in kernels: the Gemma 4 decode layer
NEW = tuple(folder.name for folder in shipped_folders() if folder.name not in GEMMA)  # other shapes, other graphs
ALL = (*GEMMA, *NEW)


@cache
def pack(kernel: str) -> KernelPack:
    """A shipped pack: its spec (signature, op graph, bound) and its case (fixtures, reference)."""
    [folder] = [folder for folder in shipped_folders() if folder.name == kernel]
    return read_pack(folder, "built-in")


def space_of(kernel: str) -> DesignSpace:
    space = generated_space(pack(kernel).spec)
    assert space is not None, generation_problem(pack(kernel).spec)
    return space


def first_point(space: DesignSpace, facts: dict[str, float]) -> dict[str, int]:
    return next(iter(points(space, facts)))


def near_point(space: DesignSpace, facts: dict[str, float], wanted: dict[str, int]) -> dict[str, int]:
    """A valid point with the `wanted` settings: the space's first values with them, else with one or
    two other knobs moved, else the first such point in order (a scan of the FFN's 40,000 points took
    45 s of CI where a move or two finds one at once)."""
    knobs = {knob.name: knob.values for knob in space.knobs}
    wanted = {name: value for name, value in wanted.items() if name in knobs}
    base = {name: values[0] for name, values in knobs.items()} | wanted
    free = [name for name in knobs if name not in wanted]
    for moved in itertools.chain([()], itertools.combinations(free, 1), itertools.combinations(free, 2)):
        for values in itertools.product(*(knobs[name] for name in moved)):
            candidate = {**base, **dict(zip(moved, values, strict=True))}
            if space.valid(candidate, facts):
                return candidate
    return next(p for p in points(space, facts) if all(p[name] == value for name, value in wanted.items()))


@pytest.mark.parametrize("kernel", ["sliding_project_qkv", "decoder_feedforward", "sliding_attention_output"])
def test_an_input_is_copied_on_every_engine_or_beside_the_weight_streams(kernel: str) -> None:
    """Engine queues are first in, first out: a replicating copy of the (normed) input on every engine
    holds each weight stream behind it (a small projection's weights started ~1,500 cycles late), on the
    spare engines it takes longer; the space holds both (bcast 0 and 2). bcast 2 exists only where an
    engine is spare and an input is copied (O loads its input replicated: it has no bcast 2)."""
    space, facts = space_of(kernel), compile_facts("0.6.0")
    copies: dict[tuple[int, int], str] = {}
    refused: set[str] = set()
    names = [knob.name for knob in space.knobs]
    for values in itertools.product(*(knob.values for knob in space.knobs)):  # every setting, valid or not
        params = dict(zip(names, values, strict=True))
        key = (params["bcast"], params["engines"])
        if params["bcast"] == 1 or key in copies:
            continue
        why = space.why_invalid(params, facts)
        if why is not None:
            refused.add(why.split(":")[0])
            continue
        lines = [line for line in space.source(params, facts, "0.6.0").splitlines()
                 if re.search(r"let x\d+_rep\b", line)]  # fmt: skip
        copies[key] = lines[0].split("engines = ")[1] if lines else "-"
    for (bcast, engines), text in copies.items():
        spare = [4 * c + e for c in (0, 1) for e in range(engines, 4)]
        assert text == ("-" if kernel == "sliding_attention_output" else f"{spare if bcast == 2 else list(range(8))});")
        assert bcast == 0 or (engines < 4 and kernel != "sliding_attention_output"), (bcast, engines)
    if kernel != "sliding_attention_output":
        assert {(2, e) for e in (1, 2, 3)} & set(copies), copies
    assert "bcast 2" in refused


@pytest.mark.parametrize("kernel", ALL)
def test_every_shipped_kernel_gets_a_space_of_schedule_knobs(kernel: str) -> None:
    space = space_of(kernel)
    names = {knob.name for knob in space.knobs}
    assert {"depth", "engines", "bcast"} <= names
    assert any(name.startswith("chunk") for name in names)  # one per group where there are several
    assert any(name.startswith("kgroups") for name in names)
    assert space.consults and all(isinstance(key, str) for key in space.consults)


def test_a_kernel_without_a_graph_has_no_generated_space() -> None:
    spec = pack("sliding_attention_output").spec.model_copy(update={"ops": None})
    assert generated_space(spec) is None
    assert "no op graph" in str(generation_problem(spec))


def test_a_graph_the_generator_cannot_write_is_refused_with_the_reason() -> None:
    spec = pack("sliding_project_qkv").spec
    ops = [o.model_dump() for o in spec.ops.ops]  # type: ignore[union-attr]
    ops[0] = {"op": "rope", "input": "x", "cos": "cos", "sin": "sin", "position": "rope_pos", "head_dim": 256,
              "out": "h"}  # RoPE on the input vector, before the projections  # fmt: skip
    broken = spec.model_copy(update={"ops": OpGraph.model_validate({"ops": ops})})
    assert generated_space(broken) is None
    assert "rope h on the input side" in str(generation_problem(broken))


def test_a_space_with_no_valid_setting_says_what_refuses_its_settings() -> None:
    space = space_of("vocab_projection")
    assert space.why_empty(OLD) == ""  # type: ignore[attr-defined]
    cramped = {**OLD, P.DM_USABLE.key: 4096.0}  # 4 KB of DM a slice: no design's buffers fit
    assert next(iter(points(space, cramped)), None) is None
    why = space.why_empty(cramped)  # type: ignore[attr-defined]
    assert re.match(r"[\d,]+ B of DM per slice \([\d,]+ of [\d,]+ settings\)", why), why
    # every refused setting is counted: the two reasons named and the rest (they left a fifth unexplained)
    counted = [
        (int(n.replace(",", "")), int(t.replace(",", ""))) for n, t in re.findall(r"\(([\d,]+) of ([\d,]+)", why)
    ]
    assert sum(n for n, _ in counted) == counted[0][1], why
    # a staged design is its unstaged twin and a gather more: refused where the twin is, for its reason
    o = space_of("sliding_attention_output")
    staged = next(p for p in settings(o) if p["stage"] == 1 and not isinstance(o.design(p, OLD), str))
    assert o.why_invalid(staged, cramped) == f"stage 1: as stage 0, {o.why_invalid({**staged, 'stage': 0}, cramped)}"
    assert isinstance(o.why_invalid(staged, cramped), Twin) and "of DM per slice" in str(o.why_invalid(staged, cramped))


def test_the_generated_program_uses_the_vocabulary_the_facts_allow() -> None:
    space = space_of("sliding_attention_output")
    p = first_point(space, NEWER)
    newer = space.source(p, NEWER, "0.7.0")
    assert ".widen(f32)" in newer and ".narrow(bf16)" in newer and ".cast(" not in newer
    assert ".reduce_clusters(add)" in newer and "result = all" not in newer
    older = space.source(first_point(space, OLD), OLD, "0.6.0")
    assert ".cast(f32)" in older and ".reduce_clusters" not in older and ".widen" not in older
    no_f8 = {**OLD, C.F8_STREAM: 0.0}
    decoded = space.source(first_point(space, no_f8), no_f8, "0.6.0")
    assert ".decode(bf16)" in decoded
    no_decode = {**no_f8, C.DECODE: 0.0}
    assert ".lut(bf16)" in space.source(first_point(space, no_decode), no_decode, "0.6.0")


def test_f4_codes_are_contracted_directly_only_where_a_rule_allows_it() -> None:
    space = space_of("decoder_feedforward")
    chosen = {knob.name: knob.values[0] for knob in space.knobs} | GOOD["decoder_feedforward"] | {"direct": 1}
    assert not space.valid(chosen, OLD) and space.valid({**chosen, "direct": 0}, OLD)
    assert space.valid(chosen, NEWER) and ".decode(" not in space.source(chosen, NEWER, "0.7.0")
    assert space.features(chosen, NEWER)["contract.stream_dtype"] == ("f4e2m1",)
    assert space.features({**chosen, "direct": 0}, OLD)["contract.stream_dtype"] == ("f8e4m3",)


def test_designs_fit_the_measured_memory() -> None:
    space = space_of("sliding_attention_output")
    roomy = sum(1 for _ in points(space, NEWER))
    tight = {**NEWER, P.DM_USABLE.key: 24 * 1024.0}
    fitting = list(points(space, tight))
    assert 0 < len(fitting) < roomy
    assert all(space.features(p, tight)["dm.bytes_per_slice"] <= 24 * 1024 for p in fitting)


@pytest.mark.parametrize("kernel", ["decoder_feedforward", "swiglu_feedforward"])
def test_a_staggered_design_is_valid_exactly_when_its_twin_is(kernel: str) -> None:
    # A space checks one of each design and its staggered twin (stagger moves small loads between
    # engines, no DM or VRF byte): every verdict is the one writing that very design gives, on a DM
    # tight enough that memory refuses many of them.
    tight = {**NEWER, P.DM_USABLE.key: 96 * 1024.0}
    names = [knob.name for knob in space_of(kernel).knobs]
    settings = list(itertools.product(*(knob.values for knob in space_of(kernel).knobs)))
    checked, written = space_of(kernel), space_of(kernel)
    verdicts = {"valid": 0, "over memory": 0}
    for values in random.Random(0).sample(settings, 300):
        setting = dict(zip(names, values, strict=True))
        twin = {**setting, "stagger": 1 - setting["stagger"]}
        checked.why_invalid(twin, tight)  # the twin first: its verdict is the one remembered
        alone = written.program(setting, tight)
        verdict = checked.why_invalid(setting, tight)
        if isinstance(verdict, Twin) and verdict.startswith("stage 1: as stage 0"):  # refused as its unstaged twin
            assert isinstance(alone, str) and written.why_invalid({**setting, "stage": 0}, tight) is not None
            continue
        assert verdict == (None if not isinstance(alone, str) else alone)
        verdicts["valid"] += not isinstance(alone, str)
        verdicts["over memory"] += isinstance(alone, str) and alone.endswith(("of DM per slice", "of VRF live"))
    assert verdicts["valid"] and verdicts["over memory"], verdicts


def test_a_small_kernel_of_whole_heads_spreads_its_columns_and_streams_what_it_may(tmp_path: Path) -> None:
    # Random pack 9: f8 q and f4 k projections of 2,048 rows over 384 columns, with per-head norms and
    # RoPE, so each slice holds 128 rows of whole heads and 16 slices hold them all. A k-group of 384
    # f8 columns is the only one whose rows fill an HBM unit, but halving and quartering the columns
    # puts the rows' work on 2 and 4 times the slices: the space offers those too. And `direct` takes
    # the f8 codes as they stream in while the f4 ones, which 0.6.0 cannot stream, are decoded.
    built = read_pack(random_pack(9, tmp_path).folder, "random")
    space = generated_space(built.spec)
    assert space is not None
    knobs = dict((k.name, k.values) for k in space.knobs)
    assert knobs["kgroups0"] == (1, 2, 4)
    # k's 384 f4 columns cut into tiles of 64 over 1 or 2 k-groups only; a looser cut (32s) adds 4, so
    # its decode-bound contraction may run on twice the slices (the strict cut's counts stay)
    assert knobs["kgroups1"] == (1, 2, 4)
    facts = compile_facts("0.6.0")
    wide = near_point(space, facts, {"kgroups1": 4})
    result = host_test(space.source(wide, facts, "0.6.0"), built.case, "0.6.0", ("g0", "exact", "cancel"))
    assert result.correctness is not None and result.correctness.passed, result.message
    setting = near_point(space, facts, {"direct": 1})
    source = space.source(setting, facts, "0.6.0")
    streams = dict(re.findall(r"main\((\w+_weight)_c\)\n\s+\.fetch\([^\n]*\)(\n\s+\.decode\(\w+\))?", source))
    assert streams["q_weight"] == "" and ".decode(f8e4m3)" in streams["k_weight"], streams
    assert check(source, "0.6.0").ok
    # k's input is not q's output: it reaches k's TRF before q's weights stream, not after q's passes
    assert source.index("let x1: trf") < source.index("    for ")


def test_members_whose_shared_rows_divide_badly_over_the_slices_stream_on_their_own(tmp_path: Path) -> None:
    # Random pack 12: three projections of one normed input, of 1,000, 1,536 and 3,000 rows. The first
    # two share a row space, 1,268 rows a cluster (4 x 317), which no split of the slices divides: one
    # row-group, an eighth of a cluster's slices at most. On their own, 500 and 768 rows a cluster take
    # 125 and 192 row-groups, so each streams in a row space of its own; its first design computes.
    built = read_pack(random_pack(12, tmp_path).folder, "random")
    spec, facts = built.spec, compile_facts("0.7.0")
    sig = read_signature(spec.baseline_source, spec.name)
    shared = GeneratedSpace(spec, sig, analyse(spec.ops, sig))
    assert len(shared.analysis.groups) == 2 and shared.reach() <= 1 / 8
    space = generated_space(spec)
    assert space is not None and len(space.analysis.groups) == 3 and space.reach() > 0.9
    result = host_test(space.source(first_point(space, facts), facts, "0.7.0"), built.case, "0.7.0")
    assert result.correctness is not None and result.correctness.passed, result.message


def test_the_qkv_epilogues_fuse_into_one_lane_with_identities_for_v() -> None:
    spec = pack("sliding_project_qkv").spec
    analysis = analyse(spec.ops, read_signature(spec.baseline_source, spec.name))  # type: ignore[arg-type]
    group = analysis.groups[0]
    assert group.weight_only_norm  # every output is renormalised per head: the input norm's scalar drops
    lane = fuse(group, analysis)
    assert lane is not None and [s.kind for s in lane.steps] == ["head_norm", "rope"]
    v = group.members[2].index
    assert v in lane.steps[1].identity  # v rides RoPE with cos 1 and sin 0
    assert {sink_at for sink_at, _, _ in lane.sinks} == {2}  # every write after the whole lane


def test_stacked_members_and_chained_groups() -> None:
    spec = pack("decoder_feedforward").spec
    analysis = analyse(spec.ops, read_signature(spec.baseline_source, spec.name))  # type: ignore[arg-type]
    up_gate, down = analysis.groups
    assert up_gate.stacked and len(up_gate.members) == 2  # gelu(gate) * up meets the two
    assert down.chained_from == up_gate.index and up_gate.exports == [("a", down.index)]
    gqa = pack("gqa_project_qkv").spec
    analysis = analyse(gqa.ops, read_signature(gqa.baseline_source, gqa.name))  # type: ignore[arg-type]
    assert not analysis.groups[0].weight_only_norm  # v is not renormalised: the input norm stays


def test_a_chained_group_loads_its_first_weights_before_its_input_is_copied() -> None:
    """The down projection reads the gated rows, so its input's copy waits for the up/gate passes, and
    the engines run their commands in order. With `ahead` its first loop step's weights are loaded
    right after the up/gate stream, before that copy, and the loop goes on from the next step; the
    design still computes the kernel on every set."""
    space = space_of("decoder_feedforward")
    assert ("ahead", (0, 1)) in [(k.name, k.values) for k in space.knobs]
    assert "ahead" not in [k.name for k in space_of("sliding_project_qkv").knobs]  # one group: nothing to chain
    facts = compile_facts("0.6.0")
    setting = near_point(space, facts, {"ahead": 1, "bcast": 0})

    def order(source: str) -> tuple[int, int, list[str]]:
        lines = source.splitlines()
        down = [i for i, line in enumerate(lines) if line.strip().startswith("down_weight_packed.") or
                re.match(r"\s*let down_weight_packed\w*_c\b", line)]  # fmt: skip
        copy = next(i for i, line in enumerate(lines) if re.match(r"\s*let x1_k\b", line))
        return down[0], copy, [lines[i + 1] if lines[i].rstrip().endswith("=") else lines[i] for i in down]

    first, copy, loads = order(space.source(setting, facts, "0.6.0"))
    assert first < copy and "tile(R1_ % 128, 0, " in loads[0] and any("s * 4 + 4" in line for line in loads)
    first, copy, _ = order(space.source({**setting, "ahead": 0}, facts, "0.6.0"))
    assert first > copy
    result = host_test(space.source(setting, facts, "0.6.0"), pack("decoder_feedforward").case, "0.6.0",
                       ("g0", "exact", "cancel"))  # fmt: skip
    assert result.correctness is not None and result.correctness.passed, result.message


def test_a_store_whose_slices_hold_partial_units_gathers_its_rows_first() -> None:
    """Spread over the most row-groups, O's rows leave 64 B (a quarter of an HBM unit) on each slice,
    and each partial unit of the residual store is read, modified and written back. With `stage` the
    rows are first gathered, DM to DM, onto one slice of each cluster (3,840 B: whole units) and
    stored from there: no partial unit is left, the estimate is lower, and the design still computes
    the kernel on every set. Where the slices already hold whole units, `stage 1` is no design."""
    space = space_of("sliding_attention_output")
    assert ("stage", (0, 1)) in [(k.name, k.values) for k in space.knobs]
    facts = compile_facts("0.6.0")
    setting = near_point(space, facts, {"stage": 1, "spread": 1})
    staged, plain = (space.source({**setting, "stage": s}, facts, "0.6.0") for s in (1, 0))
    gather = re.search(r"let (\w+): dm<bf16>\{\.\.Stage0, elem: \[R0_ % 1920\]\} = (\w+)\.dma\(", staged)
    assert gather is not None and f"{gather[1]}.dma_into(residual" in staged, staged[-600:]
    assert "Stage0" not in plain and f"{gather[2]}.dma_into(residual" in plain
    codes = {which: {d.code for d in check(source, "0.6.0").diagnostics} for which, source in
             (("staged", staged), ("plain", plain))}  # fmt: skip
    assert "W0322" in codes["plain"] and "W0322" not in codes["staged"], codes  # partial units: read-modify-write
    assert estimate(staged, "0.6.0").cycles < estimate(plain, "0.6.0").cycles
    result = host_test(staged, pack("sliding_attention_output").case, "0.6.0", ("g0", "exact", "cancel"))
    assert result.correctness is not None and result.correctness.passed, result.message
    whole = near_point(space, facts, {"kgroups": 8, "spread": 0, "stage": 0})
    assert "128 rows x 15 row-groups" in space.summary(whole, facts)  # 256 B a slice
    assert space.why_invalid({**whole, "stage": 1}, facts) == STAGE_NONE


def test_the_sub_queue_decodes_every_other_chunk_beside_main() -> None:
    """Under 0.6.0 f4 codes are decoded by main's fetch adapter, a pass's slowest stage on a chip of few
    slices (1x128's FFN stayed 1.3x its bound). With `subdecode` the sub queue decodes every other chunk
    (of the stacked up/gate, the gate's) into DM, and main contracts those chunks as decoded f8; where no
    stream decodes (0.7.0 streams f4) the setting is its twin's."""
    space = space_of("decoder_feedforward")
    assert ("subdecode", (0, 1)) in [(k.name, k.values) for k in space.knobs]
    facts = compile_facts("0.6.0")
    setting = near_point(space, facts, {"subdecode": 1, "direct": 0})
    source = space.source(setting, facts, "0.6.0")
    plain = space.source({**setting, "subdecode": 0}, facts, "0.6.0")
    decoded = re.findall(r"let (\w+_d): dm<f8e4m3>\{[^}]*\} = sub\((\w+_c)\)", source)
    assert decoded and all(f"main({name})" in source for name, _ in decoded)
    for name, _ in decoded:  # main contracts what sub decoded: no table lookup of its own on those chunks
        assert ".decode(" not in source.split(f"main({name})", 1)[1].split(".commit", 1)[0]
    assert "= sub(" in source and not re.search(r"_d: dm<f8e4m3>\{[^}]*\} = sub\(", plain)
    result = host_test(source, pack("decoder_feedforward").case, "0.6.0", ("g0", "exact", "cancel"))
    assert result.correctness is not None and result.correctness.passed, result.message
    newer = compile_facts("0.7.0")
    streamed = near_point(space, newer, {"direct": 1, "subdecode": 0})
    assert space.why_invalid({**streamed, "subdecode": 1}, newer) == SUBDECODE_NONE


def test_engines_are_shared_out_in_proportion_to_the_loads() -> None:
    assert share_out([1024, 1024, 1024], [0, 1, 2]) == [[0], [1], [2]]
    assert share_out([6656, 1024], [0, 1, 2, 3]) == [[0, 1, 2], [3]]
    assert share_out([512, 512], [0, 1, 2]) == [[0, 1], [2]]  # the remainder to the first of a tie
    assert share_out([1, 1, 1], [4, 5]) == [[4], [5], [4]]  # more loads than engines: in turn
    assert share_out([1, 1], []) == [[], []]


def test_a_clusters_engines_are_shared_out_among_a_chunks_dmas() -> None:
    """GQA's q, k and v share a row space: cluster 1 takes the last 1,024 of q's rows, all of k's and
    all of v's, one DMA each per chunk. On every weight engine each DMA waits for the one before and
    pays its start-up after it; with `share 1` each takes an engine of its own (equal rows: one each),
    the start-ups run side by side, the estimate is lower and the design still computes the kernel.
    A kernel whose row spaces hold one member each has no such choice."""
    space = space_of("gqa_project_qkv")
    assert ("share", (0, 1)) in [(k.name, k.values) for k in space.knobs]
    assert "share" not in [k.name for k in space_of("sliding_attention_output").knobs]
    facts = compile_facts("0.6.0")
    setting = {"bcast": 1, "chunk": 3, "depth": 4, "direct": 1, "engines": 3, "kgroups": 8, "stagger": 0, "tail": 0}
    shared, plain = (space.source({**setting, "share": s}, facts, "0.6.0") for s in (1, 0))

    def engines(source: str, weight: str) -> list[str]:
        return re.findall(rf"{weight}\.rename\(.*dma_into\(w0_c, engines = (\[[\d, ]+\])\)", source)

    assert engines(plain, "q_weight") == ["[0, 1, 2]", "[4, 5, 6]"]
    assert engines(plain, "k_weight") == engines(plain, "v_weight") == ["[4, 5, 6]"]
    assert engines(shared, "q_weight") == ["[0, 1, 2]", "[4]"]
    assert (engines(shared, "k_weight"), engines(shared, "v_weight")) == (["[5]"], ["[6]"])
    assert "shared out among a chunk's DMAs" in space.summary({**setting, "share": 1}, facts)
    assert estimate(shared, "0.6.0").cycles < 0.97 * estimate(plain, "0.6.0").cycles
    result = host_test(shared, pack("gqa_project_qkv").case, "0.6.0", ("g0", "exact", "cancel"))
    assert result.correctness is not None and result.correctness.passed, result.message
    # kv_rope_blockscale's k and v share a row space too, but whole heads put k in one cluster and v in the other
    kv = generated_space(read_pack(PACKS / "kv_rope_blockscale", "test").spec)
    assert kv is not None and "share" in [k.name for k in kv.knobs]
    plain_kv = near_point(kv, facts, {"share": 0})
    assert kv.why_invalid({**plain_kv, "share": 1}, facts) == SHARE_NONE


def test_an_uneven_cut_of_a_composite_is_refused() -> None:
    heads = ((256, 16), (1, 256))  # (stride, size): 16 heads of 256
    assert even_cut(heads, 128) and even_cut(heads, 512) and even_cut(heads, 4096)
    assert not even_cut(heads, 384) and not even_cut(heads, 320)


def test_the_programs_keep_the_harness_signature_and_explain_themselves() -> None:
    space = space_of("sliding_project_qkv")
    facts = compile_facts("0.6.0")
    p = first_point(space, facts)
    source = space.source(p, facts, "0.6.0")
    baseline = pack("sliding_project_qkv").spec.baseline_source
    assert read_signature(source).params == read_signature(baseline).params
    assert "k-groups" in space.rationale(p, facts, 12345.0) and "12,345" in space.rationale(p, facts, 12345.0)
    assert check(source, "0.6.0").ok


def test_the_new_packs_references_are_not_trivial() -> None:
    for name in NEW:
        for output, value in expected_outputs(pack(name).case, "g0").items():
            assert np.isfinite(value).all() and np.std(value) > 0.05, (name, output)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.6.0", "0.7.0"])
@pytest.mark.parametrize("kernel", ALL)
def test_sampled_programs_compile(kernel: str, version: str) -> None:
    space = space_of(kernel)
    facts = compile_facts(version)
    sample = sample_points(space, facts, 4, random.Random(kernel + version))
    assert sample
    for p in sample:
        result = check(space.source(p, facts, version), version)
        assert result.ok, (p, [d.message for d in result.diagnostics if d.is_error][:2])


GOOD = {  # a good design of each kernel (benchmarks/generator.py finds the best)
    "sliding_attention_output": {"kgroups": 4, "chunk": 2, "depth": 6, "engines": 3, "stagger": 1},
    "sliding_project_qkv": {"kgroups": 4, "chunk": 2, "depth": 6, "engines": 4, "stagger": 1},
    "decoder_feedforward": {"kgroups0": 2, "kgroups1": 16, "chunk0": 3, "chunk1": 1, "depth": 3, "engines": 2},
    "swiglu_feedforward": {"kgroups0": 4, "kgroups1": 16, "chunk0": 1, "depth": 4, "engines": 4, "stagger": 1},
    "gqa_project_qkv": {"kgroups": 8, "chunk": 0, "depth": 3, "engines": 4, "stagger": 1},
    "vocab_projection": {"kgroups": 2, "chunk": 0, "depth": 3, "engines": 4, "stagger": 1},
}


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.6.0", "0.7.0"])
@pytest.mark.parametrize("kernel", ALL)
def test_a_good_design_computes_the_kernel(kernel: str, version: str) -> None:
    space = space_of(kernel)
    facts = compile_facts(version)
    knobs = {knob.name for knob in space.knobs}
    assert set(GOOD[kernel]) <= knobs, sorted(set(GOOD[kernel]) - knobs)  # a knob renamed: say it here
    chosen = near_point(space, facts, {k: v for k, v in GOOD[kernel].items() if k.startswith("kgroups")})
    for name, value in GOOD[kernel].items():  # the rest of the good design, where the chip's facts allow it
        if space.valid({**chosen, name: value}, facts):
            chosen = {**chosen, name: value}
    result = host_test(space.source(chosen, facts, version), pack(kernel).case, version)
    assert result.compiled and result.correctness is not None, result.message
    assert result.correctness.passed, (kernel, result.correctness.message)


assert set(GEMMA) <= set(GOOD) and set(NEW) <= set(GOOD)


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "version"), [("sliding_attention_output", "0.6.0"),
                                                 ("sliding_attention_output", "0.7.0"),
                                                 ("decoder_feedforward", "0.6.0"),
                                                 ("gqa_project_qkv", "0.6.0")])  # fmt: skip
def test_the_last_chunk_in_pieces_computes_the_kernel(kernel: str, version: str) -> None:
    """`tail` 1 and 2 cut the last chunk of each group into a half and a half, or a half and two
    quarters, written after the loop (a group whose chunk does not cut into lane folds keeps it
    whole): less contraction is left once the last weight byte lands. The pieces cover the chunk
    (every accumulator row is written: the compile check refuses a read of an unwritten row) and the
    program computes the kernel, block scales (FFN) and heads (GQA) included."""
    space, facts = space_of(kernel), compile_facts(version)
    chunk = "chunk" if any(knob.name == "chunk" for knob in space.knobs) else "chunk0"
    for tail in (1, 2):
        p = near_point(space, facts, {"tail": tail, chunk: 2})
        design = space.design(p, facts)
        assert not isinstance(design, str)
        tailed = [geo for geo in design.geometries if geo.tail]  # a group whose chunk does not cut keeps it whole
        assert tailed and all(geo.tail == tail for geo in tailed)
        for geo in tailed:
            assert sum(geo.tail_rows) == geo.chunk_rows and len(geo.tail_rows) == tail + 1
        source = space.source(p, facts, version)
        assert "_t1_c" in source and (tail == 1) == ("_t2_c" not in source)
        assert "the last in pieces of" in space.summary(p, facts)
        result = host_test(source, pack(kernel).case, version)
        assert result.compiled and result.correctness is not None, result.message
        assert result.correctness.passed, (kernel, p, result.correctness.message)
    untailed = first_point(space, facts)
    assert untailed["tail"] == 0
    assert space.source(untailed, facts, version) == space.source({k: v for k, v in untailed.items() if k != "tail"},
                                                                  facts, version)  # fmt: skip


@pytest.mark.unit
def test_the_stores_of_a_cluster_share_its_engines_out() -> None:
    """Stores run last and are mostly a DMA start-up; start-ups on one engine run one after another, so
    several stores each on every engine paid them in a row (GQA: q out, k and v cache rows on cluster
    1). A lone store keeps every engine of its clusters; stores sharing a cluster take its engines in turn."""
    assert store_engines([(0, 1)]) == ["[0, 1, 2, 3, 4, 5, 6, 7]"]
    assert store_engines([(0, 1), (0, 1), (1,), (1,)]) == ["[0, 1, 4]", "[2, 3, 5]", "[6]", "[7]"]
    assert store_engines([(0,), (0,)]) == ["[0, 1]", "[2, 3]"]
    assert store_engines([(1,)] * 5) == ["[4]", "[5]", "[6]", "[7]", "[4]"]  # more stores than engines: in turn
    space, facts = space_of("gqa_project_qkv"), compile_facts("0.6.0")
    source = space.source(first_point(space, facts), facts, "0.6.0")
    stores = re.findall(r"dma_into\((?:q_out|k_cache|v_cache)[^\n]*engines = \[([\d, ]+)\]\);", source)
    assert len(stores) == 4
    cluster_1 = [{int(e) for e in s.split(", ") if int(e) >= 4} for s in stores]
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(cluster_1, 2))


# ---- rounding points ------------------------------------------------------------------------------

PACKS = Path(__file__).parent / "packs"


def test_a_rounding_point_the_check_sets_see_is_kept() -> None:
    """A pack written from the docs alone rounds k to bf16 before RoPE, and its `cancel` set draws
    large rows whose rotation cancels: a k kept in f32 misses the reference there. Each design of its
    space keeps the point (at no cost: RoPE commits k anyway) and matches the reference on every set."""
    kv = read_pack(PACKS / "kv_rope_blockscale", "test")
    space = generated_space(kv.spec)
    assert space is not None, generation_problem(kv.spec)
    facts = compile_facts("0.6.0")
    for p in sample_points(space, facts, 2, random.Random("rounding")):
        source = space.source(p, facts, "0.6.0")
        assert re.search(r"let pre_rope\w*: dm<bf16>", source), p  # k is rounded where RoPE commits it
        result = host_test(source, kv.case, "0.6.0", ("g0", "exact", "cancel"))
        assert result.correctness is not None and result.correctness.passed, (p, result.message)


def test_block_scaled_members_of_one_input_share_a_row_space_and_a_scale_buffer() -> None:
    """k and v of kv_rope_blockscale are f8 codes with f32 scales per 128-block of K, projected from one
    normed input: one row space, as q, k and v of the Gemma QKV are. Their codes fill one chunk buffer
    and their scales one scale buffer side by side (two DMAs into each per chunk), so the input is
    normed and copied once and both streams run together; every sampled design computes every set."""
    kv = read_pack(PACKS / "kv_rope_blockscale", "test")
    space = generated_space(kv.spec)
    assert space is not None, generation_problem(kv.spec)
    assert [[m.op.out for m in g.members] for g in space.analysis.groups] == [["k", "v"]]
    facts = compile_facts("0.6.0")
    for p in sample_points(space, facts, 2, random.Random("shared scales")):
        source = space.source(p, facts, "0.6.0")
        buffers: dict[str, set[str]] = {}
        for member, buffer in re.findall(r"\b([kv])_ws\.rename[^\n]*\.dma_into\((\w+)", source):
            buffers.setdefault(buffer, set()).add(member)
        assert buffers and all(members == {"k", "v"} for members in buffers.values()), (p, buffers)
        assert len(re.findall(r"let norm_d(?:_\d+)?: dm<", source)) == 1, p  # the input normed once
        result = host_test(source, kv.case, "0.6.0", ("g0", "exact", "cancel"))
        assert result.correctness is not None and result.correctness.passed, (p, result.message)


def test_a_switch_broadcast_to_few_row_groups_rings_only_the_slices_it_reaches(tmp_path: Path) -> None:
    """Random pack 8: a chain whose first projection has 3 row-groups a cluster. The switch filled them
    on a ring of all 256 slices (an unstated ring spans the cluster): 37,214 cycles, where a copy by DMA
    took 5,159. The broadcast now states the ring of the slices its copies reach."""
    built = read_pack(random_pack(8, tmp_path).folder, "random")
    space = generated_space(built.spec)
    assert space is not None
    facts = compile_facts("0.6.0")
    switch = near_point(space, facts, {"bcast": 1})
    source = space.source(switch, facts, "0.6.0")
    assert ".switch(broadcast, slice = [rep(3) # 256], ring = 3)" in source
    copied = estimate(space.source({**switch, "bcast": 2}, facts, "0.6.0"), "0.6.0").cycles
    assert estimate(source, "0.6.0").cycles < copied
    result = host_test(source, built.case, "0.6.0", ("g0", "exact", "cancel"))
    assert result.correctness is not None and result.correctness.passed, result.message


def test_block_scaled_rows_stream_in_chunks_as_large_as_the_level_asks(tmp_path: Path) -> None:
    """Random pack 3: f8 q, k and v projections with bf16 scales per 32-block of 192 columns, 256 rows
    of whole heads a slice on 4 slices. Block-scaled chunks were 2 to 8 rows whatever the level: 32
    chunks of 8 rows, each a DMA start-up of ~340 cycles on 2 KB (14,163 cycles, 38x its bound).
    The larger levels now take more rows, and those designs compute."""
    built = read_pack(random_pack(3, tmp_path).folder, "random")
    space = generated_space(built.spec)
    assert space is not None
    facts = compile_facts("0.6.0")
    chunks = {}
    for level in (1, 2, 3, 4):
        setting = near_point(space, facts, {"chunk": level})
        source = space.source(setting, facts, "0.6.0")
        chunks[level] = int(re.search(r"(\d+) chunks of (\d+) rows", source).group(2))  # type: ignore[union-attr]
        if level == 4:
            result = host_test(source, built.case, "0.6.0", ("g0", "exact", "cancel"))
            assert result.correctness is not None and result.correctness.passed, result.message
    assert chunks[4] > chunks[3] > chunks[2] > chunks[1] > 8, chunks


def test_a_rounding_point_that_costs_a_pass_is_kept() -> None:
    """The FFN rounds up, gate and the down projection to bf16: where the next op would have gone on
    in the same pass (SiLU(g) * u, the residual add after the norm), the value is committed in bf16
    first, so the design computes what the reference does, not a closer f32."""
    space, facts = space_of("decoder_feedforward"), compile_facts("0.6.0")
    source = space.source(first_point(space, facts), facts, "0.6.0")
    assert len(re.findall(r"let rnd\w*: dm<bf16>", source)) >= 2, source
    assert check(source, "0.6.0").ok


def test_members_run_as_one_lane_only_where_they_round_alike(tmp_path: Path) -> None:
    """q, k and v of the sliding QKV are rounded after their head norms; v rides RoPE as an identity,
    which rounds it again, harmlessly. Once v's head norm no longer rounds, the lane would round v
    where its graph does not; once v's projection no longer rounds, the shared accumulator rows cannot
    be rounded for all three. Either way the members are lowered one by one (q and k read a rounded
    copy of the rows in the second case), and the design computes the kernel on every set."""
    edits = {"vn": ('out = "vn"\nround_bf16 = true', 'out = "vn"'),
             "v": ('out = "v"\nround_bf16 = true', 'out = "v"')}  # fmt: skip
    lane_spec = pack("sliding_project_qkv").spec
    analysis = analyse(lane_spec.ops, read_signature(lane_spec.baseline_source, lane_spec.name))  # type: ignore[arg-type]
    assert fuse(analysis.groups[0], analysis) is not None
    facts = compile_facts("0.6.0")
    for name, (old, new) in edits.items():
        folder = copy_pack(tmp_path, "sliding_project_qkv", name)
        edit(folder / "kernel.toml", old, new)
        edited = read_pack(folder, "test")
        analysis = analyse(edited.spec.ops, read_signature(edited.spec.baseline_source, edited.spec.name))  # type: ignore[arg-type]
        assert fuse(analysis.groups[0], analysis) is None, name
        space = generated_space(edited.spec)
        assert space is not None
        source = space.source(first_point(space, facts), facts, "0.6.0")
        if name == "v":
            assert re.search(r"let rows\w*: dm<bf16>", source), source  # q and k's rounded copy
        result = host_test(source, edited.case, "0.6.0", ("g0", "exact", "cancel"))
        assert result.correctness is not None and result.correctness.passed, (name, result.message)


def test_an_unweighted_input_norm_whose_scalar_drops_computes_the_graph(tmp_path: Path) -> None:
    """QKV renormalises every output per head, so the input norm's scalar drops; without a weight the
    normed input is the input itself. Its rounding point is the TRF copy's, and the design computes
    the graph on every set (the reference is the graph's: no reference.py)."""
    folder = copy_pack(tmp_path, "sliding_project_qkv")
    (folder / "reference.py").unlink()
    edit(folder / "kernel.toml", 'input = "x"\nweight = "input_rms_weight"\nout = "h"', 'input = "x"\nout = "h"')
    edited = read_pack(folder, "test")
    space, facts = generated_space(edited.spec), compile_facts("0.6.0")
    assert space is not None and space.analysis.groups[0].weight_only_norm
    result = host_test(space.source(first_point(space, facts), facts, "0.6.0"), edited.case, "0.6.0",
                       ("g0", "exact", "cancel"))  # fmt: skip
    assert result.correctness is not None and result.correctness.passed, result.message


def test_a_kernel_with_no_space_stops_with_the_generators_reason() -> None:
    """`optimize` of a pack the generator writes no space for said only that there was none."""
    target = SimRNGD()
    view = kernel_view(target, "sliding_attention_output", "0.6.0")
    spec = view.spec.model_copy(update={"ops": None})
    reason = target.pack().no_space_reason(spec)
    assert target.pack().design_space(spec) is None and "declares no op graph" in reason
    assert target.pack().no_space_reason(view.spec) == ""  # it has a space
    empty = BuiltinArchitect().why_empty(dataclasses.replace(view, spec=spec, space=None, no_space=reason))
    assert empty == f"the target pack has no design space for sliding_attention_output: {reason}"


def test_a_graph_learnt_on_a_chip_of_another_shape_is_told_apart_by_compiling() -> None:
    """A data dir learnt on 3 x 1024 slices, optimized on the default chip: every design drew E0201 for 116 s."""
    pack = SimRNGD().pack()
    learnt = {P.CLUSTERS.key: 3.0, P.SLICES.key: 1024.0, P.LANES.key: 1.0, P.ENGINES_PER_CLUSTER.key: 3.0}
    problem = pack.chip_mismatch(learnt, "0.6.0")
    assert (
        problem.startswith("this chip is not the one the graph learnt (3 clusters x 1024 slices") and "E0201" in problem
    )
    documented = {P.CLUSTERS.key: 2.0, P.SLICES.key: 256.0, P.LANES.key: 8.0, P.ENGINES_PER_CLUSTER.key: 4.0}
    assert pack.chip_mismatch(documented, "0.6.0") == pack.chip_mismatch({}, "0.7.0") == ""


def test_a_norm_weight_an_add_or_mul_computes_becomes_the_products_it_equals() -> None:
    """Gemma's norm weight 1 + w, written as `add(w, one)`, had no space ("kernel ... has no parameter 'w1'"):
    n * (w + c) is written n * w + n * c on the unweighted norm, n * (w * c) as (n * w) * c; a weight no such
    rewrite reaches is refused by name with what to write instead."""
    from chiplore.simulator.pack.generator.graph import Unsupported, unfold_norm_weights

    def graph(weight_op: str, b: str = "one") -> OpGraph:
        return OpGraph.model_validate({"ops": [
            {"op": weight_op, "a": "w", "b": b, "out": "w1"},
            {"op": "rms_norm", "input": "x", "weight": "w1", "out": "p", "round_bf16": True},
            {"op": "store", "input": "p", "to": "y"}]})  # fmt: skip

    sizes = {"x": 64, "w": 64, "one": 1, "y": 64, "v": 64}
    added = unfold_norm_weights(graph("add"), sizes)
    assert [(op.op, *op.reads(), op.writes()) for op in added.ops] == [
        ("rms_norm", "x", "p_unweighted"), ("mul", "p_unweighted", "w", "p_by_w"),
        ("mul", "p_unweighted", "one", "p_by_one"), ("add", "p_by_w", "p_by_one", "p"),
        ("store", "p", None)]  # fmt: skip
    assert added.ops[3].round_bf16  # the norm's rounding point stays on its value
    multiplied = unfold_norm_weights(graph("mul"), sizes)
    assert [op.op for op in multiplied.ops] == ["rms_norm", "mul", "mul", "store"]
    two_vectors = graph("add", b="v")  # w + v: no scalar, no rewrite: refused with what to do
    assert unfold_norm_weights(two_vectors, sizes) is two_vectors
    sig = read_signature("axes! { N = 64, S = 1 }\nkernel k(x: &hbm<bf16>[N], w: &hbm<bf16>[N], v: &hbm<bf16>[N], "
                         "one: &hbm<f32>[S], y: &mut hbm<bf16>[N]) {}", "k")  # fmt: skip
    with pytest.raises(Unsupported, match=r"its weight 'w1' is computed by an op, .*\(draw the computed value as"):
        analyse(two_vectors, sig)
