"""Ferrite's constructs as the DSL summary names them: kind, how each is written, the legality-rule
keys that constrain it (the compile probes' keys, simulator/pack/rule_probes.py), how ferc's
messages spell the version-dependent ones, and the phrases by which the vendor docs' prose names
each (backticked code, mostly). The summary has one entry per construct the docs name or use."""

from __future__ import annotations

import re
from dataclasses import dataclass

from chiplore.core.pack import Construct


@dataclass(frozen=True)
class Named:
    """A construct and the regexes by which prose names it."""

    construct: Construct
    mentions: tuple[str, ...]


def _c(name: str, kind: str, syntax: str, mentions: tuple[str, ...], rule_keys: tuple[str, ...] = (),
       spellings: tuple[str, ...] = ()) -> Named:  # fmt: skip
    return Named(Construct(name, kind, syntax, rule_keys, spellings), mentions)


def _stage(name: str, syntax: str, *, rule_keys: tuple[str, ...] = (), spellings: tuple[str, ...] = (),
           kind: str = "stage") -> Named:  # fmt: skip
    """A method-call construct, named in prose as `.name(...)`, `name(...)` or `name`."""
    return _c(name, kind, syntax, (rf"`[^`]*\.{name}\(", rf"`{name}[`(]"), rule_keys, spellings)


def _op(name: str, syntax: str, mentions: tuple[str, ...] = ()) -> Named:
    """A vector-stage op (named `op.NAME`: `sub` and `max` are also a context and a reducer op)."""
    return _c(f"op.{name}", "vector op", syntax, mentions or (rf"`{name}[`(]",), ("vector.",))


DTYPES = ("bf16", "f32", "i8", "i32", "f8e4m3", "f4e2m1")

CATALOGUE: tuple[Named, ...] = (
    # ---- items
    _c("toolchain", "item", '#![toolchain = "X.Y.Z"]', (r"#!\[toolchain",)),
    _c("axes", "item", "axes! { A = n, B = (A, C) }", (r"`axes!",)),
    _c("layout", "item", "layout Name = { cluster: [...], slice: [...] };", (r"`layout[` ]", r"A `layout`")),
    _c("type", "item", "type Name = TYPE;", (r"`type \w+ =",)),
    _c("fn", "item", "fn name(p: TYPE, a: axis, n: int, l: layout) -> TYPE { ... }", (r"`fn`", r"`fn ")),
    _c("kernel", "item", "kernel name(x: &hbm<D>[A], y: &mut hbm<D>[A]) { ... }", (r"`kernel ",)),
    # ---- memory and register types
    _c("hbm", "memory", "&hbm<D>[A, B]", (r"&hbm<",)),
    _c("mut", "memory", "&mut hbm<D>[A]", (r"`&mut",)),
    _c("dm", "memory", "dm<D>{cluster: [...], slice: [...], elem: [...]}", (r"`dm<",), ("dm.bytes_per_slice",)),
    _c("trf", "register", "trf<D>{..., lane: [...], elem: [...]}", (r"`trf<", r"\bTRF\b"), ("trf.",)),
    _c("vrf", "register", "vrf<D>{..., elem: [...]}", (r"`vrf<", r"\bVRF\b"), ("vrf.",)),
    *(_c(f"dtype.{d}", "dtype", d, (rf"`{d}`", rf"`{d} ->", rf"-> {d}`")) for d in DTYPES),
    # ---- layout and mapping forms
    _c("digits", "mapping", "A / d, A % m, A / d % m", (r"`[A-Z]\w* [/%] \d+",)),
    _c("spread", "mapping", "..Layout (a layout's fields spliced into a type)", (r"`\.\.[A-Z]",)),
    _c("rep", "mapping", "rep(n)", (r"`rep\(",)),
    _c("at_term", "mapping", "at(k, n)", (r"`at\(\d",)),
    _c("pad", "mapping", "T # n", (r"# n`", r"\[1 # \d+\]`")),
    _c("restrict", "mapping", "T = k (a tile's extent of a digit)", (r"\w = \d+\]`",)),
    # ---- attributes and control
    _c("pipeline", "attribute", "#[pipeline(depth = N)] for ...", (r"#\[pipeline",), (), ("#[pipeline(depth = N)]",)),
    _c("buffers", "attribute", "dm<D>{..., buffers: N}", (r"`buffers: ",), ("construct.buffers",), ("buffers: N",)),
    _c("for", "control", "for i in a..b { ... }", (r"`for ",)),
    # ---- allocation and views
    _c("dm_empty", "allocation", "let mut t: TYPE = dm::empty();", (r"dm::empty",)),
    _c("dm_zeros", "allocation", "let t: TYPE = dm::zeros();", (r"dm::zeros",)),
    _c("at_addr", "allocation", "dm::at_addr(...)", (r"dm::at_addr",), (), ("dm::at_addr",)),
    _stage("tile", "t.tile(digit, start, len)", kind="view", rule_keys=("view.",)),
    _stage("roll", "t.roll(digit, k)", kind="view"),
    _stage("rename", "t.rename(A, B, offset)", kind="view"),
    _c("at", "view", "t.at(A = p) (a run-time index: gather or scatter)", (r"\.at\([A-Z]\w* =",)),
    _stage("fill", "view.fill(v)", kind="view"),
    # ---- DMA
    _c("dma", "dma", "let d: TYPE = src.dma(engines = [...], packet = N);",
       (r"`[^`]*\.dma\(", r"`\.dma\b", r"\bDMA (?:command|engine)s?\b"),
       ("dma.",)),
    _stage("dma_into", "src.dma_into(view, engines = [...])", kind="dma"),
    _c("engines", "dma", "engines = [e, ...] | auto", (r"`engines = ",)),
    _c("dma.order", "dma", "src.dma(..., order = [digits])", (r"`order = ",), ("construct.dma.order",),
       ("dma(order = ...)",)),
    _c("dma_at", "dma", "src.dma(at = ...)", (r"dma\(at = ",), (), ("dma(at = ...)",)),
    # ---- Tensor-Unit passes
    _c("main", "context", "main(src)", (r"`main\(", r"`main`")),
    _c("sub", "context", "sub(src)", (r"`sub\([a-z]", r"on `sub`", r"`sub`(?! *,)")),
    _c("fetch", "stage", ".fetch(time = [...], packet = [...])",
       (r"`[^`]*\.fetch\(", r"`fetch[`(]", r"\bA fetch\b"), ("fetch.",)),
    _stage("lut", ".lut(D)", rule_keys=("construct.lut",), spellings=(".lut(D)",)),
    _stage("decode", ".decode(D)", rule_keys=("construct.decode",), spellings=(".decode(D)",)),
    _stage("cast", ".cast(D)", rule_keys=("construct.cast",), spellings=(".cast(D)",)),
    _stage("widen", ".widen(D)", rule_keys=("construct.widen",), spellings=(".widen(D)",)),
    _stage("narrow", ".narrow(D)", spellings=(".narrow(D)",)),
    _c("switch", "stage", ".switch(broadcast | gather | scatter, slice = [...], time = [...], ring = n)",
       (r"`[^`]*\.switch\(", r"`switch[`(]", r"\b[Tt]he switch\b"), ("switch.",)),
    _stage("collect", ".collect(time = [...], packet = [...])"),
    _c("contract", "stage", ".contract(trf = X, reduce = [...], fold = [...])",
       (r"`[^`]*\.contract\(", r"`contract[`(]", r"\b[Cc]ontractions?\b"), ("contract.",)),
    _c("vector", "stage", ".vector(op(...), ...)",
       (r"`[^`]*\.vector\(", r"`vector[`(]", r"\b[Vv]ector (?:stage|op|engine)s?\b"), ("vector.",)),
    _stage("transpose", ".transpose(time = [...], packet = [...])"),
    _stage("commit", ".commit()", rule_keys=("commit.",)),
    _stage("commit_into", ".commit_into(view)"),
    _stage("to_trf", ".to_trf()"),
    _stage("to_vrf", ".to_vrf()"),
    # ---- reductions
    _stage("reduce_slices", ".reduce_slices(add | max, group = [digits], result = leader)", kind="reduction"),
    _c("result_all", "reduction", ".reduce_slices(op, group = [digits], result = all)", (r"`result = all`",), (),
       ("reduce_slices(..., result = all)",)),
    _stage("allreduce_slices", ".allreduce_slices(add | max, group = [digits])", kind="reduction",
           rule_keys=("construct.allreduce_slices",), spellings=("allreduce_slices(op, group)",)),
    _stage("reduce_clusters", ".reduce_clusters(add | max)", kind="reduction",
           rule_keys=("construct.reduce_clusters",), spellings=("reduce_clusters(op)",)),
    # ---- vector ops
    _op("add", "add(c | vrf = V | stash)", (r"`add[`(](?!stash)",)),
    _op("sub", "sub(c | vrf = V | stash)", (r"`sub`(?= *,)", r"`sub\((?:[\d.-]|vrf|stash)")),
    _op("mul", "mul(c | vrf = V | stash)"),
    _op("div", "div(c | vrf = V | stash)"),
    _op("max", "max(c | vrf = V | stash)", (r"`max`(?= *,)", r"`max\((?:[\d.-]|vrf|stash)")),
    _op("min", "min(c | vrf = V | stash)"),
    *(_op(name, f"{name}()") for name in ("exp", "erf", "tanh", "rsqrt", "recip", "square", "neg")),
    _op("stash", "stash() ... op(stash)", (r"`stash\(",)),
    _op("sum_time", "sum_time([digits])"),
    _op("sum_packet", "sum_packet()"),
    _op("sum_all", "sum_all()"),
    _op("max_all", "max_all()"),
)  # fmt: skip

BY_NAME: dict[str, Named] = {named.construct.name: named for named in CATALOGUE}
MENTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (named.construct.name, re.compile(pattern)) for named in CATALOGUE for pattern in named.mentions
)
