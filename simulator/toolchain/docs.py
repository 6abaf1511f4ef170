"""Render the vendor docs of a toolchain version (docs/simrngd.md §2.6, §12.3) for a chip.

Pages are Jinja templates (`simulator/docs/_src/*.md.j2`); every statement about a hidden
parameter goes through `fact(id)`, which writes what the fact table says this version's docs say:
the true statement (from the chip's values), a wrong or vague one, or nothing. The docs live with
the toolchain because, like a compiler's manual, they are written against the chip it targets.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

import jinja2

from chiplore.simulator._truth import ChipShape, ChipTruth, load_truth, truth_key
from chiplore.simulator.docs.facts import FACTS, VERSIONS, Fact
from chiplore.simulator.shape import Chip
from chiplore.simulator.toolchain.rule_examples import example
from chiplore.simulator.toolchain.rules import RULES, SEVERITY_NAMES

SOURCE = Path(str(resources.files("chiplore.simulator"))) / "docs" / "_src"
PAGES = (
    "index.md", "ferrite-basics.md", "layouts.md", "dma.md", "memory-performance.md", "fetch-and-adapters.md",
    "contraction.md", "vector-engine.md", "switch-and-reduce.md", "register-files.md", "scheduling.md",
    "capacity.md", "diagnostics.md", "device-and-measurement.md", "tutorial-gemv.md",
)  # fmt: skip


def chip_values(truth: ChipTruth) -> dict[str, object]:
    """The chip's values by name, plus the derived ones the facts quote."""
    values: dict[str, object] = truth.model_dump()
    values |= {
        "roof": truth.roof,
        "dm2dm_rate": truth.dm2dm_phase_bw / 2,  # read then write: each byte crosses twice
        "dm_usable_kb": truth.dm_usable_per_slice / 1024,
        "noise_sigma_pct": truth.noise_sigma * 100,
    }
    return values


def fact_text(fact: Fact, version: str, values: dict[str, object]) -> str:
    """What the version's docs say about one fact ("" when they omit it)."""
    state = fact.state(version)
    if state == "S":
        return fact.true.format(**values)
    if state == "O":
        return ""
    return state.split(":", 1)[1]


def render_docs(version: str, truth: ChipTruth | None = None) -> dict[str, str]:
    """Every page of one version, by file name, plus CHANGES.md."""
    chip = truth if truth is not None else load_truth(version)
    return dict(_render(version, truth_key(chip), chip))


@lru_cache(maxsize=16)
def _render(version: str, key: str, chip: ChipTruth) -> tuple[tuple[str, str], ...]:
    if version not in VERSIONS:
        raise ValueError(f"no docs for toolchain {version!r}; versions are {', '.join(VERSIONS)}")
    values = chip_values(chip)
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(SOURCE), undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    )  # fmt: skip
    environment.globals |= _vocabulary(version) | {
        "version": version,
        "fact": lambda fact_id: fact_text(FACTS[fact_id], version, values),
        "since": lambda first: VERSIONS.index(version) >= VERSIONS.index(first),
        "diagnostic_codes": lambda: _codes(version, chip.docs_shape or chip.shape),
        "shape": shape_values(chip.docs_shape or chip.shape),
    }
    pages = [(name, _tidy(environment.get_template(f"{name}.j2").render())) for name in PAGES]
    changes = (SOURCE / "changes" / f"{version}.md").read_text()
    return (*pages, ("CHANGES.md", changes))


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight")


def _count(n: int, noun: str) -> str:
    """`2, "cluster"` -> "two clusters": the overview spells small counts out."""
    return f"{_WORDS[n] if n < len(_WORDS) else n} {noun}{'' if n == 1 else 's'}"


def _engines(first: int, count: int) -> str:
    return f"{first}" if count == 1 else f"{first}-{first + count - 1}"


def shape_values(shape: ChipShape) -> dict[str, object]:
    """The shape as the docs state it (the chip's, or what a truth file's `docs_shape` claims)."""
    per = shape.engines_per_cluster
    ranges = [_engines(c * per, per) for c in range(shape.clusters)]
    serves = [f"engine{'s' if per > 1 else ''} {ranges[0]} serve{'' if per > 1 else 's'} cluster 0"]
    serves += [f"engine{'s' if per > 1 else ''} {r} cluster {c}" for c, r in enumerate(ranges) if c]
    sites = [
        f"{r} {'sit' + ('s' if per == 1 else '') + ' ' if c == 0 else ''}in cluster {c}" for c, r in enumerate(ranges)
    ]
    sites_text = sites[0] if len(sites) == 1 else ", ".join(sites[:-1]) + " and " + sites[-1]
    chip = Chip.named(shape.model_dump())
    # the examples' engine lists: engine 0 then the engines beside it, each list distinct engines the
    # chip has (a chip of one engine per cluster has no engines 2 and 3 to store with)
    order = list(dict.fromkeys([chip.engine(0, 0), *chip.beside_first(chip.engines)]))
    return shape.model_dump() | {
        "clusters_text": _count(shape.clusters, "cluster").capitalize(),
        "engines_text": _count(per, "DMA engine"),
        "lanes_text": f"{shape.lanes} lane{'s' if shape.lanes != 1 else ''}",
        "engines_word": _count(per, "engine"),
        "engine_serves": ", ".join(serves),
        "engine_sites": f"Engine{'s' if per > 1 else ''} {sites_text}.",
        "trf_kb": f"{shape.trf_bytes / 1024:g}",
        "trf_lane_kb": f"{shape.trf_lane_bytes / 1024:g}",
        "vrf_kb": f"{shape.vrf_bytes / 1024:g}",
        "load_engines": _listed(order[:2]),
        "store_engines": _listed(order[2:4] if len(order) >= 4 else order[-2:]),
        "second_engine": _listed(chip.beside_first(1)),
        "cluster_engines": _listed(chip.local(0)),
        "gemv_rows": 8 * shape.slices,  # the tutorial's matrix: eight rows on each slice of cluster 0
        # its contraction's outputs a step: a slice's eight rows (four a chunk), or as many as its lanes
        "fold": min(8, shape.lanes),
        "chunk_fold": min(4, shape.lanes),
    }


def _listed(engines: list[int]) -> str:
    return "[" + ", ".join(map(str, engines)) + "]"


def _vocabulary(version: str) -> dict[str, str]:
    """The construct names a version's examples use."""
    return {
        "lut": "lut" if version == "0.5.0" else "decode",
        "up": "widen" if version == "0.7.0" else "cast",
        "down": "narrow" if version == "0.7.0" else "cast",
        "buffers2": ", buffers: 2" if version == "0.7.0" else "",  # a loop-local tensor's rotation
    }


def _codes(version: str, shape: ChipShape) -> list[dict[str, str]]:
    """Each rule checked in this version: its code, severity, message, what it checks, the fix, and
    a breaking and a fixed example program (the ones the rule tests run, written for the shape the
    docs state)."""
    rows = []
    for rule in RULES:
        code = rule.code(version)
        if code is None:
            continue
        breaking, fixed = example(rule.number, version, shape)
        rows.append({
            "code": code, "severity": SEVERITY_NAMES[code[0]], "message": rule.template, "checks": rule.predicate,
            "fix": rule.fix, "breaking": breaking.rstrip(), "fixed": fixed.rstrip(),
        })  # fmt: skip
    return rows


def _tidy(text: str) -> str:
    """Omitted facts leave empty paragraphs: keep at most one blank line in a row."""
    lines: list[str] = []
    for line in text.splitlines():
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"


def write_docs(root: Path | None = None) -> list[Path]:
    """Render every version for the default chip into `simulator/docs/<version>/` (the shipped copy)."""
    base = root if root is not None else SOURCE.parent
    written = []
    for version in VERSIONS:
        folder = base / version
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in render_docs(version, load_truth(version, path="")).items():
            (folder / name).write_text(text)
            written.append(folder / name)
    return written


if __name__ == "__main__":  # python -m chiplore.simulator.toolchain.docs: refresh the shipped pages
    for path in write_docs():
        print(path)
