"""The compile-time facts a design space reads, found with the pack's own probes and the compiler only
(what `chiplore learn` records in the graph): which constructs the toolchain has, the usable DM and
the vector chain limit. For benchmarks and tests that run the generator without a knowledge graph;
nothing here reads the simulator's hidden truth.
"""

from __future__ import annotations

from functools import cache

from chiplore.core.pack import Facts
from chiplore.core.target import DeviceJob, DeviceResult
from chiplore.simulator.bench import microbenchmarks
from chiplore.simulator.pack import capabilities as C
from chiplore.simulator.pack import params as P
from chiplore.simulator.pack.fits import search_dm_capacity, search_vector_chain
from chiplore.simulator.pack.generator.vocab import BUFFERS
from chiplore.simulator.pack.rule_probes import CONSTRUCTS, PAIRS, vocabulary
from chiplore.simulator.toolchain.check import check

FLAGS = {"widen": C.WIDEN, "decode": C.DECODE, "allreduce_slices": C.ALLREDUCE, "reduce_clusters": C.BRIDGE,
         "buffers": BUFFERS}  # fmt: skip


class CompileOnly:
    """The bench of a compile-only search: it compiles and never runs."""

    def check(self, source: str, version: str):  # type: ignore[no-untyped-def]
        return check(source, version)

    def run(self, job: DeviceJob) -> DeviceResult:
        raise RuntimeError("a compile-time fact needs no device run")


@cache
def compile_facts(version: str) -> Facts:
    """Capability flags (1 available, 0 refused) and compile-time limits under `version`."""
    available = {probe.construct: check(probe.program(version), version).ok for probe in CONSTRUCTS}
    facts: Facts = {flag: float(available.get(name, False)) for name, flag in FLAGS.items()}
    names = vocabulary(available)
    for pair in PAIRS:
        if pair.key == "contract.stream_dtype" and "f8" in pair.purpose:
            facts[C.F8_STREAM] = float(check(pair.breaking(version, names), version).ok)
        elif pair.key == "contract.stream_dtype" and "f4" in pair.purpose:
            facts[C.F4_STREAM] = float(check(pair.breaking(version, names), version).ok)
    probes = {p.id: p for p in microbenchmarks()}
    bench = CompileOnly()
    facts[P.DM_USABLE.key] = search_dm_capacity(probes["MB14"], version, bench)["dm_usable_per_slice"]
    facts[P.MAX_CHAIN.key] = search_vector_chain(probes["MB11"], version, bench)["ve_max_chain"]
    return facts
