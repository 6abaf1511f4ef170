"""Ferrite for chiplore's DSL summary: the constructs, and how doc code becomes checked programs."""

from chiplore.simulator.pack.language.guide import FerriteGuide

__all__ = ["FerriteGuide"]
