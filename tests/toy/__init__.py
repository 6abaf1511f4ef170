"""A toy accelerator written from scratch to prove chiplore's target seam: a second chip that plugs
in behind `Target` and `TargetPack` (chiplore.core) with no change to `agents/` or `ingest/`.

The chip side: Toyl, a line-based language (`toyl`), its versioned compiler with coded diagnostics
(`compiler`, `versions`), vendor docs (`docs`), one kernel (`kernel`), a numpy executor (`execute`),
a hidden truth (`truth`) behind a noisy simulated device (`timing`, `device`) and two
microbenchmarks (`bench`), all behind `target.ToyChip`. The pack side (`pack`) is what the chip's
team writes for chiplore and reads none of the chip's internals. docs/targets.md walks through it.

    PYTHONPATH=. CHIPLORE_TARGET=tests.toy:from_settings chiplore status   (from the repository root)
"""

from tests.toy.target import ToyChip, from_settings

__all__ = ["ToyChip", "from_settings"]
