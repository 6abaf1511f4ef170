"""E0103 and W0702: constructs that the chosen toolchain version does not have, or deprecates."""

from __future__ import annotations

from collections.abc import Iterator

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import walk
from chiplore.simulator.toolchain.rules import SEVERITY_NAMES, lookup
from chiplore.simulator.toolchain.versions import ALL_CONSTRUCTS, CONSTRUCTS, VersionSpec


def check_vocabulary(program: ir.Program, spec: VersionSpec) -> list[Diagnostic]:
    diagnostics = []
    for construct, span in _constructs(program):
        if construct not in spec.vocabulary:
            replacement = spec.replacements.get(construct, "it has no equivalent in this version")
            diagnostics.append(
                Diagnostic(
                    code="E0103",
                    severity="error",
                    message=f"{CONSTRUCTS[construct]} is not available in toolchain {spec.version}; {replacement}",
                    span=span,
                )
            )
    deprecated = lookup("0702")
    code = deprecated.code(spec.version) if deprecated else None
    if code is not None:
        for node in walk(program):
            if isinstance(node, ir.For):
                for attr in node.attrs:
                    if attr.name == "pipeline":
                        diagnostics.append(
                            Diagnostic(
                                code=code,
                                severity=SEVERITY_NAMES[code[0]],
                                message=f"'#[pipeline(depth = N)]' is deprecated in toolchain {spec.version}; "
                                "give the loop-local tensor 'buffers: N' in its type",
                                span=attr.span,
                            )
                        )
    return diagnostics


def _constructs(program: ir.Program) -> Iterator[tuple[str, ir.Span | None]]:
    """Every version-dependent construct the program uses, with where it is written."""
    for node in walk(program):
        if isinstance(node, ir.Method):
            span = node.name_span or node.span
            if node.name in ALL_CONSTRUCTS:
                yield node.name, span
            for arg in node.args:
                if node.name in ("dma", "dma_into") and arg.name == "at":
                    yield "dma_at", arg.span
                elif node.name in ("dma", "dma_into") and arg.name == "order":
                    yield "dma_order", arg.span
                elif (
                    node.name == "reduce_slices"
                    and arg.name == "result"
                    and isinstance(arg.value, ir.Name)
                    and arg.value.id == "all"
                ):
                    yield "result_all", arg.span
        elif isinstance(node, ir.PathCall) and (node.path, node.func) == ("dm", "at_addr"):
            yield "at_addr", node.span
        elif isinstance(node, ir.IntField) and node.name == "buffers":
            yield "buffers", node.span
