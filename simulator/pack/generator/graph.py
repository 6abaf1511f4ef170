"""A kernel's op graph as stages: matvec groups, the ops that compute each group's input vector, and
the ops that run on each group's output rows.

A *group* is the matvecs that read one input vector (q, k and v read the normed x; up and gate read
the normed residual). Its *input ops* compute that vector from kernel inputs (the K side, where the
contraction reduces); its *row ops* run on the rows it produces (scales, norms, RoPE, activations,
stores). A group whose input is another group's row value is *chained* to it (down after up/gate).

Members of a group are *concatenated* along one row space (q, k, v: each a range of rows) unless
their rows meet in an element-wise op (gelu(gate) * up), when they are *stacked*: each member has the
whole row space in an accumulator of its own. Unsupported shapes raise `Unsupported` with one line why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chiplore.core.ops import (
    Activation,
    CacheWrite,
    Elementwise,
    HeadNorm,
    MatVec,
    OpGraph,
    RmsNorm,
    Rope,
    Scale,
    Store,
)
from chiplore.core.ops import Op as GraphOp
from chiplore.simulator.pack.generator.signature import Dim, Param, Signature

SINKS = (Store, CacheWrite)
CONTRACTED = ("bf16", "f8e4m3", "f4e2m1")  # weight dtypes a contraction takes, as they stream or decoded


class Unsupported(ValueError):
    """The graph combines ops in a way the generator does not write (the message says which)."""


@dataclass(frozen=True)
class Member:
    index: int  # within its group
    op: MatVec
    rows: int
    offset: int  # first row in the group's row space (0 when stacked)
    row_axis: str  # the weight's row axis, as the signature names it
    k_axis: str  # the weight's reduction axis
    dtype: str  # the weight's element type

    @property
    def out(self) -> str:
        return self.op.out


@dataclass
class Group:
    index: int
    input: str  # the vector the matvecs read
    k: int
    members: tuple[Member, ...]
    stacked: bool
    rows: int  # the row space: the sum of the members' rows, or one member's when stacked
    head_dim: int | None  # heads of this many rows when a per-head op runs on the rows
    input_ops: tuple[GraphOp, ...]  # computing `input` from kernel inputs (empty when chained or raw)
    row_ops: tuple[GraphOp, ...] = ()  # ops on the rows, sinks included, in graph order
    chained_from: int | None = None  # the group whose row value is `input`
    exports: list[tuple[str, int]] = field(default_factory=list)  # (row value, group that reads it)
    weight_only_norm: bool = False  # the input's rms_norm scalar dropped (every output is renormalised)
    input_sinks: tuple[Store, ...] = ()  # stores of values its input ops compute (a residual kept before a norm)
    operand_exports: set[str] = field(default_factory=set)  # exports a later group's element-wise op reads (f32)

    @property
    def heads(self) -> bool:
        return self.head_dim is not None


@dataclass
class Analysis:
    """The graph's stages, in the order they run."""

    groups: list[Group]
    lengths: dict[str, int]  # every value's length
    member_of: dict[str, int | None]  # row value -> its member (None: several members' rows)
    group_of: dict[str, int]  # row value -> its group
    graph: OpGraph


def analyse(graph: OpGraph, sig: Signature, split: bool = False) -> Analysis:
    """The stages of `graph` over the kernel `sig` (Unsupported when the generator cannot write it).
    `split`: every matvec whose rows meet no other's gets a row space (a group) of its own, even where
    several could share one (their rows together may not divide over the slices where each one's do)."""
    inputs = {p.name for p in sig.params if not p.mutable} | {p.name for p in sig.params if p.mutable}
    problems = graph.check(inputs, {p.name for p in sig.params if p.mutable})
    if problems:
        raise Unsupported(f"the op graph does not fit the signature: {problems[0]}")
    graph = unfold_norm_weights(graph, {p.name: sig.elements(p.name) for p in sig.params})
    _operands_are_inputs(graph, {p.name for p in sig.params})
    lengths: dict[str, int] = {p.name: sig.elements(p.name) for p in sig.params}
    producer: dict[str, GraphOp] = {}
    for op in graph.ops:
        out = op.writes()
        if out is None:
            continue
        producer[out] = op
        lengths[out] = _length(op, lengths, sig)
    matvecs = [op for op in graph.ops if isinstance(op, MatVec)]
    if not matvecs:
        raise Unsupported("the graph has no matvec: nothing streams weights")
    spaces = _row_spaces(graph, matvecs, sig, split)
    space_of = {op.out: index for index, ops in enumerate(spaces) for op in ops}
    # which group's rows each value derives from
    origin: dict[str, set[int]] = {}
    crossing: dict[str, tuple[int, int]] = {}  # a row value a later group reads in an element-wise op: (its, later)
    for op in graph.ops:
        out = op.writes()
        if out is None:
            continue
        if isinstance(op, MatVec):
            origin[out] = {space_of[op.out]}
        else:
            origin[out] = set().union(*(origin.get(name, set()) for name in op.reads()))
        if len(origin[out]) > 1:
            later = _meeting(op, origin, lengths)
            if later is None:
                raise Unsupported(f"{out} combines the rows of two matvec groups")
            for name in op.reads():  # the earlier group's rows come to the later group's as a register operand
                if origin.get(name) and origin[name] != {later}:
                    crossing[name] = (next(iter(origin[name])), later)
            origin[out] = {later}
    groups: list[Group] = []
    member_of: dict[str, int | None] = {}
    group_of: dict[str, int] = {}
    for index, ops in enumerate(spaces):
        name = ops[0].input
        chained = next(iter(origin.get(name, set())), None)
        members = tuple(_member(i, op, lengths[name], sig) for i, op in enumerate(ops))
        input_ops = () if chained is not None else _ancestors(name, producer)
        groups.append(Group(index, name, lengths[name], members, False, 0, None, input_ops, chained_from=chained))
        if chained is not None:
            if chained >= index:
                raise Unsupported(f"group {index} reads {name} before its rows exist")
            groups[chained].exports.append((name, index))
    for name, (earlier, later) in crossing.items():
        groups[earlier].exports.append((name, later))
        groups[earlier].operand_exports.add(name)
    for group in groups:
        _rows(group, graph, origin, member_of, group_of, lengths)
    _input_sinks(graph, groups, origin)
    for group in groups:
        group.weight_only_norm = _scale_invariant(group, graph, producer)
    return Analysis(groups, lengths, member_of, group_of, graph)


def _input_sinks(graph: OpGraph, groups: list[Group], origin: dict[str, set[int]]) -> None:
    """Give each store of a value computed from kernel inputs alone to the first group computing it."""
    for op in graph.ops:
        if not is_sink(op) or origin.get(op.input):
            continue
        owner = next((g for g in groups if op.input in {o.writes() for o in g.input_ops}), None)
        if owner is None or not isinstance(op, Store):
            raise Unsupported(f"{op.op} of {op.input}: a value of no matvec's input side or rows")
        owner.input_sinks = (*owner.input_sinks, op)


def _row_spaces(graph: OpGraph, matvecs: list[MatVec], sig: Signature, split: bool) -> list[list[MatVec]]:
    """The matvecs of each group, groups in the order of their first matvec. Matvecs of one input share
    a row space (q, k, v), stacked when their rows meet in an element-wise op (gelu(gate) * up), unless
    their weights differ in format: codes of one dtype and scales of one kind (and block) fill one
    chunk buffer, their block scales one scale buffer."""
    derives: dict[str, set[str]] = {}  # value -> the matvec outputs its rows come from
    for op in graph.ops:
        out = op.writes()
        if out is None:
            continue
        derives[out] = {op.out} if isinstance(op, MatVec) else set().union(*(derives.get(n, set()) for n in op.reads()))
    met = {op.out: {op.out} for op in matvecs}  # matvecs whose rows meet (union-find by sets)
    for outs in derives.values():
        if len(outs) > 1:
            merged = set().union(*(met[o] for o in outs))
            for o in merged:
                met[o] = merged
    spaces: dict[tuple[object, ...], list[MatVec]] = {}
    for op in matvecs:
        if len(met[op.out]) > 1:  # stacked: each its own accumulator of the whole row space
            key: tuple[object, ...] = ("stacked", op.input, min(met[op.out]))
        elif split:
            key = ("alone", op.out)
        else:
            key = ("shared", op.input, sig.param(op.weight).dtype, op.scale_kind == "block", op.block)
        spaces.setdefault(key, []).append(op)
    return list(spaces.values())


def _length(op: GraphOp, lengths: dict[str, int], sig: Signature) -> int:
    if isinstance(op, MatVec):
        weight = sig.param(op.weight)
        k = lengths[op.input]
        rows = sig.elements(op.weight) // k if k else 0
        if rows * k != sig.elements(op.weight):
            raise Unsupported(f"matvec {op.out}: weight {op.weight} is not [rows, {k}]")
        _split(weight, k, sig)
        return rows
    if isinstance(op, Elementwise):
        a, b = lengths[op.a], lengths[op.b]
        if a != b and b != 1:
            raise Unsupported(f"{op.op} {op.out}: {op.a} has {a} elements and {op.b} has {b}")
        return a
    first = op.reads()[0]
    return lengths[first]


def split_dims(param: Param, k: int, sig: Signature) -> tuple[tuple[Dim, ...], tuple[Dim, ...]]:
    """A matrix parameter's (row dims, column dims), the columns being the trailing dims of `k` elements."""
    return _split(param, k, sig)


def _split(param: Param, k: int, sig: Signature) -> tuple[tuple[Dim, ...], tuple[Dim, ...]]:
    total = 1
    for cut in range(len(param.dims), 0, -1):
        total *= sig.dim_size(param.dims[cut - 1])
        if total == k:
            return param.dims[: cut - 1], param.dims[cut - 1 :]
        if total > k:
            break
    raise Unsupported(f"{param.name}: no trailing dims of {k} elements")


OPERAND_FIELDS = {RmsNorm: ("weight",), HeadNorm: ("weight",), MatVec: ("weight", "scale", "global_scale"),
                  Rope: ("cos", "sin", "position"), CacheWrite: ("position",)}  # fmt: skip


def unfold_norm_weights(graph: OpGraph, sizes: dict[str, int]) -> OpGraph:
    """An rms_norm whose weight an add or mul of a weight input and a scalar input computes (Gemma's
    `1 + w`) as the products it equals: n * (w + c) = n * w + n * c, and n * (w * c) = (n * w) * c, on the
    unweighted norm n. The generator reads weights from inputs; these ops it writes on the rows."""
    producers = {op.writes(): op for op in graph.ops if op.writes() is not None}
    readers: dict[str, int] = {}
    for op in graph.ops:
        for name in op.reads():
            readers[name] = readers.get(name, 0) + 1
    taken = set(producers) | set(sizes)

    def fresh(stem: str) -> str:
        name, n = stem, 1
        while name in taken:
            name, n = f"{stem}{n}", n + 1
        taken.add(name)
        return name

    unfolded: dict[int, list[GraphOp]] = {}  # norm's index -> the ops that replace it
    dropped: set[str] = set()
    for index, op in enumerate(graph.ops):
        weight = producers.get(op.weight) if isinstance(op, RmsNorm) and op.weight else None
        if not isinstance(weight, Elementwise) or weight.round_bf16 or readers.get(str(op.weight)) != 1:
            continue
        pair = [name for name in (weight.a, weight.b) if sizes.get(name, 0) > 1]
        scalar = [name for name in (weight.a, weight.b) if sizes.get(name) == 1]
        if len(pair) != 1 or len(scalar) != 1:
            continue
        assert isinstance(op, RmsNorm)
        plain = RmsNorm(input=op.input, eps=op.eps, out=fresh(f"{op.out}_unweighted"))
        by_row = Elementwise(op="mul", a=plain.out, b=pair[0], out=fresh(f"{op.out}_by_{pair[0]}"))
        if weight.op == "mul":
            last = Elementwise(op="mul", a=by_row.out, b=scalar[0], out=op.out, round_bf16=op.round_bf16)
            unfolded[index] = [plain, by_row, last]
        else:
            by_scalar = Elementwise(op="mul", a=plain.out, b=scalar[0], out=fresh(f"{op.out}_by_{scalar[0]}"))
            last = Elementwise(op="add", a=by_row.out, b=by_scalar.out, out=op.out, round_bf16=op.round_bf16)
            unfolded[index] = [plain, by_row, by_scalar, last]
        dropped.add(weight.out)
    if not unfolded:
        return graph
    ops: list[GraphOp] = []
    for index, op in enumerate(graph.ops):
        if op.writes() in dropped:
            continue
        ops.extend(unfolded.get(index, [op]))
    return OpGraph(ops=ops)


def _operands_are_inputs(graph: OpGraph, params: set[str]) -> None:
    """The generator loads weights, scales, tables and positions from the kernel's inputs: one an op
    computes (Gemma's norm weight `1 + w` as an `add`) is refused by name, with what to write instead."""
    for index, op in enumerate(graph.ops):
        for name in OPERAND_FIELDS.get(type(op), ()):
            value = getattr(op, name)
            if value is not None and value not in params:
                raise Unsupported(f"op {index + 1} ({op.op} {op.writes() or ''}): its {name} {value!r} is computed by "
                                  f"an op, and the generator reads a {name} from a kernel input (draw the computed "
                                  "value as the input, e.g. a norm weight 1 + w)")  # fmt: skip


def _meeting(op: GraphOp, origin: dict[str, set[int]], lengths: dict[str, int]) -> int | None:
    """The later group, where an element-wise op adds or multiplies the rows of two groups of one length
    (a LoRA's up projection beside the projection it corrects: `y0 + B(A x)`); None for any other meeting."""
    if not isinstance(op, Elementwise):
        return None
    sources = [origin.get(name, set()) for name in op.reads()]
    if any(len(source) > 1 for source in sources) or len({lengths.get(name) for name in op.reads()}) > 1:
        return None
    groups = {g for source in sources for g in source}
    return max(groups) if len(groups) == 2 else None


def _member(index: int, op: MatVec, k: int, sig: Signature) -> Member:
    weight = sig.param(op.weight)
    if weight.dtype not in CONTRACTED:
        raise Unsupported(f"matvec {op.out}: {weight.dtype} weights ({op.weight}) reach no contraction, which takes "
                          "bf16 and decoded f8/f4 codes; the generator writes no vector-engine matvec")  # fmt: skip
    row_dims, k_dims = _split(weight, k, sig)
    if not row_dims or any(d.divisor != 1 for d in (*row_dims, *k_dims)):
        raise Unsupported(f"matvec {op.out}: weight {op.weight} is not [rows, columns] over whole axes")
    if op.scale_kind == "block":
        scale = sig.param(str(op.scale))
        if sig.elements(scale.name) * op.block != sig.elements(op.weight):
            raise Unsupported(f"matvec {op.out}: block scale {scale.name} is not [rows, columns / {op.block}]")
        # the scales are renamed onto the weight's axes with it: their columns must be the weight's K over the block
        columns = (*k_dims[:-1], Dim(k_dims[-1].axis, op.block))
        if scale.dims != (*row_dims, *columns):
            wanted = ", ".join(_dim_text(d) for d in (*row_dims, *columns))
            raise Unsupported(f"matvec {op.out}: block scale {scale.name} is declared over other axes than "
                              f"{op.weight}'s: write its shape as [{wanted}]")  # fmt: skip
    rows = sig.elements(op.weight) // k
    return Member(index, op, rows, 0, sig.axis_of(row_dims), sig.axis_of(k_dims), weight.dtype)


def _ancestors(name: str, producer: dict[str, GraphOp]) -> tuple[GraphOp, ...]:
    """The ops that compute `name` from kernel inputs, in graph order."""
    needed: list[GraphOp] = []
    stack = [name]
    seen: set[str] = set()
    while stack:
        value = stack.pop()
        if value in seen or value not in producer:
            continue
        seen.add(value)
        op = producer[value]
        needed.append(op)
        stack.extend(op.reads())
    order = list(producer.values())
    return tuple(sorted(needed, key=order.index))


def _rows(group: Group, graph: OpGraph, origin: dict[str, set[int]], member_of: dict[str, int | None],
          group_of: dict[str, int], lengths: dict[str, int]) -> None:  # fmt: skip
    """The group's row ops, which of its members each row value belongs to, and its row space."""
    ops: list[GraphOp] = []
    owner: dict[str, set[int]] = {m.out: {m.index} for m in group.members}
    heads: set[int] = set()
    for op in graph.ops:
        out = op.writes()
        reads = op.reads()
        mine = (out is not None and origin.get(out) == {group.index} and not isinstance(op, MatVec)) or (
            out is None and any(origin.get(r) == {group.index} for r in reads)
        )
        if not mine:
            continue
        ops.append(op)
        if isinstance(op, HeadNorm | Rope):
            heads.add(op.head_dim)
        if out is not None:
            owner[out] = set().union(*(owner.get(r, set()) for r in reads))
    if len(heads) > 1:
        raise Unsupported(f"group {group.index}: per-head ops with head sizes {sorted(heads)}")
    stacked = any(len(owners) > 1 for owners in owner.values())
    rows = [m.rows for m in group.members]
    if stacked and len(set(rows)) > 1:
        raise Unsupported(f"group {group.index}: members of {rows} rows meet in an element-wise op")
    members, offset = [], 0
    for member in group.members:
        members.append(Member(member.index, member.op, member.rows, 0 if stacked else offset, member.row_axis,
                              member.k_axis, member.dtype))  # fmt: skip
        offset += member.rows
    group.members = tuple(members)
    group.stacked = stacked
    group.rows = rows[0] if stacked else sum(rows)
    group.head_dim = next(iter(heads), None)
    if group.head_dim is not None and any(m.rows % group.head_dim for m in group.members):
        raise Unsupported(f"group {group.index}: rows are not whole heads of {group.head_dim}")
    group.row_ops = tuple(ops)
    for name, owners in owner.items():
        group_of[name] = group.index
        member_of[name] = next(iter(owners)) if len(owners) == 1 else None


def _scale_invariant(group: Group, graph: OpGraph, producer: dict[str, GraphOp]) -> bool:
    """Whether the input's rms_norm scalar can be dropped: the input is rms_norm(v, w) and every path
    from every output reaches a norm through ops that are linear in it (scales, RoPE, products with
    kernel inputs), so the scalar cancels there (up to the norm's epsilon)."""
    norm = producer.get(group.input)
    if not isinstance(norm, RmsNorm) or group.chained_from is not None:
        return False
    readers: dict[str, list[GraphOp]] = {}
    for op in graph.ops:
        for name in op.reads():
            readers.setdefault(name, []).append(op)
    if any(not isinstance(op, MatVec) for op in readers.get(group.input, [])):
        return False
    row_values = {m.out for m in group.members}

    def renormalised(value: str) -> bool:
        users = readers.get(value, [])
        if not users:
            return False
        for op in users:
            if isinstance(op, HeadNorm | RmsNorm) and op.input == value:
                continue
            if isinstance(op, Scale | Rope) and op.input == value:
                if not renormalised(str(op.writes())):
                    return False
                continue
            if isinstance(op, Elementwise) and op.op == "mul":
                other = op.b if op.a == value else op.a
                if other in row_values or other in producer or not renormalised(op.out):
                    return False
                continue
            return False
        return True

    return all(renormalised(m.out) for m in group.members)


def is_sink(op: GraphOp) -> bool:
    return isinstance(op, SINKS)


def activation_ops(op: Activation) -> tuple[str, ...]:
    """Vector-engine ops computing the activation (gelu_tanh within the tolerance of gelu's erf form)."""
    if op.op in ("gelu", "gelu_tanh"):
        return ("stash()", f"mul({1 / math.sqrt(2):.8f})", "erf()", "add(1.0)", "mul(stash)", "mul(0.5)")
    return ("stash()", "neg()", "exp()", "add(1.0)", "recip()", "mul(stash)")


def _dim_text(dim: Dim) -> str:
    if dim.axis is None:
        return "1"
    return dim.axis if dim.divisor == 1 else f"{dim.axis} / {dim.divisor}"
