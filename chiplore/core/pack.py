"""The TargetPack: what a generic learner and optimizer need to know of one chip family.

A `Target` is the chip as a user sees real hardware (docs, compiler, device). Its pack is what a
chip team writes down once so that chiplore's generic layers can learn and tune it without a line
of chip-specific code: the parameter keys and the probes that measure them, the compile probes
that find the rules, the patterns the builtin librarian reads the docs with, the compiler's
diagnostic vocabulary, the rewrites that port a program to a new toolchain, the design spaces the
builtin proposers search, and the structure of the cost model. `agents/` and `ingest/` see a chip
only through `Target` and `TargetPack`; docs/targets.md walks through writing one.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chiplore.core.params import ParamKey, ParamRegistry
from chiplore.core.probes import ProbeFit, RuleProbes
from chiplore.core.target import Diagnostic, KernelSpec

Facts = dict[str, float]  # parameter key -> value, and capability flags (0 refused, 1 available)
Params = dict[str, int]  # a design's knob settings


# ---- capabilities ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    """A yes/no fact the legality rules decide: `flag` is 0 when a rule on `rule_key` refuses (the
    value `value`, when given, among the values its predicate lists), 1 when no rule does."""

    flag: str
    rule_key: str
    value: str | None = None


# ---- the builtin librarian's doc patterns -----------------------------------------------------


@dataclass(frozen=True)
class ParamPattern:
    """A sentence states `param` when every regex of `words` matches it (case-insensitive); a value
    whose unit matches `inverse_unit` is the inverse of the parameter ("one flit per cycle")."""

    param: ParamKey
    words: tuple[str, ...]
    inverse_unit: str | None = None


@dataclass(frozen=True)
class FlagPattern:
    """A sentence states the yes/no fact `key` when all `words` match; `negation` makes it a "no"."""

    key: str
    words: tuple[str, ...]
    negation: str


@dataclass(frozen=True)
class StatedValue:
    """A value a special extractor read from a sentence."""

    param: ParamKey
    value: float


@dataclass(frozen=True)
class DocPatterns:
    """How the builtin librarian finds the claims of this chip's docs. `units` is a regex
    alternation of the unit spellings the docs use; `extractors` read sentences no pattern fits
    (several values in one sentence) and return what they state, or nothing."""

    params: tuple[ParamPattern, ...]
    flags: tuple[FlagPattern, ...] = ()
    units: str = r"bytes per cycle|B/cycle|cycles|KB|GB/s|TB/s|GHz|%|bytes|times"
    extractors: tuple[Callable[[str], list[StatedValue]], ...] = ()


# ---- the compiler's vocabulary and repairs -----------------------------------------------------


@dataclass(frozen=True)
class Unavailable:
    """A diagnostic saying a construct does not exist in this toolchain, and what the compiler
    suggests instead (both as the diagnostic words them)."""

    construct: str
    instead: str = ""


class CompilerVocabulary(Protocol):
    """What the compiler's diagnostic codes mean to chiplore, and which constructs a program uses."""

    def is_syntax(self, diagnostic: Diagnostic) -> bool:
        """The program does not parse, or names something the language lacks (the screener's first check)."""
        ...

    def unavailable(self, diagnostic: Diagnostic) -> Unavailable | None:
        """The construct this version does not have, when the diagnostic says so (rules and repairs)."""
        ...

    def stated_bound(self, diagnostic: Diagnostic) -> float | None:
        """A limit the message states ("exceeds 491,520 B"): it refines a learnt rule's predicate."""
        ...

    def constructs(self, source: str) -> frozenset[str]:
        """The constructs a program uses, named as the construct probes name them (the screener
        checks them against the rules before compiling)."""
        ...


class Repairs(Protocol):
    """How a program refused by a newer (or older) toolchain is ported, one diagnostic at a time."""

    def retarget(self, source: str, version: str) -> str:
        """The program with its own toolchain declaration set to `version` (unchanged if it has none)."""
        ...

    def rewrite(self, source: str, diagnostic: Diagnostic) -> tuple[str, str] | None:
        """(what changes, the rewritten program) that answers the diagnostic, or None."""
        ...


# ---- design spaces and the cost model ----------------------------------------------------------


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[int, ...]


class DesignSpace(Protocol):
    """A kernel's programs written from a few knobs: what the builtin proposers search.

    `facts` are what the graph has measured or learnt (parameter key -> value, capability flags), so
    a space can size buffers to the measured memory and write the constructs the rules allow."""

    kernel: str
    knobs: tuple[Knob, ...]
    consults: tuple[str, ...]  # the fact keys its designs are decided from (each design CONSULTS them)

    def valid(self, params: Params, facts: Facts) -> bool:
        """Whether the knobs make a program this chip can hold."""
        ...

    def source(self, params: Params, facts: Facts, version: str) -> str:
        """The program, in the target's language, under `version`."""
        ...

    def features(self, params: Params, facts: Facts) -> dict[str, object]:
        """The quantities the legality rules constrain, as this design has them (screened before compiling)."""
        ...

    def rationale(self, params: Params, facts: Facts, predicted_cycles: float) -> str:
        """Why this design, in the chip's terms (recorded on the design)."""
        ...


def settings(space: DesignSpace) -> Iterator[Params]:
    """Every knob setting of a space, valid or not, in a fixed order."""
    names = [knob.name for knob in space.knobs]
    for values in itertools.product(*(knob.values for knob in space.knobs)):
        yield dict(zip(names, values, strict=True))


def points(space: DesignSpace, facts: Facts) -> Iterator[Params]:
    """Every valid knob setting of a space, in a fixed order."""
    return (setting for setting in settings(space) if space.valid(setting, facts))


def shuffled_points(space: DesignSpace, facts: Facts, seed: int | str) -> Iterator[Params]:
    """Every valid knob setting of a space in a seeded random order, found as it is drawn: a sample
    of a large space checks as many settings as it draws (a few hundred of the FFN's 124,416, where
    listing its 17,920 valid ones wrote every program: 10 s per facts set)."""
    knobs = space.knobs
    names = [knob.name for knob in knobs]
    for index in _permutation(math.prod(len(knob.values) for knob in knobs), random.Random(seed)):
        values: list[int] = []
        for knob in reversed(knobs):  # mixed radix, the last knob fastest, as `settings` orders them
            index, digit = divmod(index, len(knob.values))
            values.append(knob.values[digit])
        setting = dict(zip(names, reversed(values), strict=True))
        if space.valid(setting, facts):
            yield setting


def _permutation(total: int, rng: random.Random) -> Iterator[int]:
    """0..total-1 in a uniformly random order without listing them up front: draws rejected while
    fewer than half are taken, then the rest shuffled (a drawn prefix costs what it draws)."""
    drawn: set[int] = set()
    while len(drawn) < total // 2:
        index = rng.randrange(total)
        if index not in drawn:
            drawn.add(index)
            yield index
    rest = [i for i in range(total) if i not in drawn]
    rng.shuffle(rest)
    yield from rest


def nearest_points(space: DesignSpace, params: Params, facts: Facts) -> list[Params]:
    """The valid settings that move the fewest knobs from `params` (a knob `params` lacks, or holds at
    a value the space no longer has, always moves), in `settings` order: the rings around `params`
    are checked outward, so a setting one knob away costs a few checks, not the whole space's."""
    knobs = space.knobs
    kept = [knob for knob in knobs if params.get(knob.name) in knob.values]
    must = [knob for knob in knobs if knob not in kept]
    for extra in range(len(kept) + 1):
        found: list[Params] = []
        for chosen in itertools.combinations(kept, extra):
            moved = {knob.name for knob in (*must, *chosen)}
            choices = [[v for v in knob.values if v != params.get(knob.name)] if knob.name in moved
                       else [params[knob.name]] for knob in knobs]  # fmt: skip
            for values in itertools.product(*choices):
                setting = dict(zip((knob.name for knob in knobs), values, strict=True))
                if space.valid(setting, facts):
                    found.append(setting)
        if found:
            order = {knob.name: {v: i for i, v in enumerate(knob.values)} for knob in knobs}
            return sorted(found, key=lambda p: [order[name][value] for name, value in p.items()])
    return []


def neighbours(space: DesignSpace, params: Params, facts: Facts) -> Iterator[Params]:
    """Valid settings one knob step from `params`: what a refiner tries next to BEST. A knob added to
    the space since `params` was written takes its first value."""

    return _moves(space, params, facts, _adjacent)


def repaired_steps(space: DesignSpace, params: Params, facts: Facts) -> Iterator[Params]:
    """For each knob step from `params` that names no valid setting, the valid settings that take the
    step and move one other knob to any of its values: a step the space refuses alone (more k-groups
    whose chunks no longer divide the rows) is often one knob away from a design that takes it. In
    `settings` order per step; each setting once, none of `neighbours`'."""
    full = {**{knob.name: knob.values[0] for knob in space.knobs}, **params}
    seen: set[tuple[tuple[str, int], ...]] = set()
    for knob in space.knobs:
        for step in _adjacent(knob, full[knob.name]):
            stepped = {**full, knob.name: step}
            if space.valid(stepped, facts):
                continue
            for other in space.knobs:
                if other.name == knob.name:
                    continue
                for value in other.values:
                    setting = {**stepped, other.name: value}
                    key = tuple(sorted(setting.items()))
                    if value != stepped[other.name] and key not in seen and space.valid(setting, facts):
                        seen.add(key)
                        yield setting


def _adjacent(knob: Knob, current: int) -> list[int]:
    """The values one step from `current` in the knob's order (none when it is not one of them)."""
    if current not in knob.values:
        return []
    index = knob.values.index(current)
    return [knob.values[i] for i in (index - 1, index + 1) if 0 <= i < len(knob.values)]


def one_knob_moves(space: DesignSpace, params: Params, facts: Facts) -> Iterator[Params]:
    """Valid settings that differ from `params` in one knob, set to any other of its values: a search's
    steps. A knob added to the space since `params` was written takes its first value."""
    return _moves(space, params, facts, lambda knob, current: [v for v in knob.values if v != current])


def _moves(space: DesignSpace, params: Params, facts: Facts,
           candidates: Callable[[Knob, int], list[int]]) -> Iterator[Params]:  # fmt: skip
    """`params` (missing knobs at their first value) with one knob moved to each of its candidates, if valid."""
    full = {**{knob.name: knob.values[0] for knob in space.knobs}, **params}
    for knob in space.knobs:
        for value in candidates(knob, full[knob.name]):
            moved = {**full, knob.name: value}
            if space.valid(moved, facts):
                yield moved


class CostModel:
    """The structure of the chip's cost: cycles predicted from a design and the learnt parameters
    only (never the target's truth). The generic loop calibrates it against the device. A chip's
    model subclasses this and implements `predict`; `explain` is optional."""

    # the parameter keys its prices read: a design it priced consulted them (CONSULTED, flagged when an
    # upgrade changes one)
    reads: tuple[str, ...] = ()

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        """Predicted cycles of one run, or None when this model cannot price the program. Called for
        every design a proposer considers and every design the estimate screen sees."""
        raise NotImplementedError

    def explain(self, kernel: str, source: str, params: Params | None, facts: Facts) -> str:
        """What bounds the design, in a line (e.g. "bound by the Tensor Unit's main queue, 91 % busy;
        DMA engines 60 %"); called when a proposal's rationale is written. "" when the model cannot say."""
        return ""


# ---- the language guide (optional): how the docs' code becomes checked language facts ---------


@dataclass(frozen=True)
class Construct:
    """One construct of the chip's language, as its team names it: the summary has an entry for it
    under each version whose docs name it. `rule_keys` are the legality-rule keys that constrain
    it (a key ending in "." names every rule under it); `spellings` are how the compiler's
    messages write it ("'.cast(D)' is not available ..." spells `cast` as ".cast(D)")."""

    name: str
    kind: str  # e.g. "stage", "memory", "mapping", "attribute", "dma", "reduction"
    syntax: str  # how it is written, e.g. ".widen(D)"
    rule_keys: tuple[str, ...] = ()
    spellings: tuple[str, ...] = ()


@dataclass(frozen=True)
class DocExample:
    """A doc code block as a program the compiler takes. `expects`: the diagnostic code the docs
    say it draws (None: the docs show it as a program that compiles)."""

    source: str
    expects: str | None = None


@dataclass(frozen=True)
class HostCase:
    """What a program computes, to be checked on the host: either run as the harness kernel
    `kernel` (`Target.host_test`, its reference the expectation), or on `inputs` against numpy's
    `expected` outputs (arrays by parameter name) within `atol + rtol * |expected|`."""

    statement: str  # what it computes, in words ("y = 2 x")
    kernel: str | None = None
    inputs: Mapping[str, Any] | None = None
    expected: Mapping[str, Any] | None = None
    atol: float = 0.0
    rtol: float = 0.0


@dataclass(frozen=True)
class HostRun:
    """The outputs of one host run (arrays by parameter name), or why there are none."""

    outputs: Mapping[str, Any] | None = None
    error: str = ""


class LanguageGuide:
    """What is chip-specific in summarising the language from its docs: which constructs exist,
    which a paragraph or a program names, how a doc code block becomes a checkable program, and
    what a program computes. The generic summariser (`ingest/dsl_summary.py`) does the rest. A
    chip's guide subclasses it and implements every method that raises NotImplementedError; `run`
    is optional."""

    constructs: Sequence[Construct]

    def named_in(self, text: str) -> frozenset[str]:
        """The constructs a prose paragraph or sentence names (names of `constructs`)."""
        raise NotImplementedError

    def used_in(self, program: str) -> frozenset[str]:
        """The constructs a program (or one line of it) uses."""
        raise NotImplementedError

    def complete(self, info: str, body: str, version: str, context: str) -> DocExample | None:
        """A fenced block (its info string and text) as a whole program under `version`: itself when
        complete, a fragment wrapped in what it lacks (`context`: the version's doc text, where
        its declarations may be found); None when the block is not code of this language."""
        raise NotImplementedError

    def deprecated(self, diagnostic: Diagnostic) -> Unavailable | None:
        """The construct a diagnostic says is deprecated (still accepted), and what replaces it."""
        raise NotImplementedError

    def example(self, construct: str, version: str) -> str | None:
        """A minimal program that uses `construct`, for one the docs name in no code block."""
        raise NotImplementedError

    def written_for(self, found: Mapping[str, float]) -> LanguageGuide:
        """The guide whose completions and programs are written for what the pack's structure searches
        found (`RuleProbes.structure`: a chip's shape, by the fits' local names; empty when they found
        nothing); by default the guide itself."""
        return self

    def host_case(self, program: str, version: str) -> HostCase | None:
        """What the program computes, when it is one whose result the team can state; else None."""
        raise NotImplementedError

    def run(self, program: str, inputs: Mapping[str, Any], version: str) -> HostRun | None:
        """Optional: the program run on the host on given inputs (SimRNGD's executor), so that an
        example whose result the team states without naming a kernel can be checked; None (the
        default) when the guide cannot run programs."""
        return None


@runtime_checkable
class HostRunner(Protocol):
    """A guide that can run any program on the host on given inputs (SimRNGD's executor)."""

    def run(self, program: str, inputs: Mapping[str, Any], version: str) -> HostRun: ...


# ---- the pack ------------------------------------------------------------------------------


class TargetPack:
    """Everything chip-specific the generic layers use. Read once per command (`Target.pack()`). A
    chip's pack subclasses it, sets the attributes and implements `design_space`; `lexer` and
    `language_guide` are optional."""

    language: str  # what the chip's programs are written in, as prompts and messages name it
    params: ParamRegistry
    roof: ParamKey  # the rate weights reach compute at: weight bytes / roof is the measured bound
    fits: Sequence[ProbeFit]
    rule_probes: RuleProbes
    capabilities: Sequence[Capability]
    doc_patterns: DocPatterns
    compiler: CompilerVocabulary
    repairs: Repairs
    cost_model: CostModel

    # optional: how the docs' code blocks become checked language facts (the DSL summary); None: the
    # summary is written from the docs' text alone
    language_guide: LanguageGuide | None = None

    def design_space(self, kernel: KernelSpec, facts: Facts | None = None) -> DesignSpace | None:
        """The builtin proposers' space for a kernel, written from what its spec declares (its op
        graph, its baseline's signature) for the chip `facts` describe (its learnt shape; the
        documented one without facts), or None (then only other proposers design it). Called when a
        kernel is opened for optimizing, re-validated by an upgrade, or validated as a new pack."""
        raise NotImplementedError

    def chip_mismatch(self, facts: Facts, version: str) -> str:
        """Optional: why the chip at hand is not the one `facts` were learnt on, in one line ("" when it is,
        or when the pack cannot tell), found without device time (by compiling, say). `optimize` stops
        with it before it spends anything: a data dir learnt on one chip and optimized on another had
        every design refused."""
        return ""

    def no_space_reason(self, kernel: KernelSpec, facts: Facts | None = None) -> str:
        """Optional: why `design_space` has no space for the kernel, in one line ("" when it has one, or
        when the pack cannot say). The loop names it where it stops a kernel for want of a space."""
        return ""

    def lexer(self) -> Any | None:
        """Optional: the Pygments lexer of the chip's language (None by default). The report highlights
        programs with it, and the header `chiplore best` writes above a program uses its line-comment
        syntax."""
        return None


def language_guide(pack: TargetPack) -> LanguageGuide | None:
    """The pack's language guide, or None when it has none. Called by the DSL summariser when a
    version is learnt or upgraded to."""
    return pack.language_guide
