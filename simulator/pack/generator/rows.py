"""The ops on a group's output rows, written as passes on its k-group leaders.

The accumulators are finished by the inter-slice reducer (split-K) in the first pass, which also
applies the row, tensor and global scales. Then either one fused lane runs every member's chain
(`lanes.fuse`), or each member's ops (or, when members are stacked, the whole group's) are lowered one
by one: element-wise ops extend the pending pass, norms take their sums (across row-groups by the
all-reduce, across clusters over the bridge or by a small DMA), per-head ops run on whole heads of
a slice, RoPE reads the value rolled by half a head. Stores and cache writes leave from the leaders;
a value the next group reads is committed in bf16 for it.
"""

from __future__ import annotations

from chiplore.core.ops import Activation, CacheWrite, Elementwise, HeadNorm, MatVec, RmsNorm, Rope, Scale, Store
from chiplore.core.ops import Op as GraphOp
from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.pack.generator.frame import Frame, FrameEmitter, Pass, Value
from chiplore.simulator.pack.generator.geometry import Geometry
from chiplore.simulator.pack.generator.graph import Analysis, Group, Member, Unsupported, activation_ops
from chiplore.simulator.pack.generator.lanes import FusedStep, Lane, fuse
from chiplore.simulator.pack.generator.operands import Operand, Part, RowOperands
from chiplore.simulator.pack.generator.program import dtype_bytes, float_text
from chiplore.simulator.pack.generator.signature import Signature


class Rows:
    def __init__(self, e: FrameEmitter, sig: Signature, analysis: Analysis, group: Group, geo: Geometry,
                 frame: Frame, operands: RowOperands, accumulators: dict[int, str],
                 stage: bool = False) -> None:  # fmt: skip
        self.e, self.sig, self.a, self.group, self.geo, self.frame = e, sig, analysis, group, geo, frame
        self.stage = stage  # a store whose slices hold partial HBM units gathers its rows into whole ones first
        self.operands = operands
        self.accumulators = accumulators  # member index (or -1 for the shared one) -> DM tensor
        self.values: dict[str, Value] = {}
        self.exports: dict[str, tuple[Value, Member | None]] = {}
        self.readers: dict[str, int] = {}
        for op in group.row_ops:
            for name in op.reads():
                self.readers[name] = self.readers.get(name, 0) + 1
        for name, _ in group.exports:
            self.readers[name] = self.readers.get(name, 0) + 1

    # ---- the group ----------------------------------------------------------------------------

    def run(self) -> dict[str, tuple[Value, Member | None]]:
        """Write every row op; the values other groups read, committed in bf16 (with their member)."""
        group = self.group
        if group.stacked:
            for member in group.members:
                self.values[member.out] = self._root((member,), self.accumulators[member.index],
                                                     self.readers.get(member.out, 0))  # fmt: skip
                self._export(member.out, member, "")
            self._lower(group.row_ops, None)
            return self.exports
        exported = {name for name, _ in group.exports}
        # a member's own rows read by the next group (a matvec of a matvec) leave before any fused lane
        lane = fuse(group, self.a) if not exported & {m.out for m in group.members} else None
        readers = 1 if lane is not None or len(group.members) == 1 else len(group.members)
        if len(group.members) == 1:
            readers = self.readers.get(group.members[0].out, 0)
        root = self._root(group.members, self.accumulators[-1], readers)
        if lane is not None:
            self._lane(lane, root)
            return self.exports
        rounded: Value | None = None  # the rows in bf16, for the members that round when others do not
        for member in group.members:
            view = self.operands.tile((member,))
            own = member.op.round_bf16 and not root.narrow and root.dtype != "bf16"  # rounded, unlike others
            if view or own:
                source = self.e.commit(root, "f32", stem="rows")
                if own:  # a view is read in the whole tensor's layout: the rounded rows are a whole copy
                    rounded = rounded or self.e.round(Value(self.frame, root.tensor, root.dtype), stem="rows")
                    source = rounded
                self.values[member.out] = Value(self.frame, source.tensor, source.dtype, view,
                                                uses=self.readers.get(member.out, 0))  # fmt: skip
            else:
                self.values[member.out] = root
            self._export(member.out, member, view)
            self._lower([op for op in group.row_ops if self._member(op) == member.index], member)
        return self.exports

    def _export(self, name: str, member: Member, view: str) -> None:
        """A member's rows that the next group reads as they are (no row op between the two matvecs)."""
        if any(export == name for export, _ in self.group.exports):
            self._sink(name, self.values[name], member, view)

    def _member(self, op: GraphOp) -> int | None:
        for name in op.reads():
            if name in self.a.member_of and self.a.group_of.get(name) == self.group.index:
                return self.a.member_of[name]
        return None

    def _root(self, members: tuple[Member, ...], accumulator: str, readers: int) -> Value:
        """The first pass over the accumulators: the split-K sum, then the scales of each member."""
        reducer = ""
        if self.geo.kgroups > 1:
            reducer = f"\n        .reduce_slices(add, group = [{self.geo.k_term()}], result = leader)"
        pass_ = Pass(accumulator, "f32", self.frame.time, self.frame.packet, reducer=reducer)
        value = Value(self.frame, pass_=pass_, uses=1)
        roles: dict[str, list[Part]] = {"row": [], "tensor": [], "global": []}
        for m in members:
            op: MatVec = m.op
            kind = op.scale_kind if op.scale_kind in ("row", "tensor") else None
            roles["row"].append(Part(m.index, param=op.scale) if kind == "row" else Part(m.index))
            roles["tensor"].append(Part(m.index, param=op.scale) if kind == "tensor" else Part(m.index))
            roles["global"].append(Part(m.index, param=op.global_scale) if op.global_scale else Part(m.index))
        for role, parts in roles.items():
            shape = "row" if role == "row" else "scalar"
            value = self._by("mul", value, Operand(shape, tuple(parts)), members)  # type: ignore[arg-type]
        value.uses = max(readers, 1)
        value.narrow = all(m.op.round_bf16 for m in members)  # each member's rows are rounded on their own otherwise
        return value

    # ---- operands -------------------------------------------------------------------------------

    def _by(self, kind: str, value: Value, operand: Operand, members: tuple[Member, ...]) -> Value:
        """`value` multiplied by (or plus) the operand; nothing when the operand is the identity."""
        constant = operand.constant
        identity = 1.0 if kind in ("mul", "scale") else 0.0
        if constant is not None:
            if constant == identity:
                return value
            return self.e.apply(value, [f"{'add' if kind == 'add' else 'mul'}({float_text(constant)})"])
        vrf = self.operands.vrf(_uniform(operand), members)
        return self.e.apply(value, [f"{'add' if kind == 'add' else 'mul'}(vrf = {vrf})"], (vrf,))

    # ---- a fused lane ---------------------------------------------------------------------------

    def _lane(self, lane: Lane, value: Value) -> None:
        sinks = list(lane.sinks)
        for done in range(len(lane.steps) + 1):
            here = [s for s in sinks if s[0] == done]
            if here:
                later = done < len(lane.steps)
                value.uses += len(here) - (0 if later else 1)
                for _, member, sink in here:
                    self._sink(sink, value, member, self.operands.tile((member,)))
            if done < len(lane.steps):
                value = self._fused(lane.steps[done], value, lane.members)
                value.narrow = lane.steps[done].round

    def _fused(self, step: FusedStep, value: Value, members: tuple[Member, ...]) -> Value:
        if step.kind in ("scale", "mul", "add"):
            return self._by(step.kind, value, step.operands["by"], members)
        if step.kind == "act":
            return self.e.apply(value, list(activation_ops(Activation(op=step.key[0], input="_", out="_"))))  # type: ignore[arg-type]
        if step.kind == "head_norm":
            hd, eps = int(step.key[0]), float(step.key[1])  # type: ignore[arg-type]
            inverse = self._head_rms(value, hd, eps)
            value = self.e.apply(value, [f"mul(vrf = {inverse})"], (inverse,))
            return self._by("mul", value, step.operands["weight"], members)
        if step.kind == "rope":
            cos = self.operands.vrf(step.operands["cos"], members)
            sin = self.operands.vrf(step.operands["sin"], members)
            return self._rope(value, int(step.key[0]), cos, sin)  # type: ignore[arg-type]
        raise Unsupported(f"cannot fuse {step.kind}")

    # ---- op by op -------------------------------------------------------------------------------

    def _lower(self, ops: list[GraphOp] | tuple[GraphOp, ...], member: Member | None) -> None:
        members = (member,) if member is not None else self.group.members
        view = self.operands.tile(members) if member is not None else ""
        for op in ops:
            if isinstance(op, Store | CacheWrite):
                self._sink(op, self._value(op.input), member or self.group.members[0], view)
                continue
            out = str(op.writes())
            if isinstance(op, Scale):
                result = self.e.apply(self._value(op.input), [f"mul({float_text(op.by)})"])
            elif isinstance(op, Activation):
                result = self.e.apply(self._value(op.input), list(activation_ops(op)))
            elif isinstance(op, Elementwise):
                result = self._elementwise(op, members)
            elif isinstance(op, RmsNorm):
                value = self._value(op.input)
                if member is not None and len(self.group.members) > 1:
                    raise Unsupported(f"rms_norm {op.out} over one of several members' rows")
                inverse = self.e.inverse_rms(value, op.eps)
                result = self.e.apply(value, [f"mul(vrf = {inverse})"], (inverse,))
                result = self._weight(result, op.weight, "row", members)
            elif isinstance(op, HeadNorm):
                value = self._value(op.input)
                inverse = self._head_rms(value, op.head_dim, op.eps)
                result = self.e.apply(value, [f"mul(vrf = {inverse})"], (inverse,))
                result = self._weight(result, op.weight, "head", members)
            elif isinstance(op, Rope):
                parts = tuple(Part(m.index, param=op.cos, position=op.position) for m in members)
                cos = self.operands.vrf(Operand("table", parts), members)
                parts = tuple(Part(m.index, param=op.sin, position=op.position) for m in members)
                sin = self.operands.vrf(Operand("table", parts), members)
                result = self._rope(self._value(op.input), op.head_dim, cos, sin)
            else:
                raise Unsupported(f"{op.op} on the rows of group {self.group.index}")
            result.uses = self.readers.get(out, 0)
            result.narrow = op.round_bf16
            self.values[out] = result
            for name, _ in self.group.exports:
                if name == out:
                    self._sink(name, result, member, view)

    def _weight(self, value: Value, weight: str | None, shape: str, members: tuple[Member, ...]) -> Value:
        if weight is None:
            return value
        return self._by("mul", value, Operand(shape, tuple(Part(m.index, param=weight) for m in members)), members)  # type: ignore[arg-type]

    def _value(self, name: str) -> Value:
        if name in self.values:
            return self.values[name]
        raise Unsupported(f"{name} is not a row value of group {self.group.index} (computed from inputs only?)")

    def _elementwise(self, op: Elementwise, members: tuple[Member, ...]) -> Value:
        rows = [n for n in (op.a, op.b) if n in self.values]
        if len(rows) == 2:
            # the one with the longer pending chain goes to a register (it is committed either way)
            a, b = self.values[op.a], self.values[op.b]
            stream, held = (a, b) if _chain(a) <= _chain(b) else (b, a)
            vrf = self.e.vrf(held, stem="held", context="main")
            return self.e.apply(stream, [f"{op.op}(vrf = {vrf})"], (vrf,))
        if not rows:
            raise Unsupported(f"{op.op} {op.out} reads no row value")
        value = self.values[rows[0]]
        other = op.b if rows[0] == op.a else op.a
        if self.operands.earlier_value(other) is not None:  # an earlier group's rows (y0 + B(A x))
            operand = Operand("row", tuple(Part(m.index, earlier=other) for m in members))
            return self._by(op.op, value, operand, members)
        shape = "scalar" if self.a.lengths.get(other) == 1 else "row"
        if other not in {p.name for p in self.sig.params}:
            raise Unsupported(f"{op.op} {op.out}: {other} is computed from inputs, not an input itself")
        operand = Operand(shape, tuple(Part(m.index, param=other) for m in members))  # type: ignore[arg-type]
        return self._by(op.op, value, operand, members)

    # ---- per-head ops ----------------------------------------------------------------------------

    def _head_rms(self, value: Value, hd: int, eps: float) -> str:
        """A VRF of 1 / sqrt(mean(head^2) + eps) for every head of the value (whole heads per slice)."""
        geo, r = self.geo, self.geo.rows_per_slice
        finish = [f"mul({float_text(1 / hd)})", f"add({float_text(eps)})", "rsqrt()"]
        if r == hd:
            sums, elem, tail, packet = ["square()", "sum_all()"], "1 # 8", "", "1 # 8"
        else:
            heads = geo.row_digit(hd)
            sums = ["square()", f"sum_time([{geo.row_mod(hd)} / 8])", "sum_packet()"]
            elem, packet = heads, heads
            tail = f"\n        .transpose(time = [1], packet = [{heads}])"
        if len(sums) + len(finish) > self.e.limit:
            raise Unsupported("the vector chain limit is too short for a head norm in one pass")
        source = self.e.read(value, len(sums) + len(finish), consume=False)
        source.ops.extend(sums + finish)
        name = self.e.p.name("heads_d")
        self.e.p.emit(f"    let {name}: dm<f32>{{..{self.frame.layout}, elem: [{elem}]}} = "
                      f"{self.e.render(source)}{tail}\n        .commit();\n")  # fmt: skip
        for vrf in source.vrfs:
            self.e.p.vrf_used(vrf)
        self.e.p.dm(8, "f32")
        vrf = self.e.p.name("heads")
        self.e.p.emit(f"    let {vrf}: vrf<f32>{{..{self.frame.layout}, elem: [{elem}]}} = main({name})"
                      f".fetch(time = [1], packet = [{packet}]).to_vrf();\n")  # fmt: skip
        self.e.p.vrf_defined(vrf, 8)
        return vrf

    def _rope(self, value: Value, hd: int, cos: str, sin: str) -> Value:
        """value * cos + swap_halves(value) * sin, per head (the sin table carries the sign)."""
        value.uses += 1  # the rolled read
        frame = self.frame
        # one member's rows of a shared tensor: a copy of its own, so the rotation's passes and registers
        # read whole tensors
        if not value.pending and value.view and not value.own:
            name = self.e.p.name("pre_rope")
            self.e.p.emit(f"    let {name}: dm<f32>{{..{frame.layout}, elem: [{frame.elem}]}} = main({value.ref()})\n"
                          f"        {self.e.fetch_text(self.e.start(value))}\n        .commit();\n")  # fmt: skip
            self.e.p.dm(frame.elements, "f32")
            value.tensor, value.view, value.dtype = name, "", "f32"
        self.e.commit(value, "f32", stem="pre_rope")
        if value.own:  # a tensor of this member's rows alone (rounded through its view): read whole from here on,
            value.view, value.own = "", False  # its other rows are never stored
        value.uses -= 1
        turned = self.e.p.name("turned_d")
        roll = f"{value.ref()}.roll({self.geo.row_mod(hd)} / {hd // 2}, 1)"
        fetch = self.e.fetch_text(Pass(roll, value.dtype, frame.time, frame.packet))
        self.e.p.emit(f"    let {turned}: dm<f32>{{..{frame.layout}, elem: [{frame.elem}]}} = main({roll})\n"
                      f"        {fetch}\n"
                      f"        .vector(mul(vrf = {sin}))\n        .commit();\n")  # fmt: skip
        self.e.p.vrf_used(sin)
        self.e.p.dm(frame.elements, "f32")
        turned_v = self.e.vrf(Value(frame, tensor=turned, view=value.view, uses=1), stem="turned", context="main")
        return self.e.apply(value, [f"mul(vrf = {cos})", f"add(vrf = {turned_v})"], (cos, turned_v))

    # ---- leaving the rows --------------------------------------------------------------------------

    def _sink(self, sink: GraphOp | str, value: Value, member: Member | None, view: str) -> None:
        if isinstance(sink, str):  # a value the next group reads: its input (bf16), or an operand of its rows (f32)
            dtype = "f32" if sink in self.group.operand_exports else "bf16"
            self.e.commit(value, dtype, stem=f"{sink}_rows")
            value.uses -= 1
            self.exports[sink] = (Value(self.frame, value.tensor, dtype, value.view or view), member)
            return
        target = self.sig.param(sink.to if isinstance(sink, Store) else sink.cache)
        self.e.commit(value, target.dtype if target.dtype in ("bf16", "f32") else "bf16", stem="out", exact=True)
        value.uses -= 1
        m = member or self.group.members[0]
        dims = target.dims
        if isinstance(sink, CacheWrite):
            first = dims[0].axis
            where = f"{target.name}.at({first} = {sink.position}).rename({self.sig.axis_of(dims[1:])}, "
        else:
            where = f"{target.name}.rename({self.sig.axis_of(dims)}, "
        clusters = self.operands.clusters((m,))
        pieces = self.operands.pieces((m,)) if member is not None else [value.view]
        # only a group's whole rows are gathered (a member's among others' are written where they lie)
        staged = self._staged(value) if pieces == [""] and len(self.group.members) == 1 else ""
        for piece in pieces:
            self.e.p.store(f"{value.tensor}{piece}", f"{where}{self.geo.R}, {m.offset})", clusters, staged)

    def _staged(self, value: Value) -> str:
        """The type of the tensor a stored value is gathered into first (`stage`), or "" for none: when
        its slices' rows end in partial HBM units, each of which the store would read, modify and write."""
        if not self.stage or value.frame.elements != self.geo.rows_per_slice:
            return ""
        row_bytes = int(dtype_bytes(value.dtype))
        staging = self.geo.staging(row_bytes, vocab.hbm_unit(self.e.facts), vocab.MAX_PACKET) if row_bytes else None
        if staging is None:
            return ""
        g = self.geo.index
        self.e.p.layouts[f"Stage{g}"] = staging.layout
        self.e.p.dm(staging.rows, value.dtype)
        return f"dm<{value.dtype}>{{..Stage{g}, elem: [{staging.elem}]}}"


def _chain(value: Value) -> int:
    return value.pass_.chain if value.pass_ is not None else -1


def _uniform(operand: Operand) -> Operand:
    """One part when every part is the same input (a scalar loaded once, a vector over all rows)."""
    params = {(p.param, p.position) for p in operand.parts}
    if len(params) == 1 and operand.parts[0].param is not None and operand.shape == "scalar":
        return Operand(operand.shape, operand.parts[:1])
    return operand
