"""SimRNGD's target pack: its generated designs write the vocabulary the rules allow, its cost model
prefers what the chip rewards, its repairs port programs between toolchains, and the generic layers
hold none of its knowledge."""

from __future__ import annotations

import re
from itertools import islice
from pathlib import Path

import pytest

from chiplore.agents.repair import repair
from chiplore.core.pack import DesignSpace, TargetPack, points
from chiplore.core.target import KernelSpec
from chiplore.simulator.pack import SimRNGDPack
from chiplore.simulator.pack import capabilities as C
from chiplore.simulator.pack import params as P
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.target import SimRNGD

ROOT = Path(__file__).resolve().parents[2]
GENERIC = ("agents", "ingest")


def test_the_pack_is_a_target_pack() -> None:
    pack = SimRNGD().pack()
    assert isinstance(pack, TargetPack)
    assert {f.template for f in pack.fits} <= {p.id for p in SimRNGD().microbenchmarks()}
    assert all(key.key in pack.params for f in pack.fits for key in f.records.values())


def _o_proj() -> tuple[SimRNGD, KernelSpec, DesignSpace]:
    target = SimRNGD()
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    space = target.pack().design_space(spec)
    assert space is not None
    return target, spec, space


def test_the_generated_designs_follow_the_vocabulary_the_rules_say_is_there() -> None:
    target, _, space = _o_proj()
    newer_facts = {C.WIDEN: 1.0, C.ALLREDUCE: 1.0}
    newer = space.source(next(iter(points(space, newer_facts))), newer_facts, "0.7.0")
    assert ".widen(f32)" in newer and ".cast(" not in newer
    assert target.check(newer, "0.7.0").ok
    no_f8 = {C.F8_STREAM: 0.0}
    decoded = space.source(next(iter(points(space, no_f8))), no_f8, "0.6.0")
    assert ".decode(bf16)" in decoded and target.check(decoded, "0.6.0").ok


def test_the_cost_model_prefers_enough_engines_and_chunks_long_enough() -> None:
    target, spec, space = _o_proj()
    facts = {P.CLUSTER_PORT.key: 285.0, P.ENGINE_BW.key: 224.0}
    knobs = {"kgroups": 8, "bcast": 1, "chunk": 2, "depth": 3, "stagger": 1, "direct": 1}

    def predicted(**changed: int) -> float:
        setting = {**knobs, **changed}
        cycles = target.pack().cost_model.predict(spec.name, space.source(setting, facts, "0.6.0"), setting, facts)
        assert cycles is not None
        return cycles

    assert predicted(engines=4) < predicted(engines=2) / 1.2  # two engines cannot fill the cluster port
    # 2 KB chunks: twice the start-ups (1.045x in true cycles, where the switch fills its 120 slices on a
    # ring of 120; on an unstated ring of 256 its broadcast hid less of them, 1.15x)
    assert predicted(engines=4, chunk=0) > predicted(engines=4) * 1.03


def test_a_baseline_is_ported_to_the_next_toolchain_by_the_packs_rewrites() -> None:
    target = SimRNGD()
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    assert not target.check(spec.baseline_source, "0.7.0").ok  # `.cast` is gone in 0.7.0
    fixed = repair(spec.baseline_source, "0.7.0", target.check, SimRNGDPack().repairs)
    assert fixed.ok, fixed.errors
    assert ".cast -> .widen/.narrow" in fixed.changes and "header -> 0.7.0" in fixed.changes


def test_a_program_written_for_070_is_ported_back_to_060_and_computes_the_same() -> None:
    """A pack written for a later toolchain than the graph's: .widen/.narrow, allreduce_slices and
    `buffers: N` (a loop's rotating tensors) become what 0.6.0 has, and the program still passes."""
    target, pack = SimRNGD(), SimRNGDPack()
    facts = compile_facts("0.7.0")  # what learning finds 0.7.0 has: .widen/.narrow, buffers
    spaces = ((spec, space) for spec in target.kernels() if (space := pack.design_space(spec)) is not None)
    found = ((spec, space.source(point, facts, "0.7.0")) for spec, space in spaces
             for point in islice(points(space, facts), 20))  # fmt: skip
    # (0.6.0 has nothing that does what reduce_clusters does: a program using it stays 0.7.0's)
    spec, newer = next((spec, s) for spec, s in found if "buffers:" in s and "reduce_clusters" not in s)
    fixed = repair(newer, "0.6.0", target.check, pack.repairs)
    assert fixed.ok, fixed.errors
    assert "buffers: N -> #[pipeline(depth = N)]" in fixed.changes and "buffers:" not in fixed.source
    tested = target.host_test(fixed.source, spec.name, "0.6.0")
    assert tested.compiled and tested.correctness is not None and tested.correctness.passed, tested.message


def _generic_sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text()) for folder in GENERIC for path in sorted((ROOT / folder).rglob("*.py"))]


@pytest.mark.parametrize("key", sorted(k for k in SimRNGDPack.params if not k.startswith(("device.", "chip."))))
def test_no_simrngd_parameter_name_in_the_generic_layers(key: str) -> None:
    found = [str(path.relative_to(ROOT)) for path, text in _generic_sources() if key in text]
    assert not found, f"{key} is SimRNGD's: it belongs in its pack, not in {found}"


def test_no_ferrite_syntax_or_probe_ids_in_the_generic_layers() -> None:
    ferrite = re.compile(r"#!\[toolchain|axes!|\.fetch\(|\.dma\(|\.commit\(|dm<|\bMB\d\d\b|E0\d\d\d")
    found = {str(path.relative_to(ROOT)): match.group(0) for path, text in _generic_sources()
             for match in [ferrite.search(text)] if match}  # fmt: skip
    assert not found, f"Ferrite or SimRNGD identifiers in the generic layers: {found}"
