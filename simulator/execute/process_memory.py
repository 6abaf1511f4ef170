"""How the executor's process gets memory. The executor makes weight-sized temporaries by the
hundred, and on Linux each fresh one costs page faults to zero its pages: two settings keep that off
the host test's and the grader's time. Both change where memory comes from, never a value, and
each stands aside where the user set its own switch."""

from __future__ import annotations

import ctypes
import os
from types import ModuleType

import numpy as np

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Below this, freed blocks stay in the heap for the next temporary: past every array the dense
# executor allows (20 M f32 values = 80 MB) and the FFN baseline's peak (about 1.2 GB of RSS either way).
_KEEP_BYTES = 1 << 30
_GLIBC_SWITCHES = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def without_huge_pages() -> None:
    """numpy asks the kernel for transparent huge pages on every array of 4 MB or more (madvise), and
    zeroing a fresh huge page for each temporary took a third of the FFN baseline's host test
    (2.9 -> 2.0 s). numpy's documented switch, unless the user set NUMPY_MADVISE_HUGEPAGE."""
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        numpy_multiarray()._set_madvise_hugepage(False)


def numpy_multiarray() -> ModuleType:
    """numpy's multiarray module, which holds the huge-page switch (numpy 2 / numpy 1.26)."""
    core = getattr(np, "_core", None) or np.core
    return core.multiarray


def keep_freed_memory() -> bool:
    """glibc serves a block of 128 KB or more with its own mmap and unmaps it when freed (its dynamic
    threshold rises to 32 MB at most), then trims the heap's top above twice that: every weight-sized
    temporary came back as fresh pages to fault in and zero. Raising both thresholds to 1 GB lets
    freed arrays be reused (FFN host test 1.76 -> 1.58 s, the executor warm 1.50 -> 1.22 s here). Only
    where mallopt exists (glibc) and no MALLOC_*/GLIBC_TUNABLES setting of the user's says otherwise;
    True when both were set."""
    if any(name in os.environ for name in _GLIBC_SWITCHES):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl without it): the allocator's own way
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _KEEP_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES))
