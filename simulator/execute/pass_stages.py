"""The stages of a Tensor-Unit pass on its stream: casts, the contraction against a TRF operand,
vector ops (binary, transcendental, stash, sums) and the slice and cluster reducers."""

from __future__ import annotations

import numpy as np

from chiplore.simulator.execute.factored import Array, ExecutionError, apply, contract, unary
from chiplore.simulator.execute.number_formats import holds_exactly, round_to
from chiplore.simulator.execute.pass_stream import Stream
from chiplore.simulator.execute.stored_tensor import Index
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.lower_dma import _aligned
from chiplore.simulator.toolchain.op_semantics import SemStage
from chiplore.simulator.toolchain.placement import View

TRANSCENDENTAL = {
    "exp": np.exp, "erf": None, "tanh": np.tanh, "rsqrt": lambda x: 1.0 / np.sqrt(x), "recip": lambda x: 1.0 / x,
    "square": np.square, "neg": np.negative,
}  # fmt: skip
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum, "min": np.minimum}


class PassStages:
    """Applies a pass's stages to its stream; the executor (chiplore.simulator.execute.executor) reads the operands."""

    axes: AxisSystem

    def read(self, view: View, index: Index) -> Array:
        raise NotImplementedError  # the executor reads tensors through views

    def _stage(self, stage: SemStage, stream: Stream, source: View, spatial: set[Digit]) -> None:
        name = stage.name
        target_word = next((a.word for a in stage.positional() if a.word), None)
        if name in ("decode", "lut", "cast", "widen", "narrow") and target_word:
            stream.carried = target_word
        elif name in ("contract", "reduce_slices", "allreduce_slices", "reduce_clusters"):
            stream.carried = "i32" if stream.carried in ("i8", "i32") else "f32"
        if name == "fetch":
            packet = stage.kwarg("packet")
            stream.packet = [d for p in (packet.places or ()) for d in p.digits] if packet else []
        elif name in ("cast", "narrow"):
            target = next((a.word for a in stage.positional() if a.word), None)
            if target in ("bf16", "f8e4m3", "i8") and not (stream.dtype and holds_exactly(target, stream.dtype)):
                stream.data = unary(lambda v, t=target: round_to(v, t), stream.data)
                stream.dtype = target
        elif name == "contract":
            self._contract(stage, stream)
            stream.dtype = None
        elif name == "vector":
            stream.dtype = None
            for arg in stage.args:
                if arg.call is not None:
                    self._vector(arg.call, stream, spatial)
        elif name in ("reduce_slices", "allreduce_slices"):
            stream.dtype = None
            group = stage.kwarg("group")
            digits = [d for p in (group.places or ()) for d in p.digits] if group else []
            op_word = next((a.word for a in stage.positional() if a.word), "add")
            stream.reduce([not any(d.within(g) for g in digits) for d, _, _ in stream.dims], op_word or "add")
        elif name == "reduce_clusters":
            stream.dtype = None
            op_word = next((a.word for a in stage.positional() if a.word), "add")
            stream.reduce([f != "cluster" for _, _, f in stream.dims], op_word or "add")
        # fetch order, decode/widen (exact), switch, collect, transpose and the pass end move values only

    def _operand(self, view: View, stream: Stream) -> Array:
        """A register operand's values at the stream's elements. Operands meet the pass's source the
        way a destination does (`lower_dma._aligned`): an operand that holds only a tile's extent of
        a digit (`A % 8 = 4`) is read by position within the source's tile, one that holds the whole
        digit at the same absolute index, whatever frame the destination gave the stream."""
        index = stream.index()
        if stream.source is None or stream.frame is None:
            return self.read(view, index)
        against = _aligned(stream.source, view, self.axes)
        moved = {atom: stream.frame.shift(atom) - against.shift(atom) for atom in self.axes.atoms}
        atoms = set(index) | {atom for atom, amount in moved.items() if amount}
        index = {atom: index.get(atom, np.int64(0)) + moved[atom] for atom in atoms}
        return self.read(_aligned(view, stream.source, self.axes), index)

    def _contract(self, stage: SemStage, stream: Stream) -> None:
        operand = stage.kwarg("trf")
        if operand is None or operand.view is None:
            raise ExecutionError("contract needs a TRF operand")
        trf = self._operand(operand.view, stream)
        reduce = stage.kwarg("reduce")
        named = [d for p in (reduce.places or ()) for d in p.digits] if reduce else []
        # The contraction reduces what the stream carries (time and packet); a reduced axis's digits on
        # slices or clusters stay, as partial sums, until a reducer or a later pass adds them up.
        keep = [f != "elem" or not any(d.within(n) for n in named) for d, _, f in stream.dims]
        axes = tuple(i for i, k in enumerate(keep) if not k)
        if axes:  # products exact in f64, summed in f64
            stream.data = contract(stream.data, trf, axes)
        else:
            stream.data = apply(lambda a, b: np.multiply(a, b, dtype=np.float64).astype(np.float32), stream.data, trf)
        stream.dims = [d for d, k in zip(stream.dims, keep, strict=True) if k]
        fold = stage.kwarg("fold")
        if fold is not None and fold.places:
            stream.packet = [d for p in fold.places for d in p.digits]
        else:
            stream.packet = [d for d in stream.packet if not any(d.within(n) for n in named)]

    def _vector(self, call: SemStage, stream: Stream, spatial: set[Digit]) -> None:
        for arg in call.args:
            if arg.name in ("when", "enable") and arg.number is not None and arg.number == 0:
                return
        func = call.name
        operand: Array | np.float32 | None = None
        for arg in call.args:
            if arg.name == "vrf" and arg.view is not None:
                operand = self._operand(arg.view, stream)
            elif arg.name is None and arg.number is not None:
                operand = np.float32(arg.number)
            elif arg.name is None and arg.word == "stash":
                operand = stream.stash
        with np.errstate(all="ignore"):  # garbage in (a missing cast) may overflow: NaN/inf are the answer
            self._apply(func, operand, call, stream, spatial)

    def _apply(self, func: str, operand: object, call: SemStage, stream: Stream, spatial: set[Digit]) -> None:
        x = stream.data
        if func in BINARY:
            if operand is None:
                raise ExecutionError(f"vector {func} needs an operand")
            binary = BINARY[func]
            stream.data = apply(lambda a, b: binary(a, b).astype(np.float32, copy=False), x, operand)  # type: ignore[arg-type]
        elif func == "stash":
            stream.stash = x  # values are never changed in place
        elif func == "erf":
            from scipy.special import erf

            stream.data = unary(lambda v: erf(v.astype(np.float64)).astype(np.float32), x)
        elif func in TRANSCENDENTAL:
            transcendental = TRANSCENDENTAL[func]
            stream.data = unary(lambda v: transcendental(v).astype(np.float32, copy=False), x)  # type: ignore[misc]
        elif func == "sum_time":
            digits = [d for a in call.args for p in (a.places or ()) for d in p.digits]
            stream.reduce([not any(d.within(g) for g in digits) for d, _, _ in stream.dims])
        elif func == "sum_packet":
            stream.reduce([not any(d.within(g) for g in stream.packet) for d, _, _ in stream.dims])
            stream.packet = []
        elif func in ("sum_all", "max_all"):
            stream.reduce(
                [d in spatial or f != "elem" for d, _, f in stream.dims], "max" if func == "max_all" else "add"
            )
            stream.packet = []
        else:
            raise ExecutionError(f"vector op {func} is not modelled")
