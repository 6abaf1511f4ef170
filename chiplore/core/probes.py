"""What a target pack declares about learning its chip: microbenchmark fits and compile probes.

A *fit* turns one microbenchmark's sweep (the medians of its points, see `Target.microbenchmarks`)
into parameter values, or, for a limit, searches for it with the compiler or the device. A *compile
probe* is a tiny program that pushes one construct, one rule or one limit of the compiler; the
diagnostics it draws become legality rules. The generic learner (`ingest`) runs both; the pack
writes the programs and the models, because only it knows the chip's language.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from chiplore.core.params import ParamKey
from chiplore.core.rules import Predicate
from chiplore.core.target import CheckResult, DeviceJob, DeviceResult, ProbeTemplate


class Bench(Protocol):
    """The device and the compiler as a probe's search uses them."""

    def run(self, job: DeviceJob) -> DeviceResult:
        """Run one device job (recorded by the learner)."""
        ...

    def check(self, source: str, version: str) -> CheckResult:
        """Compile a program (free)."""
        ...


# (the sweep's points, each point's median cycles, values of earlier fits) -> values by local name
FitModel = Callable[[list[dict[str, str]], np.ndarray, dict[str, float]], dict[str, float]]
# (the probe, the toolchain version, the bench) -> exact values by local name
LimitSearch = Callable[[ProbeTemplate, str, Bench], dict[str, float]]


@dataclass(frozen=True)
class ProbeFit:
    """How one probe's runs become parameters.

    `names` are the fit's local names for what it finds; `records` maps those that are hardware
    parameters to their keys (the others are intermediate values later fits take as givens, e.g. an
    intercept). Exactly one of `model` (a fit over the sweep's medians, with bootstrap intervals) and
    `search` (an exact limit, found by compiling or running) is set. `secondary` names values that
    are fitted but known to be loose (a small term beside a large one)."""

    id: str
    template: str  # the id of the ProbeTemplate it sweeps
    names: tuple[str, ...]
    records: Mapping[str, ParamKey] = field(default_factory=dict)
    model: FitModel | None = None
    search: LimitSearch | None = None
    secondary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.model is None) == (self.search is None):
            raise ValueError(f"fit {self.id}: set exactly one of model and search")
        unknown = set(self.records) - set(self.names)
        if unknown:
            raise ValueError(f"fit {self.id}: records {sorted(unknown)} it does not find")


# What a probe program is written in: the construct name a version accepts for each role a probe
# needs (e.g. "up" -> "widen") and, where the chip's structure shapes a program (its layouts, its
# engine numbers), that structure as the pack writes it (e.g. "clusters" -> "4").
Vocabulary = Mapping[str, str]


@dataclass(frozen=True)
class ConstructProbe:
    """Is `construct` available under a version? `program(version, names)` uses it and nothing
    doubtful; `names` holds the chip's structure only (the construct names are what is being asked)."""

    construct: str
    program: Callable[[str, Vocabulary], str]


@dataclass(frozen=True)
class PairProbe:
    """A program that breaks one rule and the same program fixed: the diagnostic only the breaking
    one draws is the rule. `predicate` is what a design must satisfy, over the quantity `key`
    (chiplore.core.rules: `AtMost`, `NotIn`, `Forbidden` for a yes/no fact, ...)."""

    key: str
    purpose: str
    breaking: Callable[[str, Vocabulary], str]
    fixed: Callable[[str, Vocabulary], str]
    predicate: Predicate


@dataclass(frozen=True)
class LimitProbe:
    """A program with a knob that compiles below some value and not above it (found by bisection):
    the limit is `largest * step + frame` of the quantity `key`."""

    key: str
    purpose: str
    program: Callable[[str, Vocabulary, int], str]
    low: int  # compiles
    high: int  # does not
    step: int = 1
    frame: int = 0  # what the probe's own frame adds to the quantity
    # which diagnostic codes mark the limit (None: any diagnostic the smallest value does not draw): on a
    # chip whose DM is small, the TRF probe's staging buffer overflows DM long before a lane is full, and
    # that refusal is DM's limit, not the TRF's
    marks: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class RuleProbes:
    """Every compile probe of a pack. `structure` names the fits (compile-only searches) whose values
    every probe program is written for, found first (a chip's shape: a program written for another
    shape draws shape diagnostics beside the one it probes). `vocabulary(available, found)` writes
    the names the probes use from what the construct probes found available and what the structure
    searches found (by the fits' local names; empty: the structure the docs state)."""

    constructs: tuple[ConstructProbe, ...]
    pairs: tuple[PairProbe, ...]
    limits: tuple[LimitProbe, ...]
    vocabulary: Callable[[Mapping[str, bool], Mapping[str, float]], Vocabulary]
    structure: tuple[str, ...] = ()


def largest_accepted(low: int, high: int, refused: Callable[[int], object]) -> int:
    """The largest value in [low, high) that is not refused, for a refusal that starts somewhere and
    holds above it (bisection; `low` is accepted, `high` refused)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if refused(middle) else (middle, high)
    return low
