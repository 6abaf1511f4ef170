"""The compile-time facts a design space reads, found with the pack's own probes and the compiler only
(what `chiplore learn` records in the graph): which constructs the toolchain has, the usable DM and
the vector chain limit. For benchmarks and tests that run the generator without a knowledge graph;
nothing here reads the simulator's hidden truth.
"""

from __future__ import annotations

import os
from functools import cache

from chiplore.core.pack import Facts
from chiplore.core.target import DeviceJob, DeviceResult
from chiplore.simulator.bench import microbenchmarks
from chiplore.simulator.pack import capabilities as C
from chiplore.simulator.pack import params as P
from chiplore.simulator.pack.compiler import FercVocabulary
from chiplore.simulator.pack.fits import FITS, search_dm_capacity, search_shape, search_vector_chain
from chiplore.simulator.pack.generator.vocab import BUFFERS
from chiplore.simulator.pack.rule_probes import CONSTRUCTS, PAIRS, vocabulary
from chiplore.simulator.shape import Chip
from chiplore.simulator.toolchain.check import check

FLAGS = {"widen": C.WIDEN, "decode": C.DECODE, "allreduce_slices": C.ALLREDUCE, "reduce_clusters": C.BRIDGE,
         "buffers": BUFFERS}  # fmt: skip


class CompileOnly:
    """The bench of a compile-only search: it compiles and never runs."""

    def check(self, source: str, version: str):  # type: ignore[no-untyped-def]
        return check(source, version)

    def run(self, job: DeviceJob) -> DeviceResult:
        raise RuntimeError("a compile-time fact needs no device run")


def compile_facts(version: str) -> Facts:
    """Capability flags (1 available, 0 refused), the shape and compile-time limits under `version`,
    on the chip the compiler checks against (every probe written for the shape MB00 finds first)."""
    return dict(_compile_facts(version, os.environ.get("CHIPLORE_SIM_TRUTH")))


@cache
def _compile_facts(version: str, chip: str | None) -> Facts:  # one per version and chip
    # As `learn` reads the probes: the shape first (every probe is written for it), then a construct
    # is missing where the compiler says so, a stream refused where it draws more codes than the same
    # program with a bf16 stream.
    bench = CompileOnly()
    shape = search_shape(next(p for p in microbenchmarks() if p.id == "MB00"), version, bench)
    ferc = FercVocabulary()
    written_for = vocabulary({}, shape)
    available = {probe.construct: not any(map(ferc.unavailable, check(probe.program(version, written_for), version)
                                               .diagnostics)) for probe in CONSTRUCTS}  # fmt: skip
    facts: Facts = {flag: float(available.get(name, False)) for name, flag in FLAGS.items()}
    names = vocabulary(available, shape)

    def codes(source: str) -> set[str]:
        return {d.code for d in check(source, version).diagnostics if d.is_error}

    for pair in PAIRS:
        flag = C.F8_STREAM if "f8" in pair.purpose else C.F4_STREAM if "f4" in pair.purpose else None
        if pair.key == "contract.stream_dtype" and flag is not None:
            facts[flag] = float(codes(pair.breaking(version, names)) <= codes(pair.fixed(version, names)))
    facts |= {key.key: shape[name] for fit in FITS if fit.id == "MB00" for name, key in fit.records.items()}
    probes = {p.id: p for p in microbenchmarks(Chip.named(shape))}  # the limits' probes, for that shape
    facts[P.DM_USABLE.key] = search_dm_capacity(probes["MB14"], version, bench)["dm_usable_per_slice"]
    facts[P.MAX_CHAIN.key] = search_vector_chain(probes["MB11"], version, bench)["ve_max_chain"]
    return facts
