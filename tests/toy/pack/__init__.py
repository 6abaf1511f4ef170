"""The toy chip's target pack (chiplore.core.pack.TargetPack): what its team wrote down once so that
chiplore's generic learner and optimizer can learn and tune it. Built from chiplore.core alone: it
reads none of the chip's internals (its truth, compiler or device), only what a user of the chip
could know."""

from __future__ import annotations

from chiplore.core.pack import DesignSpace, Facts, TargetPack
from chiplore.core.params import ParamKey, ParamRegistry
from chiplore.core.target import KernelSpec
from tests.toy.pack.compiler import ToylRepairs, ToylVocabulary
from tests.toy.pack.doc_patterns import DOC_PATTERNS
from tests.toy.pack.fits import FITS
from tests.toy.pack.language import ToylGuide
from tests.toy.pack.params import INGRESS, PARAMS
from tests.toy.pack.probes import CAPABILITIES, RULE_PROBES
from tests.toy.pack.space import GemvCostModel, GemvSpace


class ToyPack(TargetPack):
    language = "Toyl"
    params: ParamRegistry = PARAMS
    roof: ParamKey = INGRESS
    fits = FITS
    rule_probes = RULE_PROBES
    capabilities = CAPABILITIES
    doc_patterns = DOC_PATTERNS
    language_guide = ToylGuide()  # how the docs' Toyl blocks become checked programs (the DSL summary)

    def __init__(self) -> None:
        self.compiler = ToylVocabulary()
        self.repairs = ToylRepairs(self.compiler)
        self.cost_model = GemvCostModel()
        self._spaces = {GemvSpace.kernel: GemvSpace()}

    def design_space(self, kernel: KernelSpec, facts: Facts | None = None) -> DesignSpace | None:
        return self._spaces.get(kernel.name)
