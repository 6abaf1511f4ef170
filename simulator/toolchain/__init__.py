"""The ferc toolchain of SimRNGD: versions, legality rules with coded diagnostics, and checking."""
