"""Kernels as data: kernel packs (docs/kernels.md).

A pack is a folder holding `kernel.toml` (name, label, description, toolchain, tolerances, how each
input is drawn, which outputs are graded, and the op graph), the official starting program
`baseline.fe` and, optionally, `reference.py` (numpy: inputs to outputs; without it the op graph's
reference grades, chiplore.simulator.execute.graph_reference). SimRNGD ships some under `packs/` and
loads more from the user's paths and its data dir: `manifest` reads kernel.toml, `pack` a folder,
`validate` runs the compiler and the executor on it, `builtin` and `registry` say which packs a
target offers.
"""
