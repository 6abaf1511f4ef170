"""SimRNGD's target pack: what chiplore's generic learner and optimizer know of this chip family.

Written as a chip team would write one for its own chip (docs/targets.md): the parameter keys
(`params`), the microbenchmark fits (`fits`), the compile probes (`rule_probes`), the capability
flags the rules decide (`capabilities`), the builtin librarian's doc patterns (`doc_patterns`),
ferc's diagnostic vocabulary and the repairs (`compiler`), the design families (`space`), the
cost model over their workloads (`cost`) and the one over ferc's statistics of any program
(`estimate`), and a Pygments lexer of Ferrite for the report (`lexer`). Nothing here reads the
simulator's hidden truth.
"""

from __future__ import annotations

from chiplore.core.pack import DesignSpace
from chiplore.core.params import ParamKey, ParamRegistry
from simulator.pack.capabilities import CAPABILITIES
from simulator.pack.compiler import FercRepairs, FercVocabulary
from simulator.pack.cost import WorkloadCostModel
from simulator.pack.doc_patterns import DOC_PATTERNS
from simulator.pack.estimate import StatsCostModel
from simulator.pack.fits import FITS
from simulator.pack.language import FerriteGuide
from simulator.pack.lexer import FerriteLexer
from simulator.pack.params import CHIP_ROOF, PARAMS
from simulator.pack.rule_probes import RULE_PROBES
from simulator.pack.space import FAMILIES
from simulator.toolchain.stats import analyze


class SimRNGDPack:
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
        # a family's design by its knobs; any other program (an LLM's, a hand-written one) by ferc's stats
        self.cost_model = StatsCostModel(analyze, knobs=WorkloadCostModel(FAMILIES))

    def design_space(self, kernel: str) -> DesignSpace | None:
        return FAMILIES.get(kernel)

    def lexer(self) -> FerriteLexer:
        """Ferrite's Pygments lexer (the optional TargetPack member the report highlights programs with)."""
        return FerriteLexer()
