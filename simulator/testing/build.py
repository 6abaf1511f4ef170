"""Random kernel packs, written to a folder: `random_pack(seed, root)`.

A pack is a random sketch (`random_graphs.random_sketch`) written as `kernel.toml` without a
reference.py (its reference is its op graph's), and a `baseline.fe` the design generator writes:
`generated_space(spec, chip)` for a spec read from the sketch with a signature-only baseline, then
`space.source` at the space's first valid point (the plainest setting), under the pack's toolchain
with the facts its compiler shows (`compile_facts`: which constructs the toolchain has and the chip's
shape, what learning would record; no device truth), so a campaign runs on any shape
CHIPLORE_SIM_TRUTH names. The baseline must then pass the derived reference on the smoke set.
A pack whose numerics leave more open than its atol on some set (an add that cancels a rounded
value, a contraction's bf16 input) gets the atol that covers it, as docs/kernels.md asks of an author.

Where that fails (the generator cannot write the graph, the space has no valid point, the program
does not compile, fails the reference or cannot run) the result says why, in one line: a finding
about the generator, not an error of the builder. A Python exception anywhere is recorded the same
way (`status = "crash"`), with where it happened, so a campaign counts it and goes on.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from chiplore.core.pack import points
from chiplore.simulator.execute.executor import ExecutionError, IndexOutOfRange
from chiplore.simulator.execute.grading import SMOKE_SET, case_inputs, grade_case
from chiplore.simulator.execute.graph_reference import evaluate, rounding_envelope
from chiplore.simulator.kernels.manifest import BASELINE, MANIFEST, PackProblem
from chiplore.simulator.kernels.pack import CHECK_SETS, KernelPack, read_pack
from chiplore.simulator.pack.generator import generated_space, generation_problem, vocab
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.testing.random_graphs import random_sketch
from chiplore.simulator.testing.sketch import PackSketch
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.placement import LoweringError

Status = Literal[
    "built",  # a well-formed pack whose generated baseline passes its reference on the smoke set
    "ill_formed",  # the sketch does not read as a pack: a bug of this package
    "generator_gap",  # generation_problem(spec) names what the generator does not write
    "no_valid_point",  # the space has no valid point without learnt facts
    "baseline_does_not_compile",
    "baseline_cannot_run",  # the executor cannot run it (or it would hang the device)
    "baseline_fails",  # it runs and misses the reference
    "crash",  # a Python exception (where: message)
]


@dataclass(frozen=True)
class PackBuild:
    """What building one random pack gave: its folder and sketch, and why it is not a pack if it is not."""

    seed: int
    sketch: PackSketch
    folder: Path
    status: Status
    reason: str = ""

    @property
    def built(self) -> bool:
        return self.status == "built"

    @property
    def kind(self) -> str:
        return self.sketch.kind

    @property
    def name(self) -> str:
        return self.sketch.name


def random_pack(seed: int, root: Path) -> PackBuild:
    """A random kernel pack in `root/<its name>/` (the same seed writes the same files)."""
    return build_pack(random_sketch(seed), root, seed)


def build_pack(sketch: PackSketch, root: Path, seed: int = -1) -> PackBuild:
    """The pack a sketch describes, in `root/<its name>/`, with the generator's baseline."""
    folder = sketch.write(Path(root) / sketch.name)
    try:
        sketch = _covering_its_rounding(sketch, folder)
        status, reason = _baseline(sketch, folder)
    except Exception as error:  # a finding of the campaign: recorded, counted, never raised
        status, reason = "crash", crash_line(error)
    return PackBuild(seed, sketch, folder, status, reason)


def _covering_its_rounding(sketch: PackSketch, folder: Path) -> PackSketch:
    """The sketch with an atol that covers what its numerics leave open, as docs/kernels.md asks of a
    pack's author: where an add cancels a rounded value, an ulp of it is the whole answer, and a
    contraction reads its input in bf16 (`rounding_envelope`, on the smoke and check sets). The
    manifest is rewritten when the sketch's atol is short of 1.5x what the envelope needs beyond rtol."""
    try:
        pack = read_pack(folder, "installed")
    except PackProblem:
        return sketch  # `_baseline` says why
    graph = pack.manifest.graph
    if graph is None:
        return sketch
    needed = 0.0
    for fixture_set in (SMOKE_SET, *CHECK_SETS):
        inputs = case_inputs(pack.case, fixture_set)
        expected = evaluate(graph, pack.signature, inputs)
        for name, spread in rounding_envelope(graph, pack.signature, inputs, expected).items():
            beyond = spread - sketch.rtol * np.abs(np.asarray(expected[name], np.float64))
            needed = max(needed, float(beyond.max(initial=0.0)))
    if 1.5 * needed <= sketch.atol:
        return sketch
    atol = float(f"{1.5 * needed:.2g}")
    note = (f"atol {atol} (not {sketch.atol}): rounding points and bf16 contraction inputs move an output by up "
            f"to {needed:.2g} beyond rtol on some set")  # fmt: skip
    widened = dataclasses.replace(sketch, atol=atol, notes=[*sketch.notes, note])
    (folder / MANIFEST).write_text(widened.manifest_text(), encoding="utf-8")
    return widened


def _baseline(sketch: PackSketch, folder: Path) -> tuple[Status, str]:
    try:
        pack = read_pack(folder, "installed")
    except PackProblem as problem:
        return "ill_formed", str(problem)
    spec = pack.spec
    # written for the chip the compiler checks against (a truth file's shape), as `learn` would find it
    facts = compile_facts(sketch.toolchain)
    chip = vocab.chip(facts)
    problem = generation_problem(spec, chip)
    space = generated_space(spec, chip) if problem is None else None
    if space is None:
        return "generator_gap", problem or "generated_space returned None with no problem named"
    first = next(iter(points(space, facts)), None)
    if first is None:
        return "no_valid_point", f"no valid point under {sketch.toolchain}: {space.why_empty(facts)}"
    source = space.source(first, facts, sketch.toolchain)
    (folder / BASELINE).write_text(source, encoding="utf-8")
    errors = [d for d in check(source, sketch.toolchain).diagnostics if d.is_error]  # a syntax error too
    if errors:
        where = f" (line {errors[0].span.line})" if errors[0].span is not None else ""
        return "baseline_does_not_compile", f"error[{errors[0].code}]{where}: {errors[0].message}"
    return _passes(read_pack(folder, "installed"), sketch.toolchain)


def _passes(pack: KernelPack, version: str) -> tuple[Status, str]:
    try:
        result = grade_case(pack.baseline, pack.case, version, (SMOKE_SET,))
    except (ExecutionError, IndexOutOfRange, LoweringError) as error:
        return "baseline_cannot_run", f"{type(error).__name__}: {error}"
    if not result.passed:
        worst = result.worst
        detail = f"; worst: {worst.output} off by {worst.abs_err:.4g} (tolerance {worst.tol:.4g})" if worst else ""
        return "baseline_fails", f"{result.message}{detail}"
    return "built", ""


def crash_line(error: BaseException) -> str:
    """`Type: message (at file:line in function)`, the innermost frame of chiplore's own code."""
    ours = ("chiplore", "/simulator/")
    frames = [f for f in traceback.extract_tb(error.__traceback__) if any(part in f.filename for part in ours)]
    where = ""
    if frames:
        frame = frames[-1]
        where = f" (at {'/'.join(Path(frame.filename).parts[-2:])}:{frame.lineno} in {frame.name})"
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}{where}"
