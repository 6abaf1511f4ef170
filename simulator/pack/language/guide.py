"""SimRNGD's language guide (chiplore.core.pack.LanguageGuide): the DSL summariser's chip-specific
part for Ferrite. Which constructs exist (`catalogue`), which a paragraph names and a program uses
(`usage`), how a vendor code block becomes a program ferc checks (`complete`), programs for
constructs no block shows (`examples`), and what a program computes, run on the host by the
simulator's executor (`host`). Completions and programs are written for a chip's shape: the
documented one, or what the shape probe (MB00) found (`written_for`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chiplore.core.pack import Construct, DocExample, HostCase, HostRun, LanguageGuide, Unavailable
from chiplore.core.target import Diagnostic
from chiplore.simulator.pack.language import complete, examples, host
from chiplore.simulator.pack.language.catalogue import CATALOGUE, MENTIONS
from chiplore.simulator.pack.language.usage import used_in
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip

DEPRECATED = re.compile(r"^'(?P<construct>.+?)' is deprecated in toolchain \S+; (?P<instead>.*)$")


class FerriteGuide(LanguageGuide):
    """How chiplore's DSL summary reads, completes, checks and runs Ferrite."""

    constructs: tuple[Construct, ...] = tuple(named.construct for named in CATALOGUE)

    def __init__(self, chip: Chip = DOCUMENTED_CHIP) -> None:
        self.chip = chip  # what the completions and the pack's programs are written for

    def written_for(self, found: Mapping[str, float]) -> FerriteGuide:
        return FerriteGuide(Chip.named(found))

    def named_in(self, text: str) -> frozenset[str]:
        return frozenset(name for name, pattern in MENTIONS if pattern.search(text))

    def used_in(self, program: str) -> frozenset[str]:
        return used_in(program)

    def complete(self, info: str, body: str, version: str, context: str) -> DocExample | None:
        return complete.complete(info, body, version, context, self.chip)

    def deprecated(self, diagnostic: Diagnostic) -> Unavailable | None:
        match = DEPRECATED.match(diagnostic.message) if diagnostic.severity != "error" else None
        return Unavailable(construct=match["construct"], instead=match["instead"]) if match else None

    def example(self, construct: str, version: str) -> str | None:
        return examples.example(construct, version, self.chip)

    def host_case(self, program: str, version: str) -> HostCase | None:
        return host.case(program)

    def run(self, program: str, inputs: Mapping[str, Any], version: str) -> HostRun:
        return host.run(program, inputs, version)
