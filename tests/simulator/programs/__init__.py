"""Ferrite programs the tests read: the built-in kernels' official baselines, which live in their packs
(simulator/kernels/packs/<kernel>/baseline.fe), and the test-only programs beside this module:
`examples/` (optimised designs of the built-in kernels) and `bugs/` (one known bug each,
docs/simrngd.md §9.5). A program is named `<short>_<what>`, its short name one of SHORT's keys."""

from __future__ import annotations

from pathlib import Path

from chiplore.simulator.kernels.manifest import BASELINE
from chiplore.simulator.toolchain.harness import BUILTIN_PACKS

PROGRAMS = Path(__file__).resolve().parent
EXAMPLES = PROGRAMS / "examples"
BUGS = PROGRAMS / "bugs"
SHORT = {"qkv": "sliding_project_qkv", "o": "sliding_attention_output", "ffn": "decoder_feedforward"}


def baseline_path(kernel: str) -> Path:
    """A shipped kernel's official baseline, by kernel name or short name (`o`, `qkv`, `ffn`)."""
    return BUILTIN_PACKS / SHORT.get(kernel, kernel) / BASELINE


def baseline(kernel: str) -> str:
    return baseline_path(kernel).read_text()


def program_path(name: str) -> Path:
    """A program by its file stem: `o_baseline` (the pack's baseline), `o_opt` (examples/) or a bug."""
    short, _, what = name.partition("_")
    if what == "baseline":
        return baseline_path(short)
    found = [folder / f"{name}.fe" for folder in (EXAMPLES, BUGS) if (folder / f"{name}.fe").is_file()]
    if not found:
        raise FileNotFoundError(f"no test program {name} (examples/, bugs/ or a built-in baseline)")
    return found[0]


def program_text(name: str) -> str:
    return program_path(name).read_text()


def baselines() -> dict[str, str]:
    """The built-in kernels' baselines by stem (`o_baseline`, ...)."""
    return {f"{short}_baseline": baseline(kernel) for short, kernel in SHORT.items()}


def examples() -> dict[str, str]:
    """The optimised examples by stem (`o_opt`, ...)."""
    return {path.stem: path.read_text() for path in sorted(EXAMPLES.glob("*.fe"))}


def all_programs() -> list[Path]:
    """Every program here and every shipped pack's baseline (built-in or not)."""
    return sorted(BUILTIN_PACKS.glob(f"*/{BASELINE}")) + sorted(EXAMPLES.glob("*.fe")) + sorted(BUGS.glob("*.fe"))


def label(path: Path) -> str:
    """A test id for a program: its folder and file (`decoder_feedforward/baseline.fe`, `bugs/o_missing_cast.fe`)."""
    return f"{path.parent.name}/{path.name}"
