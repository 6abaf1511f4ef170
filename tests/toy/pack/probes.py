"""The toy chip's compile probes (their diagnostics become legality rules) and the capability the
rules decide. Every probe is a tiny Toyl program; the multiply is written in whichever name the
construct probes found available (`mul`, or `mac` from 2.0 on)."""

from __future__ import annotations

from collections.abc import Mapping

from chiplore.core.pack import Capability
from chiplore.core.probes import ConstructProbe, LimitProbe, PairProbe, RuleProbes, Vocabulary
from chiplore.core.rules import Stated

MAC = "vocab.mac"  # 1: the toolchain multiplies with `mac`; 0: a rule says `mac` is not available (write `mul`)
CAPABILITIES = (Capability(MAC, "construct.mac"),)


def program(version: str, body: str, rows: int = 8) -> str:
    return f"#toolchain {version}\nkernel probe\nparam w {rows}x256\nparam x 256\nout y {rows}\n{body}"


def multiply(version: str, op: str) -> str:
    return program(version, f"load w\nload x\n{op} y w x\nstore y\n")


def _rows(version: str, names: Vocabulary, rows: int) -> str:
    return f"#toolchain {version}\nkernel probe\nparam w {rows}x256\nload w chunks=1 lanes=1\n"


def _lanes(version: str, names: Vocabulary, lanes: int) -> str:
    return f"#toolchain {version}\nkernel probe\nparam w {4 * lanes}x256\nload w chunks=1 lanes={lanes}\n"


CONSTRUCTS = (
    ConstructProbe("mul", lambda v, n: multiply(v, "mul")),
    ConstructProbe("mac", lambda v, n: multiply(v, "mac")),
)
PAIRS = (
    PairProbe("store.after_compute", "a value is stored only once it is computed",
              lambda v, n: program(v, f"load w\nload x\nstore y\n{n['multiply']} y w x\n"),
              lambda v, n: program(v, f"load w\nload x\n{n['multiply']} y w x\nstore y\n"),
              Stated(op="defined_before_use", value=True)),
    PairProbe("load.split", "chunks x lanes divide the rows of a load",
              lambda v, n: program(v, f"load w chunks=3\nload x\n{n['multiply']} y w x\nstore y\n"),
              lambda v, n: program(v, f"load w chunks=4\nload x\n{n['multiply']} y w x\nstore y\n"),
              Stated(op="divides", value="rows")),
)  # fmt: skip
LIMITS = (
    LimitProbe("load.bytes_per_lane", "the most one lane's buffer holds of a chunk", _rows, 1, 1024, step=1024),
    LimitProbe("load.lanes", "the most lanes one load may use", _lanes, 1, 64),
)


def vocabulary(available: Mapping[str, bool], found: Mapping[str, float]) -> Vocabulary:
    """The multiply's name; the toy chip has one shape, so `found` is empty."""
    return {"multiply": "mac" if available.get("mac") else "mul"}


RULE_PROBES = RuleProbes(constructs=CONSTRUCTS, pairs=PAIRS, limits=LIMITS, vocabulary=vocabulary)
