"""SimRNGD, the default target: an RNGD-like NPU with its Ferrite DSL, toolchain and noisy device.

docs/simrngd.md describes it. What is here is the target's identity and its toolchain
versions (docs/simrngd.md §4.1), which `chiplore init` registers in the graph.
"""

NAME = "simrngd"
DESCRIPTION = "SimRNGD: a simulated RNGD-like NPU (2 clusters x 256 slices, Ferrite DSL, ferc toolchain)"
TOOLCHAIN_VERSIONS = ("0.5.0", "0.6.0", "0.7.0")
# The harness default at project start (docs/simrngd.md §4.1); 0.7.0 arrives as an upgrade.
DEFAULT_TOOLCHAIN = "0.6.0"
