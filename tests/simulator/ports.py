"""Rewriting a 0.6.0 program for another toolchain (docs/simrngd.md §4.2), as a refiner would."""

from __future__ import annotations

import re


def port(text: str, version: str) -> str:
    """`lut` for `decode` in 0.5.0; `widen`/`narrow` and `allreduce_slices` in 0.7.0."""
    text = text.replace('#![toolchain = "0.6.0"]', f'#![toolchain = "{version}"]')
    if version == "0.5.0":
        return text.replace(".decode(", ".lut(")
    if version == "0.7.0":
        text = text.replace(".cast(f32)", ".widen(f32)").replace(".cast(i32)", ".widen(i32)")
        text = re.sub(r"\.cast\((bf16|f8e4m3|i8)\)", r".narrow(\1)", text)
        pattern = r"reduce_slices\((\w+), group = (\[[^\]]*\]), result = all\)"
        return re.sub(pattern, r"allreduce_slices(\1, group = \2)", text)
    return text
