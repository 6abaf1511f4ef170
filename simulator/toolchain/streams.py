"""Rules on Tensor-Unit passes that need only the IR and declared types: stage order (E0120),
decode/cast pairs (E0110), contraction operand types (E0403), sub-context stages (E0405), dtype at
commit (E0410), vector input (E0411) and chain length (E0412)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import walk
from chiplore.simulator.toolchain.digits import Digit
from chiplore.simulator.toolchain.env import Env, term_digit
from chiplore.simulator.toolchain.rules import STAGE_ORDER, emit

MAX_VECTOR_OPS = 6
MAX_CONTRACT_PACKET = 64  # bytes per contraction step
WIDEN = {("bf16", "f32"), ("f8e4m3", "f32"), ("i8", "i32")}
NARROW = {("f32", "bf16"), ("f32", "f8e4m3"), ("i32", "i8")}
DECODE = {("f4e2m1", "f8e4m3"), ("f4e2m1", "bf16"), ("f8e4m3", "bf16")}
CONTRACT_PAIRS = {
    "0.5.0": {("bf16", "bf16"), ("i8", "i8"), ("f8e4m3", "f8e4m3")},
    "0.6.0": {("bf16", "bf16"), ("i8", "i8"), ("f8e4m3", "f8e4m3"), ("f8e4m3", "bf16")},
    "0.7.0": {("bf16", "bf16"), ("i8", "i8"), ("f8e4m3", "f8e4m3"), ("f8e4m3", "bf16"), ("f4e2m1", "bf16")},
}
# Hardware order of the stages (E0120); a vector chain may appear before and after the reducer.
ORDER = {
    "fetch": 0, "decode": 1, "lut": 1, "widen": 1, "switch": 2, "collect": 3, "contract": 4, "vector": 5,
    "reduce_slices": 6, "allreduce_slices": 6, "reduce_clusters": 6, "narrow": 8, "transpose": 9,
    "commit": 10, "commit_into": 10, "to_trf": 10, "to_vrf": 10,
}  # fmt: skip
REGISTER_WRITERS = {"fetch", "decode", "lut", "widen", "switch", "collect", "cast"}
ENDS = {"commit", "commit_into", "to_trf", "to_vrf"}


@dataclass(frozen=True)
class Pass:
    context: str  # main | sub
    source: ir.Expr
    stages: tuple[ir.Method, ...]
    destination: str | None  # the let it is bound to, if any


def passes(body: ir.Block) -> Iterator[Pass]:
    """Every Tensor-Unit pass (a method chain rooted at main(..) or sub(..)) in a body."""
    nodes = list(walk(body))
    bound = {id(node.value): node.name for node in nodes if isinstance(node, ir.Let)}
    # A method that is another method's receiver is inside a longer chain, not the end of a pass.
    receivers = {id(node.receiver) for node in nodes if isinstance(node, ir.Method)}
    for node in nodes:
        if not isinstance(node, ir.Method):
            continue
        chain: list[ir.Method] = []
        root: object = node
        while isinstance(root, ir.Method):
            chain.append(root)
            root = root.receiver
        if isinstance(root, ir.Call) and root.func in ("main", "sub") and root.args and id(node) not in receivers:
            chain.reverse()
            yield Pass(root.func, root.args[0].value, tuple(chain), bound.get(id(node)))


def check_streams(body: ir.Block, env: Env, version: str) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    for stream in passes(body):
        diagnostics += _check_pass(stream, env, version)
    diagnostics += _orphan_stages(body, version)
    return diagnostics


def _orphan_stages(body: ir.Block, version: str) -> list[Diagnostic]:
    """A stage chain must start at main(src) or sub(src): `t.fetch(..)` has no Tensor Unit to run on,
    `main()` nothing to stream, and `commit_into()` nowhere to write."""
    out: list[Diagnostic] = []
    # `sub` is also a vector op: `.vector(sub(vrf = s))` subtracts, it does not start a pass.
    vector_ops = {id(a.value) for n in walk(body) if isinstance(n, ir.Method) and n.name == "vector" for a in n.args}
    for node in walk(body):
        if isinstance(node, ir.Call) and node.func in ("main", "sub") and id(node) in vector_ops:
            continue
        if isinstance(node, ir.Call) and node.func in ("main", "sub") and not any(a.name is None for a in node.args):
            out += emit("0120", version, f"{node.func}(..) needs a source tensor: a Tensor-Unit pass starts with "
                        f"{node.func}(src)", node.span)  # fmt: skip
        if isinstance(node, ir.Method) and node.name == "commit_into" and not any(a.name is None for a in node.args):
            out += emit("0120", version, "commit_into(view) ends a pass in an existing tensor; name the view",
                        node.name_span or node.span)  # fmt: skip
    for node in walk(body):
        if isinstance(node, ir.Method) and node.name in ORDER and not isinstance(node.receiver, ir.Method):
            root = node.receiver
            if not (isinstance(root, ir.Call) and root.func in ("main", "sub")):
                what = root.id if isinstance(root, ir.Name) else root.kind
                out += emit("0120", version, f"{node.name} cannot follow {what}: a Tensor-Unit pass starts with "
                            "main(src) or sub(src)", node.name_span or node.span)  # fmt: skip
    return out


def _dtype_of(expr: object, env: Env) -> str | None:
    """The dtype of a tensor expression: a name, or a view (.tile/.roll/...) of one."""
    tensor = env.viewed(expr)
    return tensor.dtype if tensor is not None else None


def positional_dtype(stage: ir.Method) -> str | None:
    for arg in stage.args:
        if arg.name is None and isinstance(arg.value, ir.Name):
            return arg.value.id
    return None


def _check_pass(stream: Pass, env: Env, version: str) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    dtype = _dtype_of(stream.source, env)
    previous = "fetch"
    level = -1
    computed = False  # past the contraction/vector stage: casts narrow from here on
    seen_reducer = False
    vector_ops = 0
    packet_positions: int | None = None
    for stage in stream.stages:
        name = stage.name
        where = stage.name_span or stage.span
        key = name
        if name == "cast":
            key = "narrow" if computed else "widen"
        rank = 7 if name == "vector" and seen_reducer else ORDER.get(key, -1)
        if rank >= 0:
            misplaced_register_write = name in ("to_trf", "to_vrf") and previous not in REGISTER_WRITERS
            # A stage may not come back to an earlier unit, nor repeat one (a vector chain may continue).
            backwards = rank < level or (rank == level and name != "vector")
            if misplaced_register_write or backwards:
                out += emit("0120", version, f"{name} cannot follow {previous}: the Tensor Unit order is "
                            f"{STAGE_ORDER}", where)  # fmt: skip
            level = max(level, rank)
        if name == "switch":
            out += _cross_cluster(stream, stage, env, version)
        if stream.context == "sub" and name in ("contract", "switch"):
            out += emit("0405", version, f"{name} is not available in the sub context", where)
        target = positional_dtype(stage)
        if name in ("decode", "lut") and dtype is not None and target is not None:
            if (dtype, target) not in DECODE:
                out += emit("0110", version, f"{name} cannot turn {dtype} into {target}", where)
            dtype = target
        elif name in ("cast", "widen", "narrow") and dtype is not None and target is not None:
            allowed = NARROW if key == "narrow" else WIDEN
            if (dtype, target) not in allowed:
                hint = _cast_hint(name, key, dtype, target)
                out += emit("0110", version, f"{name} cannot turn {dtype} into {target}{hint}", where)
            dtype = target
        elif name == "fetch":
            packet = stage.kwarg("packet")
            packet_positions = env.positions(packet.mapping) if isinstance(packet, ir.Bracket) else None
        elif name == "contract":
            width = ir.DTYPE_BYTES.get(dtype or "")
            if packet_positions is not None and width is not None and packet_positions * width > MAX_CONTRACT_PACKET:
                out += emit("0402", version, f"contraction stream packet is {packet_positions * width:g} B "
                            f"(max {MAX_CONTRACT_PACKET} B)", where)  # fmt: skip
            trf = stage.kwarg("trf")
            operand = _dtype_of(trf, env)
            if dtype is not None and operand is not None:
                if (dtype, operand) not in CONTRACT_PAIRS[version]:
                    out += emit("0403", version, f"contraction does not accept a {dtype} stream with a {operand} "
                                "TRF operand", where)  # fmt: skip
                    dtype = None  # no output type to infer: avoid errors that only repeat this one
                else:
                    dtype = "i32" if dtype == "i8" else "f32"
            computed = True
        elif name == "vector":
            if dtype is not None and dtype not in ("f32", "i32"):
                out += emit("0411", version, f"vector engine needs f32/i32 input, stream is {dtype}", where)
            vector_ops += sum(1 for a in stage.args if not _dropped(a))
            computed = True
        elif name in ("reduce_slices", "allreduce_slices", "reduce_clusters"):
            seen_reducer = True
        elif name in ENDS:
            out += _check_commit(stream, stage, dtype, env, version)
        previous = key
    if vector_ops > MAX_VECTOR_OPS:
        first_vector = next(s for s in stream.stages if s.name == "vector")
        out += emit("0412", version, f"vector chain has {vector_ops} operations (max {MAX_VECTOR_OPS})",
                    first_vector.name_span or first_vector.span)  # fmt: skip
    return out + _unsaved_stash_reads(stream, version)


REDUCING_VECTOR_OPS = frozenset({"sum_time", "sum_packet", "sum_all", "max_all"})
REDUCERS = frozenset({"reduce_slices", "allreduce_slices", "reduce_clusters"})


def _unsaved_stash_reads(stream: Pass, version: str) -> list[Diagnostic]:
    """E0501 for an `op(stash)` that reads no saved value: no `stash()` before it in its pass, or a
    reduction since (a vector sum or a reducer) dropped what it saved, since the value kept the shape
    the stream had before the reduction. Ops removed with `when = 0` neither save nor read."""
    out: list[Diagnostic] = []
    saved, dropped_by = False, ""
    for stage in stream.stages:
        if stage.name in REDUCERS and saved:
            saved, dropped_by = False, stage.name
        if stage.name != "vector":
            continue
        for arg in stage.args:
            call = arg.value
            if _dropped(arg) or not isinstance(call, ir.Call):
                continue
            if call.func == "stash":
                saved, dropped_by = True, ""
            elif call.func in REDUCING_VECTOR_OPS and saved:
                saved, dropped_by = False, call.func
            elif not saved and any(a.name is None and isinstance(a.value, ir.Name) and a.value.id == "stash"
                                   for a in call.args):  # fmt: skip
                why = (f"the {dropped_by} between them dropped the value stash() saved (a reduction changes the "
                       "stream's shape); stash again after the reduction, or keep the value in a VRF"
                       if dropped_by else "no stash() before it in its pass saves a value")  # fmt: skip
                out += emit("0501", version, f"'stash' in {call.func}(stash) is used before it is defined: {why}",
                            call.span or stage.span)  # fmt: skip
    return out


def _cast_hint(name: str, key: str, dtype: str, target: str) -> str:
    """Why a cast the other unit could do is refused here, and what to write instead."""
    if key == "widen" and (dtype, target) in NARROW:
        if name == "widen":
            return f": widening runs in the fetch adapter; to narrow {dtype} to {target} write `.narrow({target})`"
        return (f": a cast before any contract or vector stage runs in the fetch adapter, which only widens "
                f"(bf16/f8e4m3 -> f32, i8 -> i32); narrowing {dtype} to {target} is the cast engine's, after a "
                f"contract or vector stage, e.g. `.vector(mul(1.0)).cast({target})`")  # fmt: skip
    if key == "narrow" and (dtype, target) in WIDEN:
        if name == "narrow":
            return f": narrowing runs in the cast engine; to widen {dtype} to {target} write `.widen({target})`"
        return (f": a cast after a contract or vector stage runs in the cast engine, which only narrows "
                f"(f32 -> bf16/f8e4m3, i32 -> i8); widen {dtype} to {target} right after the fetch")  # fmt: skip
    return ""


def _cross_cluster(stream: Pass, stage: ir.Method, env: Env, version: str) -> list[Diagnostic]:
    """E0420: the switch network stays inside one cluster; a digit the source keeps on its cluster
    coordinate cannot be gathered into time or spread over slices by it."""
    source = env.viewed(stream.source)
    if not isinstance(source, ir.DevType):
        return []
    cluster = env.fields(source.layout).get("cluster")
    if not isinstance(cluster, ir.MapField):
        return []
    on_cluster = [d for d in (term_digit(t, env.axes) for t in cluster.mapping.terms) if d is not None]
    moved: list[Digit] = []
    for key in ("slice", "time"):
        value = stage.kwarg(key)
        if isinstance(value, ir.Bracket):
            moved += [d for d in (term_digit(t, env.axes) for t in value.mapping.terms) if d is not None]
    for digit in moved:
        for held in on_cluster:
            if _overlaps(digit, held, env):
                return emit("0420", version, f"switch cannot move data between clusters ({held} is a cluster digit)",
                            stage.name_span or stage.span)  # fmt: skip
    return []


def _overlaps(first: Digit, second: Digit, env: Env) -> bool:
    """Do two digits use a common part of one atom axis?"""
    for a in env.axes.to_atoms(first):
        for b in env.axes.to_atoms(second):
            if a.axis == b.axis and a.stride < b.limit and b.stride < a.limit:
                return True
    return False


def _dropped(arg: ir.Arg) -> bool:
    """`op(..., when = 0)` is removed at compile time and costs nothing."""
    value = arg.value
    if isinstance(value, ir.Call):
        return any(a.name == "when" and isinstance(a.value, ir.Int) and a.value.value == 0 for a in value.args)
    return False


def _check_commit(stream: Pass, stage: ir.Method, dtype: str | None, env: Env, version: str) -> list[Diagnostic]:
    if stage.name == "commit" and stream.destination is not None:
        destination = env.tensor(stream.destination)
    elif stage.name == "commit_into" and stage.args:
        destination = env.viewed(stage.args[0].value)
    else:
        return []
    if dtype is None or destination is None or destination.dtype == dtype:
        return []
    return emit(
        "0410",
        version,
        f"committing a {dtype} stream into a {destination.dtype} tensor without a cast",
        stage.name_span or stage.span,
    )
