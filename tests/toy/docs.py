"""The toy chip's vendor docs, per toolchain version. Like real vendor docs they are mostly right:
the lane's rate they state (32 bytes per cycle) is not what the device does."""

from __future__ import annotations

from chiplore.core.target import DocPage

OVERVIEW = """# The toy chip

The toy chip runs at 1 GHz. Weights stream from memory to a small compute array through DMA lanes.

## Programs

Programs are written in Toyl, one statement per line; see language.md. A program must start with its
`#toolchain` line, and a program written for one toolchain is refused by another.
"""

DMA = """# DMA

A `load` moves one input onto the chip in `chunks` DMA commands, one after another; each chunk is split
evenly over `lanes` lanes.

Every DMA command pays a start-up of about {start} cycles before its first byte moves.

One lane streams 32 bytes per cycle.

The chip's weight ingress tops out at about 64 bytes per cycle, whatever the number of lanes.

A lane's buffer holds at most {buffer} KB of one chunk.

A load may use at most four lanes.
"""

LANGUAGE = """# Toyl

Each line is one statement: `kernel NAME`, `param NAME SHAPE`, `out NAME SHAPE`,
`load NAME chunks=C lanes=L`, `{multiply} OUT MATRIX VECTOR`, `scale OUT IN FACTOR` and `store NAME`.

A value must be loaded or computed before it is used, and every output must be stored.

```
#toolchain {version}
kernel gemv
param w 256x256
param x 256
out y 256
load w chunks=2 lanes=4
load x
{multiply} y w x
store y
```
"""

CHANGES = """# Changes in 2.0

- `mul` is now `mac`: programs that still say `mul` are refused.
- Every DMA command's start-up is about 320 cycles, half what it was.
- A lane's buffer holds at most 32 KB of one chunk, down from 64 KB.
"""

PAGES = {
    "1.0": {"overview.md": OVERVIEW, "dma.md": DMA.format(start=640, buffer=64),
            "language.md": LANGUAGE.format(multiply="mul", version="1.0")},
    "2.0": {"overview.md": OVERVIEW, "dma.md": DMA.format(start=320, buffer=32),
            "language.md": LANGUAGE.format(multiply="mac", version="2.0"), "CHANGES.md": CHANGES},
}  # fmt: skip


def pages(version: str) -> list[DocPage]:
    if version not in PAGES:
        raise ValueError(f"unknown toolchain {version!r}; the toy chip has {', '.join(PAGES)}")
    return [DocPage(version=version, path=path, title=text.splitlines()[0].lstrip("# "), text=text)
            for path, text in PAGES[version].items()]  # fmt: skip
