"""Fusing the epilogues of members that share a row space (q, k and v) into one chain of passes.

Each member's rows go through a chain of ops (head norm, RoPE, a store...). Passes cost the same for
all rows of a slice, and the Tensor Unit runs them one at a time, so members whose chains line up
run one chain over all their rows: where a member lacks an op that has an identity (a product by 1, a
sum of 0, RoPE with cos 1 and sin 0, a head norm without weight), it gets the identity. Ops without one
(activations, norms) must sit at the same place in every member's chain.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chiplore.core.ops import Activation, Elementwise, HeadNorm, RmsNorm, Rope, Scale
from chiplore.core.ops import Op as GraphOp
from chiplore.simulator.pack.generator.graph import Analysis, Group, Member, is_sink
from chiplore.simulator.pack.generator.operands import Operand, Part

ANCHORS = ("act", "head_norm", "rms_norm")  # ops with no identity: every member has them, in one place


@dataclass(frozen=True)
class Step:
    """One op of a member's chain: its kind, what must match to fuse it, and its operands' parts."""

    kind: str  # scale, mul, add, act, head_norm, rope, rms_norm
    key: tuple[object, ...]
    parts: tuple[tuple[str, Part], ...] = ()  # (operand role, this member's part)
    op: GraphOp | None = None

    @property
    def round(self) -> bool:
        return bool(getattr(self.op, "round_bf16", False))

    @property
    def match(self) -> tuple[object, ...]:
        """What must be equal for two members' steps to run as one (a rounding point included)."""
        return (self.kind, self.key, self.round)


@dataclass
class FusedStep:
    kind: str
    key: tuple[object, ...]
    operands: dict[str, Operand]
    identity: frozenset[int] = frozenset()  # members for which the step changes nothing
    round: bool = False  # a rounding point after the step (for the identity members too: see `fuse`)


@dataclass
class Lane:
    """Members whose chains run as one: the fused steps, and what each member writes after a step."""

    members: tuple[Member, ...]
    steps: list[FusedStep]
    sinks: list[tuple[int, Member, GraphOp | str]] = field(default_factory=list)  # (steps done, member, sink)


def chain(
    member: Member, group: Group, analysis: Analysis
) -> tuple[list[Step], list[tuple[int, GraphOp | str]]] | None:
    """A member's ops in order and its sinks (stores, cache writes, exports by value name), or None
    when its rows branch or meet another row value."""
    readers: dict[str, list[GraphOp]] = {}
    for op in group.row_ops:
        for name in op.reads():
            readers.setdefault(name, []).append(op)
    exported = {value for value, _ in group.exports}
    value, steps, sinks = member.out, [], []
    while True:
        users = readers.get(value, [])
        sinks += [(len(steps), op) for op in users if is_sink(op)]
        if value in exported:
            sinks.append((len(steps), value))
        rest = [op for op in users if not is_sink(op)]
        if not rest:
            return steps, sinks
        if len(rest) > 1:
            return None
        step = _step(rest[0], value, member, analysis)
        if step is None:
            return None
        steps.append(step)
        value = str(rest[0].writes())


def _step(op: GraphOp, value: str, member: Member, analysis: Analysis) -> Step | None:
    m = member.index
    if isinstance(op, Scale):
        return Step("scale", (), (("by", Part(m, constant=op.by)),), op)
    if isinstance(op, Activation):
        return Step("act", (op.op,), (), op)
    if isinstance(op, Elementwise):
        other = op.b if op.a == value else op.a
        if other in analysis.group_of or other == value:
            return None  # two row values meet: not a chain
        length = analysis.lengths[other]
        shape = "scalar" if length == 1 else "row"
        if shape == "row" and length != member.rows:
            return None
        return Step(op.op, (shape,), (("by", Part(m, param=other)),), op)
    if isinstance(op, HeadNorm):
        weight = Part(m, param=op.weight) if op.weight else Part(m, constant=1.0)
        return Step("head_norm", (op.head_dim, op.eps), (("weight", weight),), op)
    if isinstance(op, Rope):
        return Step("rope", (op.head_dim,), (("cos", Part(m, param=op.cos, position=op.position)),
                                            ("sin", Part(m, param=op.sin, position=op.position))), op)  # fmt: skip
    if isinstance(op, RmsNorm):
        weight = Part(m, param=op.weight) if op.weight else Part(m, constant=1.0)
        return Step("rms_norm", (op.eps,), (("weight", weight),), op)
    return None


IDENTITY = {"scale": {"by": 1.0}, "mul": {"by": 1.0}, "add": {"by": 0.0}, "rope": {"cos": 1.0, "sin": 0.0},
            "head_norm": {"weight": 1.0}, "rms_norm": {"weight": 1.0}}  # fmt: skip
SHAPES = {"rope": "table", "head_norm": "head", "rms_norm": "row"}


def fuse(group: Group, analysis: Analysis) -> Lane | None:
    """One lane over every member of a concatenated group, or None when their chains do not line up."""
    if group.stacked or len(group.members) < 2:
        return None
    chains = [chain(m, group, analysis) for m in group.members]
    if any(c is None for c in chains):
        return None
    segments = [_segments(c[0]) for c in chains if c is not None]
    anchors = [[s[0].match for s in seg[1::2]] for seg in segments]
    if any(a != anchors[0] for a in anchors) or any(k[0] == "rms_norm" for k in anchors[0]):
        return None  # a norm over the whole vector does not fuse across members
    if len({m.op.round_bf16 for m in group.members}) > 1:
        return None  # the accumulators are rounded for all members or for none
    fused: list[FusedStep] = []
    done: list[list[int]] = [[] for _ in group.members]  # per member: fused step index after each own step
    for position in range(len(segments[0])):
        pieces = [seg[position] for seg in segments]
        if position % 2:  # an anchor: every member has it
            fused.append(_merge(pieces[0][0], [p[0] for p in pieces], group))
            for own in done:
                own.append(len(fused))
            continue
        longest = max(pieces, key=len)
        keys = [s.match for s in longest]
        placed = [_subsequence([s.match for s in piece], keys) for piece in pieces]
        if any(p is None for p in placed):
            return None
        for index, step in enumerate(longest):
            steps = [
                piece[placed_at.index(index)] if index in placed_at else None
                for piece, placed_at in zip(pieces, placed, strict=True)
            ]  # type: ignore[arg-type]
            fused.append(_merge(step, steps, group))
        for own, placed_at in zip(done, placed, strict=True):
            own.extend(len(fused) - len(keys) + i + 1 for i in placed_at)  # type: ignore[union-attr]
    if not _rounds_agree(group, fused):
        return None
    lane = Lane(group.members, fused)
    for member, c, own in zip(group.members, chains, done, strict=True):
        assert c is not None
        for steps_done, sink in c[1]:
            at = own[steps_done - 1] if steps_done else 0
            while at < len(fused) and member.index in fused[at].identity:
                at += 1  # a write after identities is the same write: it waits for the lane's
            lane.sinks.append((at, member, sink))
    lane.sinks.sort(key=lambda s: s[0])
    return lane


def _segments(steps: list[Step]) -> list[list[Step]]:
    """[steps before the first anchor, [anchor], steps up to the next anchor, ...]."""
    out: list[list[Step]] = [[]]
    for step in steps:
        if step.kind in ANCHORS:
            out += [[step], []]
        else:
            out[-1].append(step)
    return out


def _rounds_agree(group: Group, fused: list[FusedStep]) -> bool:
    """Whether the lane rounds each member's rows only where its own chain does. A rounding step
    rounds its identity members as well: harmless only when their rows are rounded already (rounding
    is idempotent, and an identity leaves a value unchanged)."""
    rounded = {m.index: m.op.round_bf16 for m in group.members}
    for step in fused:
        for m in group.members:
            if m.index not in step.identity:
                rounded[m.index] = step.round
            elif step.round and not rounded[m.index]:
                return False
    return True


def _subsequence(part: list[tuple[object, ...]], whole: list[tuple[object, ...]]) -> list[int] | None:
    """Where each of `part` sits in `whole`, in order (None when it is not a subsequence)."""
    at, out = 0, []
    for item in part:
        while at < len(whole) and whole[at] != item:
            at += 1
        if at == len(whole):
            return None
        out.append(at)
        at += 1
    return out


def _merge(first: Step, steps: list[Step | None], group: Group) -> FusedStep:
    kind, key = first.kind, first.key
    roles = IDENTITY.get(kind, {})
    operands: dict[str, Operand] = {}
    identity = frozenset(m.index for m, step in zip(group.members, steps, strict=True)
                         if step is None and kind not in ANCHORS)  # fmt: skip
    for role, neutral in roles.items():
        parts = []
        for member, step in zip(group.members, steps, strict=True):
            given = dict(step.parts).get(role) if step is not None else None
            parts.append(given if given is not None else Part(member.index, constant=neutral))
        shape = SHAPES.get(kind) or (str(key[0]) if key else "scalar")
        if kind == "scale":
            shape = "scalar"
        operands[role] = Operand(shape, tuple(parts))  # type: ignore[arg-type]
    return FusedStep(kind, key, operands, identity, first.round)
