"""Ops in lowering: each DMA, Tensor-Unit pass and fill becomes a DmaOp or PassOp with its work
(lower_dma, lower_pass), its producers (read-after-write) and the buffers it reads and writes, and,
when the lowerer traces, the SemOp the executor interprets."""

from __future__ import annotations

import math

from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import Digit
from chiplore.simulator.toolchain.lower_dma import plan_dma
from chiplore.simulator.toolchain.lower_names import Frame, LayoutRef, live_clusters
from chiplore.simulator.toolchain.lower_pass import plan_pass
from chiplore.simulator.toolchain.lower_views import ViewLowering
from chiplore.simulator.toolchain.lowered import DmaOp, PartialDigit, PassOp, PassWork
from chiplore.simulator.toolchain.op_semantics import SemOp, SemStage, StageArg
from chiplore.simulator.toolchain.placement import LoweringError, Place, Tensor, View, live_positions

PASS_ENDS = {"commit", "commit_into", "to_trf", "to_vrf"}


class OpLowering(ViewLowering):
    """DMAs, passes, fills and allocations, emitted in program order."""

    def _label(self, frame: Frame, name: str) -> str:
        return self._unique(self.state.labels, f"{frame.label}{name}")

    def _emit(self, op: DmaOp | PassOp, written: Tensor, whole: bool) -> None:
        self.state.ops.append(op)
        if whole:
            self.state.writers[written.id] = [op.id]
        else:
            self.state.writers.setdefault(written.id, []).append(op.id)

    def _deps(self, reads: list[Tensor]) -> tuple[str, ...]:
        """The writers of what an op reads, first-written first, each once (linear: a tensor a loop
        writes piecewise may have thousands)."""
        return tuple(dict.fromkeys(writer for tensor in reads for writer in self.state.writers.get(tensor.id, [])))

    @staticmethod
    def _buffers(tensors: list[Tensor]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t.buffer for t in tensors if t.space != "hbm"))

    def _dma(self, method: ir.Method, frame: Frame, ttype: object, name: str | None) -> View | None:
        source = self._as_view(method.receiver, frame)
        line = method.span.line if method.span else None
        if method.name == "dma":
            destination = self._view_of(self._new_tensor(ttype, name, frame, line))
        else:
            target = next((a.value for a in method.args if a.name is None), None)
            if target is None:
                raise LoweringError("dma_into cannot be compiled as written: it needs a destination view",
                                    rule="0107")  # fmt: skip
            destination = self._as_view(target, frame)
        engines_arg, packet_arg, order_arg = method.kwarg("engines"), method.kwarg("packet"), method.kwarg("order")
        engines = None
        if isinstance(engines_arg, ir.Bracket):
            engines = tuple(int(t.value or 0) for t in engines_arg.mapping.terms)
        packet = packet_arg.value if isinstance(packet_arg, ir.Int) else None
        order = None
        if isinstance(order_arg, ir.Bracket):
            order = [d for p in self._places_in(order_arg.mapping, frame) for d in p.digits]
        plan = plan_dma(source, destination, self.axes, engines, packet, order, self.spec.auto_engines)
        what = name if method.name == "dma" else f"{destination.tensor.name}<-{source.tensor.name}"
        label = self._label(frame, str(what))
        reads = [source.tensor]
        if destination.tensor.space == "hbm":
            self.state.written.setdefault(destination.tensor.id, []).extend(plan.written)
            self.state.selected.setdefault(destination.tensor.id, set()).update(destination.gathers)
        destination.tensor.partial = _merged(destination.tensor.partial, source.tensor.partial)
        op = DmaOp(
            id=label, label=label, line=line, dma_kind=plan.kind, bytes=plan.bytes, packet_bytes=plan.packet_bytes,
            packets=plan.packets, engines=plan.engines, flows=plan.flows, clusters=plan.clusters,
            source=source.tensor.id, destination=destination.tensor.id, deps=self._deps(reads),
            reads=self._buffers(reads), writes=self._buffers([destination.tensor]),
            partial=_partial_digits(source.tensor, source.tensor.partial),
        )  # fmt: skip
        self._emit(op, destination.tensor, destination.whole and method.name == "dma")
        if self.trace is not None:
            self.trace.append(SemOp(op_id=label, kind="dma", source=source, destination=destination))
        return destination if method.name == "dma" else None

    def _places_in(self, mapping: ir.Mapping, frame: Frame) -> tuple[Place, ...]:
        saved, self._scope = self._scope, frame
        try:
            return self._places(mapping)
        finally:
            self._scope = saved

    def _pass(self, end: ir.Method, frame: Frame, ttype: object, name: str | None) -> View | None:
        chain: list[ir.Method] = []
        node: ir.Expr = end
        while isinstance(node, ir.Method):
            chain.append(node)
            node = node.receiver
        chain.reverse()
        assert isinstance(node, ir.Call)
        context = node.func
        if not node.args:
            raise LoweringError(f"{context}(..) cannot be compiled as written: it needs a source tensor", rule="0107")
        source = self._as_view(node.args[0].value, frame)
        last = chain[-1]
        if last.name not in PASS_ENDS:
            raise LoweringError(f"{last.name} cannot end a pass: the Tensor Unit order ends in commit, commit_into, "
                                "to_trf or to_vrf", rule="0120")  # fmt: skip
        line = node.span.line if node.span else None
        if ttype is None and self._scope is not None and last.name != "commit_into":
            ttype = self._scope.values.get("__returns__")
        saved, self._scope = self._scope, frame
        try:
            plan = plan_pass(context, source, tuple(chain), self.axes, self._mapping_arg,
                             lambda e: self._int(e, frame))  # fmt: skip
        finally:
            self._scope = saved
        operands = [self._as_view(e, frame).tensor for e in plan.operands]
        if last.name == "commit_into":
            target = next((a.value for a in last.args if a.name is None), None)
            if target is None:
                raise LoweringError("commit_into cannot be compiled as written: it needs a destination view",
                                    rule="0107")  # fmt: skip
            destination = self._as_view(target, frame)
        elif ttype is None:
            # An untyped result keeps the source's placement, in the stream's dtype and the end's space.
            space = {"to_trf": "trf", "to_vrf": "vrf"}.get(last.name, "dm")
            if source.tensor.space == "hbm":
                raise LoweringError(f"{context}({source.tensor.name}) cannot be compiled as written: a pass reads a "
                                    "device tensor, not HBM", rule="0107")  # fmt: skip
            tensor = self._make_tensor(name, space, plan.dtype, dict(source.tensor.fields), frame, line)
            destination = View(tensor)
        else:
            destination = self._view_of(self._new_tensor(ttype, name, frame, line))
        reads = [source.tensor, *operands]
        # Partial sums flow on through every operand; a VRF operand's partial digit must also be one the
        # stream holds, or every position would combine with the same partial (E0710).
        partial, mixes = plan.partial, []
        for operand in operands:
            partial = _merged(partial, operand.partial)
        for expr in plan.vector_operands:
            operand = self._as_view(expr, frame).tensor
            mixes += _partial_digits(operand, tuple(d for d in operand.partial if not _holds(source.tensor, d)))
        destination.tensor.partial = _merged(() if destination.whole else destination.tensor.partial, partial)
        clusters = live_clusters(source, self.axes)
        label = self._label(frame, name or f"{destination.tensor.name}<-{context}")
        op = PassOp(
            id=label, label=label, line=line, context=context,  # type: ignore[arg-type]
            clusters=clusters, live_slices=live_positions(source.tensor.places("slice"), source.constraints(),
                                                          self.axes),
            work=plan.work, shape=plan.shape, sources=tuple(t.id for t in reads), destination=destination.tensor.id,
            deps=self._deps(reads), reads=self._buffers(reads), writes=self._buffers([destination.tensor]),
            mixes_partial=tuple(mixes),
        )  # fmt: skip
        self._emit(op, destination.tensor, destination.whole and last.name != "commit_into")
        if self.trace is not None:
            saved, self._scope = self._scope, frame
            try:
                stages = tuple(self._resolve_stage(stage, frame) for stage in chain)
            finally:
                self._scope = saved
            self.trace.append(SemOp(op_id=label, kind="pass", source=source, destination=destination, stages=stages,
                                    context=context))  # fmt: skip
        return destination if last.name != "commit_into" else None

    def _resolve_stage(self, stage: ir.Method | ir.Call, frame: Frame) -> SemStage:
        name = stage.name if isinstance(stage, ir.Method) else stage.func
        args: list[StageArg] = []
        for arg in stage.args:
            if name == "commit_into" and arg.name is None:
                continue  # the destination view is the op's destination
            args.append(self._resolve_arg(arg, frame))
        return SemStage(name=name, args=tuple(args))

    def _resolve_arg(self, arg: ir.Arg, frame: Frame) -> StageArg:
        value = arg.value
        if isinstance(value, ir.Bracket):
            return StageArg(arg.name, places=self._places(value.mapping))
        if isinstance(value, ir.Float):
            return StageArg(arg.name, number=value.value)
        if isinstance(value, ir.Neg) and isinstance(value.operand, ir.Float):  # `min(-1.0)`
            return StageArg(arg.name, number=-value.operand.value)
        if isinstance(value, ir.Int | ir.BinOp | ir.Neg):
            return StageArg(arg.name, number=float(self._int(value, frame)))
        if isinstance(value, ir.Call):
            return StageArg(arg.name, call=self._resolve_stage(value, frame))
        if isinstance(value, ir.Name):
            bound = frame.values.get(value.id)
            if isinstance(bound, View):
                return StageArg(arg.name, view=bound)
            if isinstance(bound, int):
                return StageArg(arg.name, number=float(bound))
            if (arg.name == "slice" and value.id in self.env.layouts) or isinstance(bound, LayoutRef):
                return StageArg(arg.name, places=self._mapping_arg(value))
            return StageArg(arg.name, word=value.id)
        if isinstance(value, ir.Method):
            return StageArg(arg.name, view=self._as_view(value, frame))
        raise LoweringError(f"the argument {arg.name or ''} cannot be compiled as written: a {arg.value.kind} is "
                            "not a tensor, number, word or mapping", rule="0107")  # fmt: skip

    def _fill(self, method: ir.Method, frame: Frame) -> None:
        view = self._as_view(method.receiver, frame)
        constant = next((a.value for a in method.args if a.name is None), None)
        value = float(constant.value) if isinstance(constant, ir.Int | ir.Float) else 0.0
        self._fill_view(view, frame, method.span.line if method.span else None, value)

    def _fill_view(self, view: View, frame: Frame, line: int | None, value: float = 0.0) -> None:
        tensor = view.tensor
        elems = live_positions(tensor.places("elem"), view.constraints(), self.axes)
        flits = max(1, math.ceil(elems * ir.DTYPE_BYTES[tensor.dtype] / 32))
        label = self._label(frame, f"{tensor.name}.fill")
        op = PassOp(
            id=label, label=label, line=line, context="main", clusters=live_clusters(view, self.axes),
            live_slices=live_positions(tensor.places("slice"), view.constraints(), self.axes),
            work=PassWork(vector_flits=flits, flits=flits, commit_writes=flits), sources=(), destination=tensor.id,
            deps=(), reads=(), writes=self._buffers([tensor]),
        )  # fmt: skip
        self._emit(op, tensor, False)
        if self.trace is not None:
            self.trace.append(SemOp(op_id=label, kind="fill", source=None, destination=view, value=value))

    def _allocate(self, call: ir.PathCall, frame: Frame, ttype: object, name: str | None) -> View:
        if call.path != "dm" or call.func not in ("empty", "zeros"):
            raise LoweringError(f"{call.path}::{call.func} cannot be compiled as written: this toolchain's lowerer "
                                "places tensors by their layout only (dm::empty, dm::zeros)", rule="0107")  # fmt: skip
        line = call.span.line if call.span else None
        view = self._view_of(self._new_tensor(ttype, name, frame, line))
        if call.func == "zeros":
            self._fill_view(view, frame, line)
        return view


def _merged(first: tuple[Digit, ...], second: tuple[Digit, ...]) -> tuple[Digit, ...]:
    return tuple(dict.fromkeys(first + second))


def _holds(tensor: Tensor, digit: Digit) -> bool:
    """Does the tensor place (part of) this digit, so each position sees its own partial?"""
    placed = [d for places in tensor.fields.values() for p in places for d in p.digits] + list(tensor.hbm)
    return any(d.axis == digit.axis and d.stride < digit.limit and digit.stride < d.limit for d in placed)


def _partial_digits(tensor: Tensor, digits: tuple[Digit, ...]) -> tuple[PartialDigit, ...]:
    return tuple(PartialDigit(tensor=tensor.name, digit=str(d), axis=d.axis) for d in digits)
