"""Which Ferrite constructs a program, or one line of one, uses: read from the parsed IR for a whole
program (exact), and by patterns for text that does not parse on its own (a line a diagnostic
points at, a fragment)."""

from __future__ import annotations

import re

from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.dsl.walk import walk
from chiplore.simulator.pack.language.catalogue import BY_NAME, DTYPES

ITEMS = {ir.AxesDecl: "axes", ir.LayoutDecl: "layout", ir.TypeDecl: "type", ir.FnDecl: "fn", ir.KernelDecl: "kernel"}
RESULT_ALL = "result_all"
DMA_ARGS = {"engines": "engines", "order": "dma.order", "at": "dma_at"}
PATHS = {"empty": "dm_empty", "zeros": "dm_zeros", "at_addr": "at_addr"}


def used_in(source: str) -> frozenset[str]:
    """The catalogue's constructs `source` uses: from its IR when it parses, else by patterns."""
    try:
        program = parse(source)
    except FerriteSyntaxError:
        return _by_pattern(source)
    if not program.items and not program.inner_attrs:
        return _by_pattern(source)  # a comment, or nothing Ferrite
    return frozenset(name for name in _from_ir(program) if name in BY_NAME)


def _from_ir(program: ir.Program) -> set[str]:
    found: set[str] = {"toolchain"} if program.toolchain else set()
    ops = {id(call) for node in walk(program) if isinstance(node, ir.Method) and node.name == "vector"
           for arg in node.args if isinstance(call := arg.value, ir.Call)}  # fmt: skip
    for node in walk(program):
        found |= _of(node, ops)
    return found


def _of(node: ir.Node, vector_ops: set[int]) -> set[str]:
    if type(node) in ITEMS:
        return {ITEMS[type(node)]}
    if isinstance(node, ir.TensorParam):
        return {"mut"} if node.ref == "&mut" else set()
    if isinstance(node, ir.HbmType):
        return {"hbm", f"dtype.{node.dtype}"}
    if isinstance(node, ir.DevType):
        return {node.space, f"dtype.{node.dtype}"}
    if isinstance(node, ir.Spread):
        return {"spread"}
    if isinstance(node, ir.IntField):
        return {node.name}
    if isinstance(node, ir.Term):
        return _term(node)
    if isinstance(node, ir.Attr | ir.For):
        return {node.name} if isinstance(node, ir.Attr) else {"for"}
    if isinstance(node, ir.PathCall):
        return {PATHS[node.func]} if node.path == "dm" and node.func in PATHS else set()
    if isinstance(node, ir.Call):
        if id(node) in vector_ops:
            return {f"op.{node.func}"} | ({"op.stash"} if _uses_stash(node) else set())
        return {node.func} if node.func in ("main", "sub") else set()
    if isinstance(node, ir.Method):
        return _method(node)
    return set()


def _term(term: ir.Term) -> set[str]:
    out = {"digits"} if term.ops else set()
    out |= {"rep"} if term.kind == "rep" else {"at_term"} if term.kind == "at" else set()
    out |= {"pad"} if term.pad is not None else set()
    return out | ({"restrict"} if term.restrict is not None else set())


def _uses_stash(call: ir.Call) -> bool:
    return any(isinstance(arg.value, ir.Name) and arg.value.id == "stash" for arg in call.args)


def _method(node: ir.Method) -> set[str]:
    out = {node.name}
    if node.name in ("dma", "dma_into"):
        out |= {DMA_ARGS[arg.name] for arg in node.args if arg.name in DMA_ARGS}
    if node.name == "reduce_slices" and any(
        arg.name == "result" and isinstance(arg.value, ir.Name) and arg.value.id == "all" for arg in node.args
    ):
        out.add(RESULT_ALL)
    return out


# ---- text that does not parse --------------------------------------------------------------------

METHOD = re.compile(r"\.([a-z_]+)\(")
CONTEXT = re.compile(r"(?<![.\w])(main|sub)\(\s*[a-z_]")
SPACE = re.compile(r"\b(dm|trf|vrf)<(\w+)>")
HBM = re.compile(r"&(?:mut\s+)?hbm<(\w+)>")
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("toolchain", re.compile(r"#!\[toolchain")), ("axes", re.compile(r"\baxes!")),
    ("layout", re.compile(r"^\s*layout\s+\w+\s*=", re.M)), ("type", re.compile(r"^\s*type\s+\w+\s*=", re.M)),
    ("fn", re.compile(r"^\s*fn\s+\w+\(", re.M)), ("kernel", re.compile(r"^\s*kernel\s+\w+\(", re.M)),
    ("mut", re.compile(r"&mut\b")), ("spread", re.compile(r"\.\.[A-Z]")), ("rep", re.compile(r"\brep\(\d")),
    ("at_term", re.compile(r"\bat\(\d+,")), ("pad", re.compile(r"#\s*\d+\s*[\],]")),
    ("restrict", re.compile(r"\[[^\[\]]*\w\s*=\s*\d+\s*(?:#\s*\d+\s*)?[,\]]")),
    ("digits", re.compile(r"\b[A-Z]\w*\s*[/%]\s*\d")),
    ("pipeline", re.compile(r"#\[pipeline")), ("buffers", re.compile(r"\bbuffers:\s*\d")),
    ("for", re.compile(r"\bfor\s+\w+\s+in\b")), ("dm_empty", re.compile(r"dm::empty")),
    ("dm_zeros", re.compile(r"dm::zeros")), ("at_addr", re.compile(r"dm::at_addr")),
    ("engines", re.compile(r"\bengines\s*=")), ("dma.order", re.compile(r"\.dma(?:_into)?\([^;]*\border\s*=")),
    ("dma_at", re.compile(r"\.dma(?:_into)?\([^;]*\bat\s*=")), (RESULT_ALL, re.compile(r"result\s*=\s*all\b")),
)  # fmt: skip
VECTOR_ARGS = re.compile(r"\.vector\(((?:[^()]|\([^()]*\))*)\)")
OP = re.compile(r"\b([a-z_]+)\(")


def _by_pattern(text: str) -> frozenset[str]:
    found = {name for name, pattern in PATTERNS if pattern.search(text)}
    found |= set(METHOD.findall(text)) | set(CONTEXT.findall(text))
    for space, dtype in SPACE.findall(text):
        found |= {space, f"dtype.{dtype}"}
    for dtype in HBM.findall(text):
        found |= {"hbm", f"dtype.{dtype}"}
    for args in VECTOR_ARGS.findall(text):
        found |= {f"op.{op}" for op in OP.findall(args)} | ({"op.stash"} if "stash)" in args else set())
    dtypes = {f"dtype.{d}" for d in DTYPES}
    return frozenset(name for name in found if name in BY_NAME and (name in dtypes or not name.startswith("dtype.")))
