"""SimRNGD's target pack: what chiplore's generic learner and optimizer know of this chip family.

Written as a chip team would write one for its own chip (docs/targets.md): the parameter keys
(`params`), the microbenchmark fits (`fits`), the compile probes (`rule_probes`), the capability
flags the rules decide (`capabilities`), the builtin librarian's doc patterns (`doc_patterns`),
ferc's diagnostic vocabulary and the repairs (`compiler`), the design generator that writes a
design space for any kernel from its op graph (`generator`), the cost model over ferc's statistics
of any program (`estimate`), the language guide of the DSL summary (`language`) and a Pygments
lexer of Ferrite for the report (`lexer`). Nothing here reads the simulator's hidden truth.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from chiplore.core.pack import DesignSpace, Facts, TargetPack
from chiplore.core.params import ParamKey, ParamRegistry
from chiplore.core.target import KernelSpec
from chiplore.simulator.bench import SHAPE_START, microbenchmarks
from chiplore.simulator.pack.capabilities import CAPABILITIES
from chiplore.simulator.pack.compiler import FercRepairs, FercVocabulary
from chiplore.simulator.pack.doc_patterns import DOC_PATTERNS
from chiplore.simulator.pack.estimate import StatsCostModel
from chiplore.simulator.pack.fits import FITS
from chiplore.simulator.pack.generator import generated_space, generation_problem, vocab
from chiplore.simulator.pack.language import FerriteGuide
from chiplore.simulator.pack.lexer import FerriteLexer
from chiplore.simulator.pack.params import CHIP_ROOF, CLUSTERS, PARAMS
from chiplore.simulator.pack.rule_probes import RULE_PROBES
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.stats import analyze

# Spaces are shared by every pack in the process: a space is a function of the kernel and the chip's
# shape, and it keeps what it worked out (its programs, which settings are valid under which facts).
# Each target, each test, each run made its own before, and wrote the FFN's programs again under
# every facts set.
_SPACES: OrderedDict[str, DesignSpace | None] = OrderedDict()
_SPACES_KEPT = 32  # kernels x shapes one process works with
_SPACES_LOCK = threading.Lock()


class SimRNGDPack(TargetPack):
    """The TargetPack of SimRNGD (chiplore.core.pack.TargetPack)."""

    language = "Ferrite"
    params: ParamRegistry = PARAMS
    roof: ParamKey = CHIP_ROOF
    fits = FITS
    rule_probes = RULE_PROBES
    capabilities = CAPABILITIES
    doc_patterns = DOC_PATTERNS
    language_guide = FerriteGuide()  # the DSL summary's Ferrite part (optional TargetPack member)

    def __init__(self) -> None:
        self.compiler = FercVocabulary()
        self.repairs = FercRepairs(self.compiler)
        # every program priced the same way, a generated design's as an LLM's: by ferc's statistics
        self.cost_model = StatsCostModel(analyze)

    def design_space(self, kernel: KernelSpec, facts: Facts | None = None) -> DesignSpace | None:
        """The generator's space for the kernel's op graph on the chip's learnt shape (None without a
        graph, or with one it cannot write: `chiplore.simulator.pack.generator.generation_problem` says
        why). One per spec and shape in the process: a space keeps the programs it wrote."""
        chip = vocab.chip(facts or {})
        key = kernel.model_dump_json(include={"name", "baseline_source", "ops"}) + repr(chip)
        with _SPACES_LOCK:
            if key in _SPACES:
                _SPACES.move_to_end(key)
                return _SPACES[key]
        space = generated_space(kernel, chip)  # outside the lock: a big space takes seconds to build
        with _SPACES_LOCK:
            space = _SPACES.setdefault(key, space)
            while len(_SPACES) > _SPACES_KEPT:
                _SPACES.popitem(last=False)
        return space

    def chip_mismatch(self, facts: Facts, version: str) -> str:
        """Whether the compiler still takes the learnt shape (MB00's program at every learnt value; one
        compile): "" when it does, or when no shape was learnt."""
        if CLUSTERS.key not in facts:
            return ""
        chip = vocab.chip(facts)
        point = SHAPE_START | {"CLUSTERS": str(chip.clusters), "SLICES": str(chip.slices), "LANES": str(chip.lanes),
                               "ENGINE": str(chip.engines - 1)}  # fmt: skip
        probe = next(p for p in microbenchmarks(chip) if p.id == "MB00")
        errors = [d for d in check(probe.instantiate(point, version), version).diagnostics if d.is_error]
        if not errors:
            return ""
        return (f"this chip is not the one the graph learnt ({chip.clusters} clusters x {chip.slices} slices, "
                f"{chip.lanes} lanes, {chip.engines} DMA engines): the compiler answers {errors[0].code} "
                f"{errors[0].message}; learn this chip in a data dir of its own (or point CHIPLORE_SIM_TRUTH "
                "at the chip this one learnt)")  # fmt: skip

    def no_space_reason(self, kernel: KernelSpec, facts: Facts | None = None) -> str:
        """Why the generator writes no space for the kernel on the learnt shape ("" when it does)."""
        if self.design_space(kernel, facts) is not None:
            return ""
        return generation_problem(kernel, vocab.chip(facts or {})) or ""

    def lexer(self) -> FerriteLexer:
        """Ferrite's Pygments lexer (the optional TargetPack member the report highlights programs with)."""
        return FerriteLexer()
