"""The digit algebra of `digits.py` applied to the IR: E0204 on declared types and fetch stages (a
digit used twice, or two decompositions with no common refinement) and E0430 on reducer groups."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.diagnostics import Diagnostic
from simulator.dsl import ir
from simulator.dsl.printer import print_mapping
from simulator.dsl.walk import walk
from simulator.toolchain.digits import AxisSystem, Digit, NoCommonRefinement, normalise, overlapping, refine
from simulator.toolchain.env import Env, term_digit
from simulator.toolchain.rules import emit
from simulator.toolchain.streams import passes


def mapping_digits(mappings: Iterable[ir.Mapping], axes: AxisSystem) -> list[Digit] | None:
    """The normalised digits of the data terms, or None when one depends on an unknown size."""
    digits: list[Digit] = []
    for mapping in mappings:
        for term in mapping.terms:
            if term.kind != "axis":
                continue
            digit = term_digit(term, axes)
            if digit is None:
                return None
            digits.append(digit)
    return normalise(digits, axes)


def check_type_digits(root: ir.Node, env: Env, version: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for node in walk(root):
        if isinstance(node, ir.DevType):
            mappings = [f.mapping for f in env.fields(node.layout).values() if isinstance(f, ir.MapField)]
        elif isinstance(node, ir.HbmType):
            mappings = [node.mapping]
        else:
            continue
        digits = mapping_digits(mappings, env.axes)
        twice = overlapping(digits) if digits is not None else None
        if twice is not None:
            first, second = twice
            out += emit("0204", version, f"digits of {first.axis} in {first} and {second} have no common refinement "
                        "(a digit is used twice)", node.span)  # fmt: skip
    return out


def check_fetch_digits(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """fetch(time, packet) must refactor the source's elem digits."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        fetch = next((s for s in stream.stages if s.name == "fetch"), None)
        tensor = env.viewed(stream.source)
        if fetch is None or not isinstance(tensor, ir.DevType):
            continue
        elem = env.fields(tensor.layout).get("elem")
        stream_maps = [
            a.value.mapping for a in fetch.args if a.name in ("time", "packet") and isinstance(a.value, ir.Bracket)
        ]
        if not isinstance(elem, ir.MapField) or len(stream_maps) != 2:
            continue
        held, fetched = mapping_digits([elem.mapping], env.axes), mapping_digits(stream_maps, env.axes)
        if held is None or fetched is None:
            continue
        twice = overlapping(fetched)
        try:
            if twice is not None:
                raise NoCommonRefinement(twice[0].axis, *twice)
            refine(held, fetched)
        except NoCommonRefinement as error:
            out += emit("0204", version, str(error), fetch.name_span or fetch.span)
    return out


def check_reducer_groups(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    """E0430: a reduce_slices group must be the innermost live digits of the source's slice mapping."""
    out: list[Diagnostic] = []
    for stream in passes(body):
        tensor = env.viewed(stream.source)
        if not isinstance(tensor, ir.DevType):
            continue
        slice_field = env.fields(tensor.layout).get("slice")
        if not isinstance(slice_field, ir.MapField):
            continue
        live = [t for t in slice_field.mapping.terms if t.kind == "axis"]
        for stage in stream.stages:
            if stage.name not in ("reduce_slices", "allreduce_slices"):
                continue
            group = stage.kwarg("group")
            if not isinstance(group, ir.Bracket):
                continue
            wanted = mapping_digits([group.mapping], env.axes)
            innermost = mapping_digits([ir.Mapping(terms=tuple(live[-len(group.mapping.terms) :]))], env.axes)
            if wanted is None or innermost is None or not group.mapping.terms:
                continue
            if wanted != innermost:
                out += emit("0430", version, f"reduce_slices group {print_mapping(group.mapping)} must be the "
                            f"innermost live slice digits of {print_mapping(slice_field.mapping)}",
                            stage.name_span or stage.span)  # fmt: skip
    return out
