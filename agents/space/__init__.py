"""Design families, one per kernel the loop knows how to write (the space generator)."""

from agents.space.family import Family, Knob, Params, Stream, Workload
from agents.space.ffn import FeedForward
from agents.space.o_proj import OutputProjection
from agents.space.qkv import QKVProjection

FAMILIES: dict[str, Family] = {family.kernel: family for family in (QKVProjection(), OutputProjection(), FeedForward())}

__all__ = ["FAMILIES", "Family", "Knob", "Params", "Stream", "Workload"]
