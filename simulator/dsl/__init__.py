"""Ferrite, the DSL of SimRNGD: grammar, IR, parser and canonical printer (SIMULATOR.md 2)."""
