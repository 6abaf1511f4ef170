"""Kernels nobody here wrote, through everything a user's kernel goes through: `try_pack(seed, ...)`.

For one random pack (`build.random_pack`): load it as `chiplore kernel add` does (read and validate,
the generated program of its space's first point included), build its design space, compile a
seeded sample of the space's valid points (`SimRNGD.check`: its first, then drawn ones) and
host-test the first drawn one on the smoke and check sets (`SimRNGD.host_check`; the space's first
where no other is found).
Every outcome is data (`PackOutcome`), a Python exception included (where it happened and its
message): a campaign counts them and goes on. `tabulate` sums outcomes by kind of
kernel; `failure_reasons` lists the distinct reasons with the first seed that shows each.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chiplore.core.errors import TargetError
from chiplore.core.pack import DesignSpace, Facts, Params, points
from chiplore.simulator.execute.grading import SMOKE_SET
from chiplore.simulator.kernels.pack import CHECK_SETS
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.testing.build import PackBuild, crash_line, random_pack

INTERNAL_ERROR = "E0100"  # ferc's internal compiler error: always a bug
POINTS = 40  # the sample of valid points compiled per pack
DRAWS_PER_POINT = 25  # random knob settings drawn per wanted point before the space counts as exhausted


@dataclass
class PackOutcome:
    """What happened to one random pack, step by step (a step not reached stays empty)."""

    seed: int
    kind: str
    name: str
    build: str  # PackBuild.status
    build_reason: str = ""
    loaded: bool = False
    refused: str = ""  # the one-line reason `kernel add` gave
    points: int = 0  # valid points compiled
    not_compiling: dict[str, int] = field(default_factory=dict)  # points by the code of their first error
    examples: dict[str, str] = field(default_factory=dict)  # per error code, its first message
    host_test: str = ""  # "passed", "failed: ...", "not run: ..."
    crashes: list[str] = field(default_factory=list)  # "step: Type: message (at file:line in fn)"
    seconds: float = 0.0
    names: list[str] = field(default_factory=list)  # the kernel's own names (reasons are generalised over them)
    size: tuple[int, int] = (0, 0)  # (ops, parameter elements): the smallest pack is a reason's example

    @property
    def internal_errors(self) -> int:
        return self.not_compiling.get(INTERNAL_ERROR, 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PackOutcome:
        return cls(**{**data, "size": tuple(data.get("size", (0, 0)))})


def try_pack(seed: int, root: Path, target: SimRNGD, points: int = POINTS) -> PackOutcome:
    """One random pack, built in `root` and added to `target` (whose data dir it is installed in)."""
    started = time.monotonic()
    try:
        build = random_pack(seed, root)
    except Exception as error:  # random_pack records its own findings: this is a bug of the builder
        return PackOutcome(seed, "?", "?", "crash", crashes=[f"build: {crash_line(error)}"],
                           seconds=time.monotonic() - started)  # fmt: skip
    sketch = build.sketch
    names = {p.name for p in sketch.params} | {str(op["out"]) for op in sketch.ops if "out" in op} | set(sketch.axes)
    elements = sum(sketch.elements(p) for p in sketch.params)
    outcome = PackOutcome(seed, build.kind, build.name, build.status, build.reason, names=sorted(names),
                          size=(len(sketch.ops), elements))  # fmt: skip
    if build.status == "crash":
        outcome.crashes.append(f"build: {build.reason}")
    if build.built:
        _load_and_design(build, target, points, outcome)
    outcome.seconds = round(time.monotonic() - started, 2)
    return outcome


def _load_and_design(build: PackBuild, target: SimRNGD, points: int, outcome: PackOutcome) -> None:
    step = "load"
    try:
        try:
            spec = target.add_kernel(build.folder)
        except TargetError as error:
            outcome.refused = str(error)
            return
        outcome.loaded = True
        step = "design space"
        version = build.sketch.toolchain
        facts = compile_facts(version)  # the shape among them: the space is written for the chip at hand
        space = target.pack().design_space(spec, facts)
        if space is None:
            outcome.crashes.append("design space: a loaded pack has no design space")
            return
        step = "sample"
        sample = sample_points(space, facts, points, random.Random(f"unseen/{build.seed}"))
        tested_source = None  # the first drawn point's (the space's first is validated when the pack is added)
        for index, params in enumerate(sample):
            step = f"source {params}"
            source = space.source(params, facts, version)
            if index <= 1:
                tested_source = source
            step = "check"
            errors = [d for d in target.check(source, version).diagnostics if d.is_error]
            outcome.points += 1
            if errors:
                code = errors[0].code
                outcome.not_compiling[code] = outcome.not_compiling.get(code, 0) + 1
                outcome.examples.setdefault(code, f"{params}: {errors[0].message}")
        if tested_source is None:
            outcome.host_test = "not run: no valid point sampled"
            return
        step = "host test"
        # the smoke set and the check sets (`exact`, `cancel`): those see a rounding point a design lets go
        tested = target.host_check(tested_source, spec.name, version, (SMOKE_SET, *CHECK_SETS))
        assert tested is not None  # SimRNGD checks every kernel it offers
        if tested.correctness is None:
            outcome.host_test = f"not run: {tested.message}"
        elif tested.correctness.passed:
            outcome.host_test = "passed"
        else:
            outcome.host_test = f"failed: {tested.correctness.message}"
    except Exception as error:  # a crash is a finding: counted, and the campaign goes on
        outcome.crashes.append(f"{step.split(' ')[0]}: {crash_line(error)}")


def sample_points(space: DesignSpace, facts: Facts, wanted: int, rng: random.Random) -> list[Params]:
    """Up to `wanted` distinct valid settings: the space's first (the one `kernel add` validates), then
    settings with each knob drawn uniformly (as benchmarks/loop_vs_peers.py draws its peers' designs);
    fewer where the draws find no more."""
    found: dict[str, Params] = {}
    first = next(iter(points(space, facts)), None)
    if first is not None:
        found[repr(sorted(first.items()))] = first
    for _ in range(wanted * DRAWS_PER_POINT):
        if len(found) == wanted:
            break
        setting = {knob.name: rng.choice(knob.values) for knob in space.knobs}
        key = repr(sorted(setting.items()))
        if key not in found and space.valid(setting, facts):
            found[key] = setting
    return list(found.values())


# ---- summing up --------------------------------------------------------------------------------------

COLUMNS = ("packs", "built", "gap", "no point", "baseline fails", "loaded", "refused", "points", "not compiling",
           "ICE", "crashes", "host fails")  # fmt: skip


def tabulate(outcomes: list[PackOutcome]) -> dict[str, Counter[str]]:
    """Per kind (and "all"), the count of each outcome (`COLUMNS`)."""
    rows: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        for kind in (outcome.kind, "all"):
            row = rows.setdefault(kind, Counter())
            row["packs"] += 1
            row["built"] += outcome.build == "built"
            row["gap"] += outcome.build == "generator_gap"
            row["no point"] += outcome.build == "no_valid_point"
            row["baseline fails"] += outcome.build.startswith("baseline_")
            row["loaded"] += outcome.loaded
            row["refused"] += bool(outcome.refused)
            row["points"] += outcome.points
            row["not compiling"] += sum(outcome.not_compiling.values())
            row["ICE"] += outcome.internal_errors
            row["crashes"] += len(outcome.crashes)
            row["host fails"] += outcome.host_test.startswith(("failed", "not run"))
    return dict(sorted(rows.items(), key=lambda item: (item[0] == "all", item[0])))


def failure_reasons(outcomes: list[PackOutcome]) -> list[tuple[str, str, int, int]]:
    """(what failed, the reason with the kernel's own names and numbers generalised, how many packs,
    the seed of the smallest pack that shows it), most frequent first."""
    seen: dict[tuple[str, str], list[PackOutcome]] = {}
    for outcome in outcomes:
        for what, reason in dict.fromkeys(_reasons(outcome)):
            seen.setdefault((what, general(reason, outcome.names)), []).append(outcome)
    rows = [(what, reason, len(shown), min(shown, key=lambda o: (o.size, o.seed)).seed)
            for (what, reason), shown in seen.items()]  # fmt: skip
    return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))


def _reasons(outcome: PackOutcome) -> list[tuple[str, str]]:
    reasons: list[tuple[str, str]] = []
    if outcome.build != "built":
        reasons.append((outcome.build, outcome.build_reason))
    if outcome.refused:
        reasons.append(("refused", outcome.refused.split(": ", 1)[-1]))
    reasons += [(f"not compiling {code}", message) for code, message in outcome.examples.items()]
    if outcome.host_test.startswith(("failed", "not run")):
        reasons.append(("host test", outcome.host_test))
    reasons += [("crash", crash) for crash in outcome.crashes if not crash.startswith("build: ")]
    return reasons


# names too common in messages' own words to stand for a kernel's name there
ENGLISH = frozenset({"x", "y", "h", "w", "s", "n", "i", "r", "in", "at", "for", "out", "one", "every", "type",
                     "int", "let", "fn", "rep", "axis", "axes", "kernel", "mut", "part", "sub", "main", "tile",
                     "chunk"})  # fmt: skip


def general(reason: str, names: list[str] = ()) -> str:  # type: ignore[assignment]
    """A reason with what varies between kernels replaced: the knob setting a compile error names,
    the kernel's name and its own names (<kernel>, <name>), paths, and numbers (#; error codes stay)."""
    text = re.sub(r"^\{[^{}]*\}: ", "", reason)
    text = re.sub(r"u\d+_[a-z_]+", "<kernel>", text)
    text = re.sub(r"(?<![\w])/[\w./-]+", "<path>", text)
    own = sorted((n for n in names if n not in ENGLISH), key=len, reverse=True)
    if own:
        text = re.sub(r"(?<![\w])(" + "|".join(map(re.escape, own)) + r")(?![\w])", "<name>", text)
    text = re.sub(r"(?<![E\d])\d+(\.\d+)?(e-?\d+)?", "#", text)
    return text[:240]
