"""The Toyl toolchain versions: what each compiler accepts. Public facts of the toolchain (the
docs state them, not always rightly); the pack still learns them by compiling probes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Toolchain:
    version: str
    multiply: str  # the matrix-vector statement's keyword: `mul` until 2.0 renamed it `mac`
    lane_buffer_bytes: int  # the most one lane's buffer holds of one load chunk
    max_lanes: int


VERSIONS: dict[str, Toolchain] = {
    "1.0": Toolchain("1.0", multiply="mul", lane_buffer_bytes=64 * 1024, max_lanes=4),
    "2.0": Toolchain("2.0", multiply="mac", lane_buffer_bytes=32 * 1024, max_lanes=4),
}
DEFAULT_VERSION = "1.0"
MULTIPLIES = frozenset(v.multiply for v in VERSIONS.values())
