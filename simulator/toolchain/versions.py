"""Toolchain versions 0.5.0, 0.6.0 and 0.7.0 (docs/simrngd.md §4)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from chiplore.simulator.toolchain.rules import RULES, VERSIONS, Level

DEFAULT_VERSION = "0.6.0"  # the harness default when a program names none (3.1)

# Constructs whose availability depends on the version, with how each is written.
CONSTRUCTS: dict[str, str] = {
    "lut": "'.lut(D)'",
    "decode": "'.decode(D)'",
    "cast": "'.cast(D)'",
    "widen": "'.widen(D)'",
    "narrow": "'.narrow(D)'",
    "at_addr": "'dm::at_addr'",
    "dma_at": "'dma(at = ...)'",
    "dma_order": "'dma(order = ...)'",
    "result_all": "'reduce_slices(..., result = all)'",
    "allreduce_slices": "'allreduce_slices(op, group)'",
    "reduce_clusters": "'reduce_clusters(op)'",
    "buffers": "'buffers: N'",
}
ALL_CONSTRUCTS = frozenset(CONSTRUCTS)


class VersionSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    vocabulary: frozenset[str]  # version-dependent constructs this version accepts
    constructs_removed: frozenset[str]  # relative to the previous version
    constructs_added: frozenset[str]
    replacements: dict[str, str]  # construct -> what to write instead, for E0103
    # ChipTruth fields this version changes, each by a factor of the chip's own value (so a chip file's
    # chained start-up of 10 cycles becomes 2.6 under 0.7.0, not the default chip's 90)
    truth_scales: dict[str, float]
    auto_engines: int  # engines per destination cluster that `engines = auto` uses (P13; unchanged in 3.4)
    docs_dir: str
    changelog: str

    @property
    def severity(self) -> dict[str, Level | None]:
        """Rule number -> severity letter in this version (None: not checked)."""
        return {rule.number: rule.level(self.version) for rule in RULES}

    def docs_path(self) -> Path:
        return Path(str(resources.files("chiplore.simulator"))) / self.docs_dir


def _spec(
    version: str,
    vocabulary: set[str],
    previous: set[str] | None,
    replacements: dict[str, str],
    truth_scales: dict[str, float],
    changelog: str,
    auto_engines: int = 1,
) -> VersionSpec:
    before = previous if previous is not None else vocabulary
    return VersionSpec(
        version=version,
        vocabulary=frozenset(vocabulary),
        constructs_removed=frozenset(before - vocabulary),
        constructs_added=frozenset(vocabulary - before),
        replacements=replacements,
        truth_scales=truth_scales,
        auto_engines=auto_engines,
        docs_dir=f"docs/{version}",
        changelog=changelog,
    )


_V050 = {"lut", "cast", "at_addr", "dma_at", "result_all"}
_V060 = {"decode", "cast", "dma_order", "result_all"}
_V070 = {"decode", "widen", "narrow", "dma_order", "allreduce_slices", "reduce_clusters", "buffers"}

SPECS: dict[str, VersionSpec] = {
    "0.5.0": _spec(
        "0.5.0",
        _V050,
        None,
        {
            "decode": "use '.lut(D)' (renamed '.decode' in 0.6.0)",
            "dma_order": "0.5.0 streams in the default order only",
            "widen": "use '.cast(D)'",
            "narrow": "use '.cast(D)'",
            "allreduce_slices": "use 'reduce_slices(op, group, result = all)'",
            "reduce_clusters": "move the partial results between clusters with a DMA",
            "buffers": "use '#[pipeline(depth = N)]' on the loop",
        },
        {},
        "Ferrite toolchain 0.5.0: first public release.",
    ),
    "0.6.0": _spec(
        "0.6.0",
        _V060,
        _V050,
        {
            "lut": "use '.decode(D)'",
            "at_addr": "the allocator places every tensor; remove the raw placement",
            "dma_at": "the allocator places every tensor; remove 'at ='",
            "widen": "use '.cast(D)' (split into widen/narrow in 0.7.0)",
            "narrow": "use '.cast(D)' (split into widen/narrow in 0.7.0)",
            "allreduce_slices": "use 'reduce_slices(op, group, result = all)'",
            "reduce_clusters": "move the partial results between clusters with a DMA",
            "buffers": "use '#[pipeline(depth = N)]' on the loop",
        },
        {},
        "Ferrite toolchain 0.6.0: lut renamed decode, raw placement removed, dma order, mixed f8 x bf16.",
    ),
    "0.7.0": _spec(
        "0.7.0",
        _V070,
        _V060,
        {
            "lut": "use '.decode(D)'",
            "cast": "use '.widen(D)' (fetch adapter, before the vector/contraction stage) or "
            "'.narrow(D)' (cast engine, after it)",
            "at_addr": "the allocator places every tensor; remove the raw placement",
            "dma_at": "the allocator places every tensor; remove 'at ='",
            "result_all": "use 'allreduce_slices(op, group)'",
        },
        # P03 chained DMA startup and P15 usable DM per slice change in 0.7.0 (docs/simrngd.md §2.3): on the
        # default chip 340 -> 90 cycles and 480 -> 464 KB
        {"dma_chain_startup": 90 / 340, "dm_usable_per_slice": 464 / 480},
        "Ferrite toolchain 0.7.0: cast split into widen/narrow, allreduce_slices, reduce_clusters, f4 contraction.",
    ),
}
assert tuple(SPECS) == VERSIONS


def spec(version: str) -> VersionSpec:
    try:
        return SPECS[version]
    except KeyError:
        raise ValueError(f"unknown toolchain {version!r}; known: {', '.join(SPECS)}") from None
