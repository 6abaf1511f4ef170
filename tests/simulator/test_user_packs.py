"""Packs written from docs/kernels.md alone, by people who had not read the generator
(tests/simulator/packs): each loads as a user's pack does, its baseline computes its reference on the
graded fixture sets, and its design space's sampled programs compile on both toolchains while the first computes
every set. Odd sizes (H 1,040; K 200 and 96), erf GELU, block scales of 64, 128 and 40 (a block that divides
K but is no power of two), a norm on a matvec's output, RoPE of 64, heads of 96 with a cache write, a 0.7.0 pack
on a 0.6.0 graph, a 0.5.0 pack, parameters named like the generator's or the DSL's own values (x0, norm,
acc, out, i, tile), a matvec that reads another's output directly (it had no space: "t is not an input of group
1") 4 rows of K 524,288 (more k-groups than 64: "no k-group count cuts 524288 columns") and a LoRA beside the
projection it corrects, `y0 + B(A x)` ("s combines the rows of two matvec groups"), and Gemma's norm weight
`1 + w` written as an add ("kernel ... has no parameter 'w1'")."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from chiplore.agents.repair import repair
from chiplore.simulator.execute.fixtures import SETS
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.testing.campaign import sample_points

PACKS = Path(__file__).resolve().parent / "packs"
GRADED = tuple(s for s in SETS if s.startswith("g"))
USER_PACKS = sorted(folder.name for folder in PACKS.iterdir() if (folder / "kernel.toml").is_file())


@pytest.fixture(scope="module")
def target() -> SimRNGD:
    return SimRNGD(kernel_paths=tuple(PACKS / name for name in USER_PACKS))  # each validated as it loads


def test_every_pack_written_from_the_docs_is_offered(target: SimRNGD) -> None:
    assert set(USER_PACKS) <= {spec.name for spec in target.kernels()}
    assert {"mla_kv_latent", "moe_router_logits", "odd_geglu_mlp", "tiny_odd", "heads96_cache", "ragged_block",
            "matvec_of_matvec", "long_k_f4", "lora_beside_projection",
            "gemma_norm_one_plus_w"} <= set(USER_PACKS)  # fmt: skip


@pytest.mark.parametrize("name", USER_PACKS)
def test_its_baseline_computes_the_graded_sets_on_both_toolchains(target: SimRNGD, name: str) -> None:
    """On its own toolchain, and ported to the other one (a 0.7.0 baseline down to 0.6.0, too). The
    graded sets only: a baseline is measured, not judged, and kv_rope_blockscale's misses its own
    `cancel` set (it rounds each weight times its block scale to bf16 before it contracts), which its
    generated designs pass."""
    spec = next(s for s in target.kernels() if s.name == name)
    for version in ("0.6.0", "0.7.0"):
        ported = repair(spec.baseline_source, version, target.check, target.pack().repairs)
        assert ported.ok, (version, ported.changes)
        result = target.host_check(ported.source, name, version, GRADED)
        assert result is not None and result.correctness is not None and result.correctness.passed, result


@pytest.mark.parametrize("version", ["0.6.0", "0.7.0"])
@pytest.mark.parametrize("name", USER_PACKS)
def test_its_sampled_designs_compile_and_the_first_computes_every_set(target: SimRNGD, name: str,
                                                                      version: str) -> None:  # fmt: skip
    spec = next(s for s in target.kernels() if s.name == name)
    facts = compile_facts(version)
    space = target.pack().design_space(spec, facts)
    assert space is not None, name
    designs = sample_points(space, facts, 4, random.Random(f"{name} {version}"))
    for params in designs:
        result = target.check(space.source(params, facts, version), version)
        assert result.ok, (params, [d.message for d in result.diagnostics if d.is_error][:1])
    first = target.host_check(space.source(designs[0], facts, version), name, version, tuple(SETS))
    assert first is not None and first.correctness is not None and first.correctness.passed, first
