"""SimRNGD's design families, one per Gemma kernel: the builtin proposers' design spaces."""

from simulator.pack.space.family import Family
from simulator.pack.space.ffn import FeedForward
from simulator.pack.space.o_proj import OutputProjection
from simulator.pack.space.qkv import QKVProjection

FAMILIES: dict[str, Family] = {family.kernel: family for family in (QKVProjection(), OutputProjection(), FeedForward())}

__all__ = ["FAMILIES", "Family"]
