"""Every limit the docs state, and the coded rule that enforces it: a program right at the limit
compiles without that code, one just past it gets it. Where the docs state a limit wrongly on purpose
(the fact table's W entries: the chip must be measured), the compiler enforces the true value and
`stated` says what the page claims instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.simulator.execute.difftest.program import VERSIONS
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.docs import render_docs

TEMPLATE = """#![toolchain = "{version}"]
axes! {{ H = 64, L = {size} }}
layout One = {{ cluster: [1 # 2], slice: [1 # 256] }};
kernel k(x: &hbm<bf16>[H], w: &hbm<bf16>[L], y: &mut hbm<bf16>[H]) {{
    let a: dm<bf16>{{..One, elem: [H]}} = x.dma(engines = [0]);
{body}    a.dma_into(y, engines = [0]);
}}
"""
WIDEN = {"0.5.0": "cast", "0.6.0": "cast", "0.7.0": "widen"}


@dataclass(frozen=True)
class Limit:
    """A limit the docs state (`phrase` appears on `page`), the code that enforces it, and a body
    (of TEMPLATE) at a value: `at` and `past` are the values just inside and just outside it."""

    name: str
    page: str
    phrase: str
    code: str
    body: Callable[[str, int], tuple[str, int]]  # (version, value) -> (kernel body, the axis L's size)
    at: int
    past: int
    stated: str = ""  # what the docs say instead, where they state the limit wrongly on purpose

    def program(self, version: str, value: int) -> str:
        body, size = self.body(version, value)
        return TEMPLATE.format(version=version, size=size, body=body)


def _tensor(kind: str, dtype: str, lanes: str = "") -> Callable[[str, int], tuple[str, int]]:
    return lambda v, n: (f"    let t: {kind}<{dtype}>{{..One, {lanes}elem: [L]}} = dm::empty();\n", n)


def _packet(v: str, n: int) -> tuple[str, int]:
    return f"    let t: dm<bf16>{{..One, elem: [L]}} = w.dma(engines = [0], packet = {n});\n", 4096


def _engine(v: str, n: int) -> tuple[str, int]:
    return f"    let t: dm<bf16>{{..One, elem: [L]}} = w.dma(engines = [{n}]);\n", 64


def _lanes(v: str, n: int) -> tuple[str, int]:
    return f"    let t: trf<bf16>{{..One, lane: [1 # {n}], elem: [L]}} = dm::empty();\n", 64


def _slices(v: str, n: int) -> tuple[str, int]:
    return f"    let t: dm<bf16>{{cluster: [1 # 2], slice: [1 # {n}], elem: [L]}} = w.dma(engines = [0]);\n", 64


def _contract_packet(v: str, n: int) -> tuple[str, int]:
    return (
        "    let xt: trf<bf16>{..One, lane: [1], elem: [L]} = sub(t).fetch(time = [L / 16], packet = [L % 16])"
        ".to_trf();\n"
        f"    let o: dm<f32>{{..One, elem: [1 # 8]}} = main(t).fetch(time = [L / {n}], packet = [L % {n}])"
        ".contract(trf = xt, reduce = [L], fold = [1 # 8]).commit();\n",
        256,
    )


def _chain(v: str, n: int) -> tuple[str, int]:
    ops = ", ".join(["add(1.0)"] * n)
    return (
        f"    let o: dm<f32>{{..One, elem: [L]}} = main(t).fetch(time = [L / 8], packet = [L % 8]).{WIDEN[v]}(f32)"
        f".vector({ops}).commit();\n",
        64,
    )


def _steps(v: str, n: int) -> tuple[str, int]:
    """n iterations of one statement: the loop, n iterations and n statements, and the kernel's own two."""
    statement = "        let u: dm<bf16>{..One, elem: [L]} = dm::zeros();\n"
    return f"    for i in 0..{n} {{\n{statement}    }}\n", 64


def _with_t(make: Callable[[str, int], tuple[str, int]]) -> Callable[[str, int], tuple[str, int]]:
    def body(version: str, value: int) -> tuple[str, int]:
        text, size = make(version, value)
        return "    let t: dm<bf16>{..One, elem: [L]} = w.dma(engines = [0]);\n" + text, size

    return body


LIMITS: tuple[Limit, ...] = (
    Limit("TRF per lane", "register-files.md", "8 KB per contraction lane", "0302",
          lambda v, n: _tensor("trf", "bf16", "lane: [1], ")(v, n), 4096, 4100),
    Limit("TRF per slice", "register-files.md", "holds 64 KB", "0302",
          lambda v, n: _tensor("trf", "bf16", "lane: [1 # 8], ")(v, n), 4096, 4100),
    Limit("VRF per slice", "register-files.md", "vector register file holds 8 KB", "0303", _tensor("vrf", "f32"),
          2048, 2050),
    Limit("DMA packet", "dma.md", "at most 4 KB", "0320", _packet, 4096, 4104),
    Limit("DMA engines", "dma.md", "Engines 0-3 sit in cluster 0 and 4-7 in cluster 1", "0323", _engine, 7, 8),
    Limit("lanes", "index.md", "8 lanes", "0201", _lanes, 8, 16),
    Limit("slices", "layouts.md", "256 slices of a cluster", "0201", _slices, 256, 128),
    Limit("contraction step", "contraction.md", "64 bytes of stream per step", "0402", _with_t(_contract_packet),
          32, 64),
    Limit("vector chain", "vector-engine.md", "chains at most 6 ops", "0412", _with_t(_chain), 6, 7,
          stated="0.5.0 and 0.6.0 say 8 (fact ve_chain: wrong on purpose; the compiler enforces the true 6)"),
    Limit("lowering steps", "capacity.md", "more than 4,096 steps", "0104", _steps, 2046, 2047),
    Limit("DM per slice", "capacity.md", "512 KB of DM", "0301", _tensor("dm", "i8"), 480 * 1024, 480 * 1024 + 8,
          stated="every version says 512 KB (fact dm_capacity: wrong on purpose; 0.7.0 enforces 464 KB)"),
)  # fmt: skip


@dataclass(frozen=True)
class LimitCheck:
    limit: Limit
    version: str
    documented: bool  # the page states it (or, where `stated`, states something)
    at_ok: bool  # the program at the limit compiles without the code
    past_refused: bool  # the program past it gets the code

    @property
    def enforced(self) -> bool:
        return self.documented and self.at_ok and self.past_refused


def check_limits(versions: tuple[str, ...] = VERSIONS) -> list[LimitCheck]:
    """Each limit in each version: stated by the docs, and enforced exactly at its value."""
    out = []
    for version in versions:
        pages = render_docs(version)
        for limit in LIMITS:
            at, past = limit.at, limit.past
            if limit.name == "DM per slice" and version == "0.7.0":
                at, past = 464 * 1024, 464 * 1024 + 8  # the runtime reserves more DM from 0.7.0 (P15)
            documented = limit.phrase in pages[limit.page] or bool(limit.stated)
            at_codes = {d.code[1:] for d in check(limit.program(version, at), version).diagnostics}
            past_codes = {d.code[1:] for d in check(limit.program(version, past), version).diagnostics if d.is_error}
            out.append(LimitCheck(limit, version, documented, limit.code not in at_codes, limit.code in past_codes))
    return out
