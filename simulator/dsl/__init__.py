"""Ferrite, the DSL of SimRNGD: grammar, IR, parser and canonical printer (docs/simrngd.md §3)."""
