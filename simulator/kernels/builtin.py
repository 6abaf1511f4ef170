"""The kernel packs SimRNGD ships (`simulator/kernels/packs/<name>/`) and which of them are its
built-in kernels: those `packs/harness.toml` names (the Gemma 4 decode layer), in that order. The
folder's other packs ship as examples of other shapes, offered once added (`chiplore kernel add`,
or CHIPLORE_KERNELS).

Shipped packs are validated by the test suite (tests/simulator/test_kernel_packs.py), so loading
them only reads them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from chiplore.simulator.kernels.manifest import MANIFEST, PackProblem
from chiplore.simulator.kernels.pack import KernelPack, read_pack
from chiplore.simulator.toolchain.harness import BUILTIN_PACKS, builtin_kernels


@cache
def builtin_packs() -> dict[str, KernelPack]:
    """The built-in kernels' packs by kernel name, in offering order."""
    packs: dict[str, KernelPack] = {}
    for name in builtin_kernels():
        try:
            pack = read_pack(BUILTIN_PACKS / name, "built-in")
        except PackProblem as problem:  # a broken shipped pack is our bug: say which
            raise PackProblem(f"built-in kernel pack {name}: {problem}") from None
        if pack.name != name:
            raise PackProblem(f"built-in kernel pack {name}: its folder must be named after its kernel {pack.name}")
        packs[name] = pack
    return packs


def builtin_pack(name: str) -> KernelPack:
    """One built-in kernel's pack (a KeyError naming the built-in kernels for any other name)."""
    packs = builtin_packs()
    if name not in packs:
        raise KeyError(f"no built-in kernel {name!r}; built-in: {', '.join(packs)}")
    return packs[name]


def shipped_folders() -> list[Path]:
    """Every pack folder SimRNGD ships, built-in or not."""
    return sorted(p for p in BUILTIN_PACKS.iterdir() if (p / MANIFEST).is_file())


def is_shipped(folder: Path) -> bool:
    """Whether `folder` is one of the packs SimRNGD ships (validated by its tests, not on load)."""
    return folder.resolve().parent == BUILTIN_PACKS.resolve()
