"""The vendor material of each toolchain version (docs/simrngd.md §2.6, §12.3): page templates in `_src/`, the
fact table in `facts.py`, the changelogs, and the pages rendered for the default chip in
`<version>/` (the toolchain renders them again for a chip of other values)."""
