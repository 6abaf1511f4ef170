"""A vendor-doc code block as a program ferc can check. A block with a kernel is a whole program. A
block of declarations alone (the docs' `layout Rows = ...;` snippet) is completed: the axes it names
are declared with the sizes the same docs declare them with, and a tiny kernel uses each layout
and type it declares, so ferc checks them (an unused declaration is never checked). The wrapper is
written for the chip the guide writes for (its cluster and slice counts and its first engine). The
info string says what the docs expect of a block: ```rust,diagnostic(E0205) draws E0205."""

from __future__ import annotations

import re

from chiplore.core.pack import DocExample
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip

FERRITE_INFOS = frozenset({"", "rust", "ferrite", "fe", "text"})
EXPECTS = re.compile(r"diagnostic\((\w+)\)")
KERNEL = re.compile(r"^\s*kernel\s+\w+\s*\(", re.M)
DECLARATION = re.compile(r"^\s*(layout|type|fn|axes!)\b", re.M)
LAYOUT = re.compile(r"^\s*layout\s+(\w+)\s*=", re.M)
TYPE = re.compile(r"^\s*type\s+(\w+)\s*=\s*(dm|trf|vrf)<", re.M)
AXES_BLOCK = re.compile(r"axes!\s*\{([^}]*)\}")
AXIS_SIZE = re.compile(r"\b([A-Z]\w*)\s*=\s*(\d+)")
AXIS_USE = re.compile(r"\b([A-Z]\w*)\s*(?=[/%\],]|\s*[/%])")
HEADER = '#![toolchain = "{version}"]\n'
FALLBACK_SIZE = 4096  # an axis the docs never size: big enough for any cluster and slice split


def complete(info: str, body: str, version: str, context: str, chip: Chip = DOCUMENTED_CHIP) -> DocExample | None:
    words = [w.strip() for w in info.split(",")]
    if words[0].lower() not in FERRITE_INFOS:
        return None
    expects = next((m.group(1) for w in words if (m := EXPECTS.fullmatch(w))), None)
    if KERNEL.search(body):
        return DocExample(source=body if body.endswith("\n") else body + "\n", expects=expects)
    if not DECLARATION.search(body):
        return None  # prose in a text block, a statement without its kernel: nothing to check on its own
    return DocExample(source=_wrap(body, version, context, chip), expects=expects)


def _wrap(body: str, version: str, context: str, chip: Chip) -> str:
    declared = {name for block in AXES_BLOCK.findall(body) for name, _ in AXIS_SIZE.findall(block)}
    names = set(LAYOUT.findall(body)) | {name for name, _ in TYPE.findall(body)}
    wanted = sorted({axis for axis in AXIS_USE.findall(body) if axis not in declared and axis not in names})
    sizes = {name: int(size) for block in AXES_BLOCK.findall(context) for name, size in AXIS_SIZE.findall(block)}
    axes = [f"{axis} = {sizes.get(axis, FALLBACK_SIZE)}" for axis in wanted] + ["Z_ = 256"]
    uses = [f"    let _l{i}: dm<bf16>{{..{name}, elem: [1 # 8]}} = dm::zeros();\n"
            for i, name in enumerate(LAYOUT.findall(body))]  # fmt: skip
    uses += [f"    let _t{i}: {name} = {space}::zeros();\n" if space == "dm" else ""
             for i, (name, space) in enumerate(TYPE.findall(body))]  # fmt: skip
    header = "" if "#![toolchain" in body else HEADER.format(version=version)
    return (
        f"{header}axes! {{ {', '.join(axes)} }}\n{body.rstrip()}\n\n"
        "kernel fragment(x_: &hbm<bf16>[Z_], y_: &mut hbm<bf16>[Z_]) {\n" + "".join(uses)
        + f"    let a_: dm<bf16>{{cluster: [1 # {chip.clusters}], slice: [1 # {chip.slices}], elem: [Z_]}}"
        f" = x_.dma(engines = [{chip.engine(0, 0)}]);\n"
        f"    a_.dma_into(y_, engines = [{chip.engine(0, 0)}]);\n}}\n"
    )  # fmt: skip
