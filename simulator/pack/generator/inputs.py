"""A group's input vector: computed on its k-leaders (each holds one k-group's columns, in both
clusters), narrowed to bf16 and brought to every row-group's TRF.

The input is a kernel input, ops on kernel inputs (an RMS norm: sums all-reduced over the k-leaders;
products with other inputs), or the previous group's rows (copied DM to DM onto the k-leaders). It
reaches the TRFs through the switch (a broadcast over the row-groups: ring time, no ingress) or by a
replicating DMA (ingress bytes, no ring), as the design says.
"""

from __future__ import annotations

from chiplore.core.ops import Activation, Elementwise, RmsNorm, Scale, Store
from chiplore.simulator.pack.generator.frame import Frame, FrameEmitter, Value
from chiplore.simulator.pack.generator.geometry import Geometry, digit
from chiplore.simulator.pack.generator.graph import Group, Member, Unsupported, activation_ops
from chiplore.simulator.pack.generator.operands import input_vrf
from chiplore.simulator.pack.generator.program import float_text
from chiplore.simulator.pack.generator.signature import Signature


def input_frame(geo: Geometry) -> Frame:
    g = geo.index
    return Frame(
        layout=f"KIn{g}", elem=geo.k_elem(), time=geo.k_digit(8), packet=digit(geo.k_axis, 1, 8, geo.k),
        elements=geo.width, length=geo.k, sum_group=geo.k_term() if geo.kgroups > 1 else None,
        sum_layout=f"KIn{g}", cross=False, every_layout=f"KIn{g}", tile_axis=geo.k_axis,
    )  # fmt: skip


class Inputs:
    def __init__(self, e: FrameEmitter, sig: Signature, group: Group, geo: Geometry, broadcast: bool,
                 chained: tuple[Value, Member | None, Geometry] | None) -> None:  # fmt: skip
        self.e, self.sig, self.group, self.geo = e, sig, group, geo
        self.broadcast = broadcast  # True: the switch fills the row-groups; False: a replicating DMA
        self.chained = chained
        self.frame = input_frame(geo)
        self.values: dict[str, Value] = {}

    def run(self) -> str:
        """Write the input's passes; the TRF the contraction reads."""
        g, geo = self.group.index, self.geo
        trf = self.e.p.name(f"x{g}")
        rep = f"XRep{g}"
        trf_type = f"trf<bf16>{{..{rep}, lane: [1], elem: [{geo.k_elem()}]}}"
        packet = 16 if geo.width % 16 == 0 else 8  # 32 B a read, or 16 where K is no multiple of 16
        fetch = f".fetch(time = [{geo.k_digit(packet)}], packet = [{digit(geo.k_axis, 1, packet, geo.k)}])"
        source = self._source(rep)
        if source.startswith("="):  # already replicated in DM by the load itself
            self.e.p.emit(f"    let {trf}: {trf_type} = sub({source[1:]}){fetch}.to_trf();\n")
            return trf
        if self.broadcast:
            slices = self.e.p.layouts[rep].split("slice: ")[1].rstrip(" }")
            # the row-groups hold the first slices of the cluster: where they are fewer than its padding,
            # a ring of the slices the copies reach serves them (unstated, the ring spans every slice)
            reach = geo.groups * geo.kgroups
            ring = f", ring = {reach}" if geo.groups < geo.pad else ""
            self.e.p.emit(f"    let {trf}: {trf_type} = main({source})\n        {fetch}\n"
                          f"        .switch(broadcast, slice = {slices}{ring})\n        .to_trf();\n")  # fmt: skip
            return trf
        copy = self.e.p.name(f"x{g}_rep")
        self.e.p.emit(f"    let {copy}: dm<bf16>{{..{rep}, elem: [{geo.k_elem()}]}} = "
                      f"{source}.dma(engines = {self.e.p.engines.copy()});\n")  # fmt: skip
        self.e.p.copied_input = True
        self.e.p.dm(geo.width, "bf16")
        self.e.p.emit(f"    let {trf}: {trf_type} = sub({copy}){fetch}.to_trf();\n")
        return trf

    def _source(self, rep: str) -> str:
        """The bf16 input on the k-leaders (a DM tensor), or `=name` when it was loaded replicated."""
        geo = self.geo
        stem = f"x{self.group.index}_k"
        if self.chained is not None:
            name = self.e.p.name(stem)
            value, member, producer = self.chained
            offset = member.offset if member is not None else 0
            view = f"{value.tensor}{value.view}"
            if geo.k_axis != producer.R:
                view += f".rename({producer.R}, {geo.k_axis}, {-offset})"
            # Onto the k-leaders of every cluster first (a gather of small row runs, once per cluster);
            # the switch or a replicating copy of each cluster's own leaders fills the row-groups.
            engines = self.e.p.engines.spare()
            self.e.p.emit(f"    let {name}: dm<bf16>{{..KIn{self.group.index}, elem: [{geo.k_elem()}]}} = "
                          f"{view}.dma(engines = {engines});\n")  # fmt: skip
            self.e.p.dm(geo.width, "bf16")
            return name
        params = {p.name for p in self.sig.params}
        if self.group.input in params and self.sig.param(self.group.input).dtype == "bf16":
            name = self.e.p.name(stem)
            layout = rep if not self.broadcast else f"KIn{self.group.index}"
            param = self.sig.param(self.group.input)
            self.e.p.emit(f"    let {name}: dm<bf16>{{..{layout}, elem: [{geo.k_elem()}]}} = {param.name}"
                          f".rename({self.sig.axis_of(param.dims)}, {geo.k_axis}, 0)"
                          f".dma(engines = {self._engines()});\n",
                          early=True)  # fmt: skip
            self.e.p.dm(geo.width, "bf16")
            return f"={name}" if not self.broadcast else name
        value = self._lower()
        self.e.commit(value, "bf16", stem=stem)
        return str(value.tensor)

    def _engines(self) -> str:
        return self.e.p.aux_engines()

    def _load(self, param: str) -> Value:
        p = self.sig.param(param)
        name = self.e.p.name(f"{param}_k")
        self.e.p.emit(f"    let {name}: dm<{p.dtype}>{{..{self.frame.layout}, elem: [{self.frame.elem}]}} = {param}"
                      f".rename({self.sig.axis_of(p.dims)}, {self.geo.k_axis}, 0).dma(engines = {self._engines()});\n",
                      early=True)  # fmt: skip
        self.e.p.dm(self.frame.elements, p.dtype)
        return Value(self.frame, tensor=name, dtype=p.dtype, uses=0)

    def _value(self, name: str) -> Value:
        if name not in self.values:
            if name not in {p.name for p in self.sig.params}:
                raise Unsupported(f"{name} is not an input of group {self.group.index}")
            self.values[name] = self._load(name)
        return self.values[name]

    def _lower(self) -> Value:
        ops = self.group.input_ops
        readers: dict[str, int] = {self.group.input: 1}
        for op in (*ops, *self.group.input_sinks):
            for name in op.reads():
                readers[name] = readers.get(name, 0) + 1
        params = {p.name for p in self.sig.params}
        for op in ops:
            out = str(op.writes())
            if isinstance(op, RmsNorm):
                value = self._value(op.input)
                value.uses = readers.get(op.input, 1)
                if not self.group.weight_only_norm:
                    inverse = self.e.inverse_rms(value, op.eps, stem="norm")
                    value = self.e.apply(value, [f"mul(vrf = {inverse})"], (inverse,))
                if op.weight:
                    vrf = input_vrf(self.e, self.sig, self.frame, op.weight, self.geo.k_axis, self._engines())
                    value = self.e.apply(value, [f"mul(vrf = {vrf})"], (vrf,))
            elif isinstance(op, Scale):
                value = self.e.apply(self._value(op.input), [f"mul({float_text(op.by)})"])
            elif isinstance(op, Activation):
                value = self.e.apply(self._value(op.input), list(activation_ops(op)))
            elif isinstance(op, Elementwise):
                value = self._elementwise(op, params)
            else:
                raise Unsupported(f"{op.op} {out} on the input side of group {self.group.index}")
            fresh = not any(value is other for other in self.values.values())
            value.uses = readers.get(out, 0)
            # an op that changed nothing (a norm whose scalar drops, without weight) is its input, which
            # other ops may read unrounded: the copy for the TRF rounds it for the contraction
            if fresh:
                value.narrow = op.round_bf16
            self.values[out] = value
            for sink in self.group.input_sinks:
                if sink.input == out:
                    self._store(value, sink)
        return self._value(self.group.input)  # an input of another dtype than bf16 is narrowed for the TRF

    def _store(self, value: Value, sink: Store) -> None:
        """Write an input-side value to an output (from the k-leaders of cluster 0 and 1 alike)."""
        target = self.sig.param(sink.to)
        dtype = target.dtype if target.dtype in ("bf16", "f32") else "bf16"
        if value.uses > 1 or dtype == "f32":  # later readers read it unrounded
            self.e.commit(value, "f32", stem=f"{sink.input}_k")
        stored = value
        if dtype != value.dtype or value.pending:
            stored = value if value.uses <= 1 else Value(self.frame, tensor=value.tensor, dtype=value.dtype, uses=1)
            self.e.commit(stored, dtype, stem="kept", exact=True)
        value.uses -= 1
        where = f"{target.name}.rename({self.sig.axis_of(target.dims)}, {self.geo.k_axis}, 0)"
        self.e.p.store(stored.tensor, where)

    def _elementwise(self, op: Elementwise, params: set[str]) -> Value:
        a, b = op.a, op.b
        if a in params and b not in params:
            a, b = b, a
        value = self._value(a)
        if self.sig.elements(b) == 1 if b in params else False:
            dtype = self.sig.param(b).dtype
            pad = 16 if dtype == "bf16" else 8
            name = self.e.p.name(f"{b}_k")
            self.e.p.emit(f"    let {name}: dm<{dtype}>{{..{self.frame.layout}, elem: [1 # {pad}]}} = "
                          f"{b}.dma(engines = {self._engines()});\n", early=True)  # fmt: skip
            vrf = self.e.scalar_vrf(name, dtype, self.frame.layout, early=True)
        elif b in params:
            vrf = input_vrf(self.e, self.sig, self.frame, b, self.geo.k_axis, self._engines())
        else:
            vrf = self.e.vrf(self._value(b), stem="held", context="main")
        return self.e.apply(value, [f"{op.op}(vrf = {vrf})"], (vrf,))
