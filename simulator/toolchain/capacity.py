"""Per-slice capacity of one tensor: DM (E0301), TRF (E0302) and VRF (E0303).

The full rules bound the liveness peak of all tensors of a slice; one tensor (times its rotating
buffers) that alone exceeds the limit is the part that needs no scheduling, and is checked here.
Compile-time limits are what a real compiler knows; 0.7.0 reserves more DM (docs/simrngd.md §2.3).
"""

from __future__ import annotations

from chiplore.simulator._truth import chip_shape, load_truth
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.env import Env
from chiplore.simulator.toolchain.rules import emit


def trf_limit() -> int:
    """TRF bytes per slice (64 KB on the default chip: 8 lanes of 8 KB)."""
    return chip_shape().trf_bytes


def vrf_limit() -> int:
    """VRF bytes per slice (8 KB on the default chip)."""
    return chip_shape().vrf_bytes


def dm_limit(version: str) -> int:
    """Usable DM per slice: a compile-time limit the compiler knows (and its messages quote)."""
    return int(load_truth(version).dm_usable_per_slice)


def slice_bytes(ttype: ir.DevType, env: Env) -> float | None:
    """Bytes one slice holds of a device tensor (elem, and lane for a TRF), one buffer."""
    fields = env.fields(ttype.layout)
    total = ir.DTYPE_BYTES.get(ttype.dtype)
    if total is None:
        return None
    for name in ("elem", "lane"):
        field = fields.get(name)
        if isinstance(field, ir.MapField):
            positions = env.positions(field.mapping)
            if positions is None:
                return None
            total *= positions
    return total


def _buffers(ttype: ir.DevType, env: Env, depth: int) -> int:
    field = env.fields(ttype.layout).get("buffers")
    return field.value if isinstance(field, ir.IntField) else depth


def check_capacity(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for let, depth in _lets_with_depth(body, 1):
        ttype = env.resolve(let.type)
        if not isinstance(ttype, ir.DevType):
            continue
        per_buffer = slice_bytes(ttype, env)
        if per_buffer is None:
            continue
        if ttype.space == "dm":
            total = per_buffer * _buffers(ttype, env, depth)
            if total > dm_limit(version):
                out += emit("0301", version, f"DM use of slice 0 peaks at {total:,.0f} B (> {dm_limit(version):,} B "
                            f"usable) at `{let.name}`", let.span)  # fmt: skip
        elif ttype.space == "trf":
            out += _check_trf(ttype, per_buffer, env, version, let.span)
        elif ttype.space == "vrf" and per_buffer > vrf_limit():
            out += emit("0303", version, f"VRF live set {per_buffer:,.0f} B exceeds {vrf_limit():,} B at `{let.name}`",
                        let.span)  # fmt: skip
    return out


def _check_trf(ttype: ir.DevType, per_buffer: float, env: Env, version: str, span: ir.Span | None) -> list[Diagnostic]:
    """A TRF holds 64 KB per slice on the default chip, 8 KB in each of its 8 lanes; double-buffered
    (`buffers: 2`, 0.7.0) each buffer holds half of both. Pipelined loops do not rotate register
    files, so only the type's own `buffers` counts."""
    shape = chip_shape()
    buffers = _buffers(ttype, env, 1)
    if buffers >= 2 and per_buffer * buffers > shape.trf_bytes:
        half = shape.trf_bytes // buffers
        return emit("0302", version, f"TRF use {per_buffer:,.0f} B per slice exceeds {half:,} B per buffer when the "
                    f"TRF has {buffers} buffers", span)  # fmt: skip
    if per_buffer > shape.trf_bytes:
        return emit("0302", version, f"TRF use {per_buffer:,.0f} B per slice exceeds {shape.trf_bytes:,} B", span)
    per_lane = _lane_bytes(ttype, env)
    lane_limit = shape.trf_lane_bytes // max(buffers, 1)
    if per_lane is not None and per_lane > lane_limit:
        what = f" per buffer when the TRF has {buffers} buffers" if buffers >= 2 else ""
        return emit("0302", version, f"TRF use {per_lane:,.0f} B per lane exceeds {lane_limit:,} B{what}: a lane "
                    f"holds {shape.trf_lane_bytes:,} B; spread the operand over more lanes or load it in chunks",
                    span)  # fmt: skip
    return []


def _lane_bytes(ttype: ir.DevType, env: Env) -> float | None:
    """Bytes one lane holds of a TRF tensor: its elem positions (the lane field only repeats them)."""
    width = ir.DTYPE_BYTES.get(ttype.dtype)
    elem = env.fields(ttype.layout).get("elem")
    if width is None or not isinstance(elem, ir.MapField):
        return None
    positions = env.positions(elem.mapping)
    return None if positions is None else width * positions


def _lets_with_depth(block: ir.Block, depth: int) -> list[tuple[ir.Let, int]]:
    """Every typed let with the pipeline depth of the loop it is in (1 outside pipelined loops)."""
    found: list[tuple[ir.Let, int]] = []
    for statement in block.stmts:
        if isinstance(statement, ir.Let) and statement.type is not None:
            found.append((statement, depth))
        elif isinstance(statement, ir.For):
            inner = depth
            for attr in statement.attrs:
                if attr.name == "pipeline" and attr.args:
                    for arg in attr.args:
                        if arg.name == "depth" and arg.value.kind == "int":
                            inner = int(arg.value.value)
            found += _lets_with_depth(statement.body, inner)
    return found
