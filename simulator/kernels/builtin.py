"""The kernel packs SimRNGD ships (`simulator/kernels/packs/<name>/`): the three kernels of a Gemma 4
decode layer first, in the order the harness has always run them, then the others by name.

Built-in packs are validated by the test suite (tests/simulator/test_kernel_packs.py), so loading
them only reads them.
"""

from __future__ import annotations

from functools import cache

from simulator.kernels.manifest import PackProblem
from simulator.kernels.pack import KernelPack, read_pack
from simulator.toolchain.harness import BUILTIN_PACKS, builtin_baselines

GEMMA_LAYER = ("sliding_project_qkv", "sliding_attention_output", "decoder_feedforward")


@cache
def builtin_packs() -> dict[str, KernelPack]:
    """Every built-in pack by kernel name, in offering order."""
    names = sorted(builtin_baselines(), key=lambda name: (name not in GEMMA_LAYER, GEMMA_LAYER.index(name)
                                                          if name in GEMMA_LAYER else 0, name))  # fmt: skip
    packs: dict[str, KernelPack] = {}
    for name in names:
        try:
            pack = read_pack(BUILTIN_PACKS / name, "built-in")
        except PackProblem as problem:  # a broken shipped pack is our bug: say which
            raise PackProblem(f"built-in kernel pack {name}: {problem}") from None
        if pack.name != name:
            raise PackProblem(f"built-in kernel pack {name}: its folder must be named after its kernel {pack.name}")
        packs[name] = pack
    return packs


def builtin_pack(name: str) -> KernelPack:
    """One built-in pack (a KeyError naming the built-in kernels for any other name)."""
    packs = builtin_packs()
    if name not in packs:
        raise KeyError(f"no built-in kernel {name!r}; built-in: {', '.join(packs)}")
    return packs[name]
