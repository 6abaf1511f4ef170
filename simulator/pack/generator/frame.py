"""Vectors in one layout and the passes that compute on them.

A *frame* is where a vector's values sit: a layout, the elem digits of one slice, the fetch that walks
them one f32 flit at a time, and how a sum over the whole vector is taken (an all-reduce over some
slice digits, and across the clusters when the vector is split over them). A *value* is either
committed to a DM tensor or a pass still being built: element-wise ops extend the pass, and the value
is committed only when something needs it in memory (a second reader, a register operand, a store),
or when the pass's vector chain is full.

A value may carry a *rounding point* (the kernel's reference rounds it to bf16 there, `round_bf16`).
The vector engine cannot round within a pass, only the commit that narrows to bf16 does, so the
point is kept by committing the value in bf16 before anything reads on: where the value is committed
anyway this is free (half the bytes); where a reader would have extended its pending pass it costs a
pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.pack.generator.graph import Unsupported
from chiplore.simulator.pack.generator.program import Program, float_text


@dataclass(frozen=True)
class Frame:
    layout: str  # layout name
    elem: str  # one slice's elem digits
    time: str  # fetch time of an f32 stream, one flit (8 values) per step
    packet: str
    elements: int  # one slice's elements
    length: int  # the whole vector's
    sum_group: str | None  # slice digits an all-reduce adds over (None: one slice holds the vector)
    sum_layout: str  # where that sum lands (one value per slice)
    cross: bool  # the vector is split over the clusters
    every_layout: str  # every slice of the vector in both clusters
    cluster_digit: str = ""  # the cluster digit (for the exchange of sums when there is no bridge)
    # the axis of `elem` when it is that axis's one digit (a slice's columns), so a pass over the frame
    # may run a tile of it at a time ("" where it may not)
    tile_axis: str = ""


@dataclass
class Pass:
    source: str  # DM tensor, or a view of one
    source_dtype: str
    time: str
    packet: str
    reducer: str = ""  # `.reduce_slices(...)` right after the fetch (split-K accumulators)
    ops: list[str] = field(default_factory=list)
    vrfs: list[str] = field(default_factory=list)
    view: str = ""  # the view of its source it reads (one member's rows): what it commits holds only those

    @property
    def chain(self) -> int:
        return len(self.ops)


@dataclass(frozen=True)
class Deferred:
    """A register of a whole frame, loaded a tile at a time by the passes that read it."""

    source: str  # the DM tensor (or view) it is loaded from
    dtype: str
    context: str


@dataclass
class Value:
    """A vector in a frame: committed (`tensor`, read through `view`) or pending (`pass_`)."""

    frame: Frame
    tensor: str | None = None
    dtype: str = "f32"
    view: str = ""
    pass_: Pass | None = None
    uses: int = 1  # readers still to come
    narrow: bool = False  # a rounding point not kept yet: readers want the value rounded to bf16
    # the tensor holds this value's rows only (a pass over one member's rows committed it), read through
    # `view`; a reader that must read it whole (a roll) may drop the view: the rest is never stored
    own: bool = False

    @property
    def pending(self) -> bool:
        return self.pass_ is not None

    def ref(self) -> str:
        return f"{self.tensor}{self.view}"


class FrameEmitter:
    """Writes passes over values of frames into a program. `recompute`: a value read again by a sum
    (a norm) is recomputed from its pass's source instead of being committed and read back. `release`:
    a pass that reads a register is committed at once, so no register outlives the pass that reads it.
    `tile`: a register of a whole frame that would take more than a quarter of the VRF is tiled."""

    def __init__(self, program: Program, recompute: bool = False, release: bool = False, tile: bool = False) -> None:
        self.p = program
        self.facts = program.facts
        self.limit = vocab.chain_limit(program.facts)
        self.recompute = recompute
        self.release = release
        self.tile = tile
        self.vrf_bytes = program.engines.chip.vrf_bytes
        self.deferred: dict[str, Deferred] = {}

    # ---- reading values ----------------------------------------------------------------------

    def start(self, value: Value) -> Pass:
        """A new pass reading the committed value."""
        assert value.tensor is not None
        return Pass(value.ref(), value.dtype, value.frame.time, value.frame.packet, view=value.view)

    def read(self, value: Value, more: int, consume: bool = True) -> Pass:
        """A pass that goes on from `value` with `more` vector ops. A reader that consumes the value's
        last use takes its pending pass over; a sum that reads it once more may recompute it; any other
        reader gets a new pass over the committed value."""
        pending = value.pass_
        if consume:
            value.uses -= 1
        if value.narrow:
            self.round(value)
            return self.start(value)
        if pending is not None and pending.chain + more <= self.limit:
            if consume and value.uses <= 0:
                value.pass_ = None
                return pending
            recomputable = not any(op.startswith(TRANSCENDENTAL) for op in pending.ops) and not self._tiled(pending)
            if not consume and self.recompute and recomputable:
                return replace(pending, ops=list(pending.ops), vrfs=list(pending.vrfs))
        if value.pass_ is not None:
            self.commit(value, "f32")
        return self.start(value)

    def apply(self, value: Value, ops: list[str], vrfs: tuple[str, ...] = ()) -> Value:
        """`value` with element-wise vector ops applied (a pending value with one reader)."""
        if len(ops) > self.limit:
            head = self.apply(value, ops[: self.limit], vrfs)
            return self.apply(head, ops[self.limit :], vrfs)
        chosen = self.read(value, len(ops))
        chosen.ops.extend(ops)
        chosen.vrfs.extend(vrfs)
        result = Value(value.frame, pass_=chosen, uses=1)
        if vrfs and self.release:
            self.commit(result, "f32")
        return result

    def fetch_text(self, pass_: Pass) -> str:
        widen = f".{vocab.widen(self.facts)}(f32)" if pass_.source_dtype != "f32" else ""
        return f".fetch(time = [{pass_.time}], packet = [{pass_.packet}]){widen}"

    def render(self, pass_: Pass) -> str:
        """The pass from `main(source)` through its vector chain."""
        vector = f"\n        .vector({', '.join(pass_.ops)})" if pass_.ops else ""
        return f"main({pass_.source})\n        {self.fetch_text(pass_)}{pass_.reducer}{vector}"

    def _used(self, pass_: Pass) -> None:
        for vrf in pass_.vrfs:
            if vrf not in self.deferred:
                self.p.vrf_used(vrf)

    def _tiled(self, pass_: Pass) -> list[str]:
        """The pass's registers that are loaded a tile at a time."""
        return [vrf for vrf in dict.fromkeys(pass_.vrfs) if vrf in self.deferred]

    def round(self, value: Value, stem: str = "rnd") -> Value:
        """Keep the value's rounding point: commit it in bf16 (in place; a pass when it is already
        committed wider)."""
        assert value.pending or not value.view or value.own, "a view's rows are rounded as a whole copy of its tensor"
        value.narrow = False
        if value.dtype != "bf16" or value.pending:
            self.commit(value, "bf16", stem=stem)
        return value

    def commit(self, value: Value, dtype: str, stem: str = "v", exact: bool = False) -> Value:
        """Put the value in a DM tensor of `dtype` (in place; nothing happens when it already is one).
        A value at a rounding point is committed in bf16 instead of f32, and a value in bf16 already stays
        so, unless `exact` (a reader of either widens what it fetches); with `exact`, an f32 tensor."""
        if value.narrow:
            self.round(value, stem=stem)
        if not value.pending and (value.dtype == dtype or (dtype == "f32" and not exact)):
            return value
        pass_ = value.pass_ if value.pass_ is not None else self.start(value)
        if not pass_.ops and not pass_.reducer and pass_.source_dtype == dtype:  # the source is the value
            value.pass_, value.tensor, value.dtype, value.view = None, pass_.source, dtype, ""
            return value
        if dtype != "f32" and not pass_.ops:
            pass_.ops.append("mul(1.0)")  # the narrowing cast follows the vector engine
        frame = value.frame
        name = self.p.name(stem)
        narrow = f"\n        .{vocab.narrow(self.facts)}({dtype})" if dtype != "f32" else ""
        if self._tiled(pass_):
            self._commit_tiles(pass_, frame, name, dtype, narrow)
            self.p.dm(frame.elements, dtype)
            value.pass_, value.tensor, value.dtype, value.view = None, name, dtype, ""
            return value
        self.p.emit(f"    let {name}: dm<{dtype}>{{..{frame.layout}, elem: [{frame.elem}]}} = "
                    f"{self.render(pass_)}{narrow}\n        .commit();\n")  # fmt: skip
        self._used(pass_)
        self.p.dm(frame.elements, dtype)
        # a pass over one member's rows wrote only those: its readers read them through the same view (a
        # whole read of the rest was refused, E0205, where a head norm took two passes)
        value.pass_, value.tensor, value.dtype, value.view = None, name, dtype, pass_.view
        value.own = bool(pass_.view)
        return value

    def commit_into(self, value: Value, target: str, dtype: str) -> None:
        """Write the value into an existing tensor or view (`acc.tile(...)`)."""
        pass_ = value.pass_ if value.pass_ is not None else self.start(value)
        if self._tiled(pass_):
            raise Unsupported(f"a register tiled over {value.frame.layout} read by a pass into a view ({target})")
        if dtype != "f32" and not pass_.ops:
            pass_.ops.append("mul(1.0)")
        narrow = f"\n        .{vocab.narrow(self.facts)}({dtype})" if dtype != "f32" else ""
        self.p.emit(f"    {self.render(pass_)}{narrow}\n        .commit_into({target});\n")
        self._used(pass_)

    def _commit_tiles(self, pass_: Pass, frame: Frame, name: str, dtype: str, narrow: str) -> None:
        """Write the pass into a new DM tensor `name` a tile of the frame's columns at a time: each loop
        step loads its tile of every tiled register, then runs the pass over its tile."""
        tiled = self._tiled(pass_)
        if pass_.reducer or not frame.tile_axis:
            raise Unsupported(f"a pass over {frame.layout} cannot run by tiles, and its registers fill the VRF")
        size = tile_size(frame.elements, 4 * len(tiled), self.vrf_bytes // 2)
        if size is None:
            raise Unsupported(f"{len(tiled)} register tile(s) of 8 columns of {frame.layout} fill half the VRF")
        step = self.p.loop_var("kt")
        axis, digit = frame.tile_axis, frame.elem
        view = f".tile({digit}, {step} * {size}, {size})"
        time, packet = (f"{axis} % {size} / 8" if size > 8 else "1"), f"{axis} % 8"
        ops = list(pass_.ops)
        lines = [f"    let mut {name}: dm<{dtype}>{{..{frame.layout}, elem: [{frame.elem}]}} = dm::empty();\n",
                 f"    for {step} in 0..{frame.elements // size} {{\n"]  # fmt: skip
        for vrf in tiled:
            held = self.deferred[vrf]
            tile = self.p.name(f"{vrf}_t")
            ops = [op.replace(f"vrf = {vrf})", f"vrf = {tile})") for op in ops]
            widen = f".{vocab.widen(self.facts)}(f32)" if held.dtype != "f32" else ""
            lines.append(f"        let {tile}: vrf<f32>{{..{frame.layout}, elem: [{digit} = {size}]}} = "
                         f"{held.context}({held.source}{view})\n            .fetch(time = [{time}], "
                         f"packet = [{packet}]){widen}.to_vrf();\n")  # fmt: skip
        body = self.render(replace(pass_, source=f"{pass_.source}{view}", time=time, packet=packet, ops=ops)) + narrow
        inner = body.replace("\n", "\n    ")  # the pass's lines, one level deeper: inside the loop
        lines.append(f"        {inner}\n            .commit_into({name}{view});\n    }}\n")
        self.p.emit("".join(lines))
        self._used(pass_)
        for vrf in tiled:  # the loop's registers: live together during its pass, a tile each
            tile = f"{vrf}@{name}"
            self.p.vrf_defined(tile, size)
            self.p.vrf_used(tile)

    # ---- registers ----------------------------------------------------------------------------

    def vrf(
        self, value: Value, stem: str = "r", early: bool = False, at: int | None = None, context: str = "sub"
    ) -> str:
        """A VRF operand holding the value (f32), loaded by a `sub` pass; one read of the value. An
        `early` load (of a kernel input) goes before the weight streams, while `sub` is idle."""
        value.uses -= 1
        self.commit(value, "f32" if value.pending else value.dtype, stem=f"{stem}_d")
        frame = value.frame
        name = self.p.name(stem)
        if self.tile and frame.tile_axis and 4 * frame.elements > self.vrf_bytes // 4:
            self.deferred[name] = Deferred(value.ref(), value.dtype, context)
            return name
        widen = f".{vocab.widen(self.facts)}(f32)" if value.dtype != "f32" else ""
        self.p.emit(f"    let {name}: vrf<f32>{{..{frame.layout}, elem: [{frame.elem}]}} = {context}({value.ref()})"
                    f".fetch(time = [{frame.time}], packet = [{frame.packet}]){widen}.to_vrf();\n",
                    early=early, at=at)  # fmt: skip
        self.p.vrf_defined(name, max(frame.elements, 8), early, at)
        return name

    def scalar_vrf(
        self, tensor: str, dtype: str, layout: str, early: bool = False, at: int | None = None, context: str = "sub"
    ) -> str:
        """A one-value-per-slice tensor (`elem: [1 # 8]`, `[1 # 16]` for bf16) as a VRF operand. A value
        the next pass needs at once is loaded on `main` (no hand-off between queues); inputs on `sub`."""
        name = self.p.name(f"{tensor}_v")
        pad = 16 if dtype == "bf16" else 8
        widen = f".{vocab.widen(self.facts)}(f32)" if dtype != "f32" else ""
        self.p.emit(f"    let {name}: vrf<f32>{{..{layout}, elem: [1 # {pad}]}} = {context}({tensor})"
                    f".fetch(time = [1], packet = [1 # {pad}]){widen}.to_vrf();\n", early=early, at=at)  # fmt: skip
        self.p.vrf_defined(name, pad, early, at)
        return name

    # ---- sums over a whole vector ----------------------------------------------------------------

    def inverse_rms(self, value: Value, eps: float, stem: str = "rms") -> str:
        """A VRF holding 1 / sqrt(mean(value^2) + eps) on every slice of the value. The sum reads the
        value once beyond its graph readers, so it does not consume a use."""
        frame = value.frame
        mean = [f"mul({float_text(1 / frame.length)})", f"add({float_text(eps)})", "rsqrt()"]
        source = self.read(value, 2, consume=False)
        if source.reducer and frame.sum_group:  # one reducer per pass: the split-K sum goes first
            self.commit(value, "f32")
            source = self.start(value)
        source.ops.extend(["square()", "sum_all()"])
        name = self.p.name(f"{stem}_d")
        reducer = f"\n        {vocab.all_reduce(frame.sum_group, self.facts)}" if frame.sum_group else ""
        after = "" if frame.cross else f"\n        .vector({', '.join(mean)})"
        layout = frame.sum_layout if frame.cross else frame.every_layout
        self.p.emit(f"    let {name}: dm<f32>{{..{layout}, elem: [1 # 8]}} = {self.render(source)}{reducer}{after}"
                    "\n        .commit();\n")  # fmt: skip
        self._used(source)
        self.p.dm(8, "f32")
        if frame.cross:
            name = self._across_clusters(name, frame, mean, stem)
        return self.scalar_vrf(name, "f32", frame.every_layout, context="main")

    def _across_clusters(self, local: str, frame: Frame, mean: list[str], stem: str) -> str:
        name = self.p.name(f"{stem}_all")
        if vocab.bridge(self.facts):
            self.p.emit(f"    let {name}: dm<f32>{{..{frame.every_layout}, elem: [1 # 8]}} = main({local})\n"
                        "        .fetch(time = [1], packet = [1 # 8])\n        .reduce_clusters(add)\n"
                        f"        .vector({', '.join(mean)})\n        .commit();\n")  # fmt: skip
        else:  # each cluster's sum copied to both clusters, then added
            both = self.p.name(f"{stem}_both")
            self.p.emit(f"    let {both}: dm<f32>{{..{frame.every_layout}, elem: [{frame.cluster_digit} # 8]}} = "
                        f"{local}.dma(engines = {self.p.engines.every()});\n")  # fmt: skip
            self.p.emit(f"    let {name}: dm<f32>{{..{frame.every_layout}, elem: [1 # 8]}} = main({both})\n"
                        f"        .fetch(time = [1], packet = [{frame.cluster_digit} # 8])\n"
                        f"        .vector(sum_all(), {', '.join(mean)})\n        .commit();\n")  # fmt: skip
            self.p.dm(8, "f32")
        self.p.dm(8, "f32")
        return name


TRANSCENDENTAL = ("exp", "erf", "tanh", "rsqrt", "recip")


def tile_size(columns: int, bytes_per_column: int, budget: int) -> int | None:
    """The most columns (a multiple of 8 that divides `columns`) whose registers fit `budget` bytes."""
    fits = [size for size in range(8, columns, 8) if columns % size == 0 and size * bytes_per_column <= budget]
    return max(fits, default=None)
