"""Register operands of the row and input ops: a kernel input (or a constant) laid out like the
vector it multiplies or adds to, loaded into a VRF.

An operand over several members' rows (the fused epilogue of q, k and v) is assembled from *parts*:
each member's range gets its own input, DMA'd into a tile of one DM tensor, or a constant (the
identity for a member that lacks the op: 1 for a product, 0 for a sum, cos = 1 and sin = 0 for RoPE).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.pack.generator.frame import Frame, FrameEmitter, Value
from chiplore.simulator.pack.generator.geometry import Geometry
from chiplore.simulator.pack.generator.graph import Group, Member
from chiplore.simulator.pack.generator.program import float_text
from chiplore.simulator.pack.generator.signature import Signature

Shape = Literal["row", "head", "scalar", "table"]
Exported = tuple[Value, Member | None, Geometry]  # a group's rows another group reads, with where they live


@dataclass(frozen=True)
class Part:
    """What an operand holds over one member's rows: an input or a constant."""

    member: int
    param: str | None = None
    constant: float = 1.0
    position: str | None = None  # a table's row, chosen at run time (`.at(E = position)`)
    earlier: str | None = None  # a row value an earlier group computed (in DM, in that group's row frame)


@dataclass(frozen=True)
class Operand:
    shape: Shape  # row: one value per row; head: per element of a head; scalar: one value; table: a head row
    parts: tuple[Part, ...]

    @property
    def constant(self) -> float | None:
        """The literal this operand is, when every part is the same constant."""
        values = {p.constant for p in self.parts if p.param is None}
        if len(values) == 1 and all(p.param is None and p.earlier is None for p in self.parts):
            return values.pop()
        return None


class RowOperands:
    """Operands in a group's row frame (its k-group leaders)."""

    def __init__(self, emitter: FrameEmitter, sig: Signature, group: Group, geo: Geometry, frame: Frame,
                 heads: tuple[str, str] | None, units: tuple[str, int] | None, at: int | None,
                 earlier: Mapping[str, Exported] | None = None) -> None:  # fmt: skip
        self.e, self.sig, self.group, self.geo, self.frame = emitter, sig, group, geo, frame
        self.earlier = earlier or {}  # row values earlier groups exported: (value, member, their geometry)
        self.heads = heads  # (head axis, head-row axis) of R, when R has heads
        self.units = units  # (unit axis, rows per unit) of R, when members share it
        self.cache: dict[Operand, str] = {}
        self.at = at  # where the group's register loads go: before its weight loop (None: where each is used)

    def earlier_value(self, name: str) -> Exported | None:
        """An earlier group's exported rows this group's row ops may read as an operand."""
        return self.earlier.get(name)

    def clusters(self, members: tuple[Member, ...]) -> tuple[int, ...]:
        if not self.geo.split:
            return (0,)
        share = self.geo.per_cluster
        touched = {c for m in members for c in self.geo.chip.every
                   if m.offset < (c + 1) * share and m.offset + m.rows > c * share}  # fmt: skip
        return tuple(sorted(touched))

    def pieces(self, members: tuple[Member, ...]) -> list[str]:
        """Views of a group tensor that together hold exactly these (consecutive) members' rows, each a
        box of the layout's digits: a range of rows is cut at the cluster boundary and into whole
        row-groups and parts of one (a tile across those boundaries is not a box of digits)."""
        if len(members) == len(self.group.members) or self.group.stacked:
            return [""]
        axis, size = (self.heads[0], int(self.group.head_dim)) if self.heads else self.units  # type: ignore[misc]
        first, end = members[0].offset, members[-1].offset + members[-1].rows
        r, half = self.geo.rows_per_slice, self.geo.per_cluster
        spans = []
        for lo in range(first - first % half, end, half):  # one span per cluster
            a, b = max(lo, first), min(lo + half, end)
            up, down = -(-a // r) * r, b // r * r
            if up >= down:  # within one row-group, or two partial ones
                spans += [(x, y) for x, y in (((a, b),) if b <= up else ((a, up), (up, b))) if y > x]
            else:
                spans += [(x, y) for x, y in ((a, up), (up, down), (down, b)) if y > x]
        return [f".tile({axis}, {lo // size}, {(hi - lo) // size})" for lo, hi in spans]

    def tile(self, members: tuple[Member, ...]) -> str:
        """One view holding these members' rows when a box does; else the whole tensor (passes over
        it then compute other members' rows too, which nothing reads)."""
        pieces = self.pieces(members)
        return pieces[0] if len(pieces) == 1 else ""

    def vrf(self, operand: Operand, members: tuple[Member, ...]) -> str:
        """A VRF over the members' rows holding the operand (cached: one load per operand)."""
        if operand in self.cache:
            return self.cache[operand]
        if operand.shape == "scalar" and len(operand.parts) == 1 and operand.parts[0].param:
            name = self._scalar(str(operand.parts[0].param))
        else:
            name = self._rows(operand, members)
        self.cache[operand] = name
        return name

    def _scalar(self, param: str) -> str:
        dtype = self.sig.param(param).dtype
        pad = 16 if dtype == "bf16" else 8
        name = self.e.p.name(f"{param}_d")
        layout = f"Every{self.geo.index}"
        self.e.p.emit(f"    let {name}: dm<{dtype}>{{..{layout}, elem: [1 # {pad}]}} = "
                      f"{param}.dma(engines = {self.e.p.aux_engines()});\n", early=True)  # fmt: skip
        self.e.p.dm(pad, dtype)
        return self.e.scalar_vrf(name, dtype, layout, at=self.at)

    def _rows(self, operand: Operand, members: tuple[Member, ...]) -> str:
        frame = self.frame
        dtypes = {self.sig.param(p.param).dtype for p in operand.parts if p.param}
        dtypes |= {self.earlier[p.earlier][0].dtype for p in operand.parts if p.earlier}
        dtype = dtypes.pop() if len(dtypes) == 1 else "f32"
        stem = next((p.param or p.earlier for p in operand.parts if p.param or p.earlier), "ones")
        name = self.e.p.name(f"{stem}_r")
        by_member = {p.member: p for p in operand.parts}
        self.e.p.emit(f"    let {name}: dm<{dtype}>{{..{frame.layout}, elem: [{frame.elem}]}} = dm::empty();\n",
                      early=True)  # fmt: skip
        self.e.p.dm(frame.elements, dtype)
        staged: dict[str, str] = {}  # a part of another dtype than the operand's: its bytes, widened later
        widened: list[str] = []
        for member in members:
            part = by_member.get(member.index, Part(member.index))
            for piece in self.pieces((member,)):
                view = f"{name}{piece}"
                if part.earlier is not None:  # copied once its group has computed it: after that group's code
                    self.e.p.emit(f"    {self._earlier_source(part.earlier, member)}.dma_into({view}, engines = "
                                  f"{self.e.p.aux_engines(self.clusters((member,)))});\n", at=self.at)  # fmt: skip
                    continue
                if part.param is None:
                    self.e.p.emit(f"    {view}.fill({float_text(part.constant)});\n", early=True)
                    continue
                source = self._source(part, operand.shape, member)
                engines = self.e.p.aux_engines(self.clusters((member,)))
                own = self.sig.param(str(part.param)).dtype
                if own != dtype:  # a DMA copies bytes: a pass widens them into the operand
                    if own not in staged:
                        staged[own] = self.e.p.name(f"{stem}_{own}")
                        self.e.p.emit(f"    let {staged[own]}: dm<{own}>{{..{frame.layout}, elem: [{frame.elem}]}} = "
                                      "dm::empty();\n", early=True)  # fmt: skip
                        self.e.p.dm(frame.elements, own)
                    self.e.p.emit(f"    {source}.dma_into({staged[own]}{piece}, engines = {engines});\n", early=True)
                    widened.append(
                        f"    sub({staged[own]}{piece}).fetch(time = [{frame.time}], packet = "
                        f"[{frame.packet}]).{vocab.widen(self.e.facts)}(f32).commit_into({view});\n"
                    )
                    continue
                self.e.p.emit(f"    {source}.dma_into({view}, engines = {engines});\n", early=True)
        for text in widened:
            self.e.p.emit(text, at=self.at)
        return self.e.vrf(_committed(frame, name, dtype), stem=f"{stem}_v", at=self.at)

    def _earlier_source(self, name: str, member: Member) -> str:
        """The earlier group's rows of `name`, renamed onto this group's row axis at the member's rows."""
        value, producer_member, producer = self.earlier[name]
        offset = member.offset - (producer_member.offset if producer_member is not None else 0)
        return f"{value.tensor}{value.view}.rename({producer.R}, {self.geo.R}, {offset})"

    def _source(self, part: Part, shape: Shape, member: Member) -> str:
        param = self.sig.param(str(part.param))
        if shape == "row":
            return f"{param.name}.rename({self.sig.axis_of(param.dims)}, {self.geo.R}, {member.offset})"
        if shape == "scalar":
            return param.name
        head_axis = self.heads[1] if self.heads else self.geo.R
        if shape == "table":  # one row of a (positions, head) table
            first = param.dims[0].axis
            rest = self.sig.axis_of(param.dims[1:])
            return f"{param.name}.at({first} = {part.position}).rename({rest}, {head_axis}, 0)"
        return f"{param.name}.rename({self.sig.axis_of(param.dims)}, {head_axis}, 0)"


def _committed(frame: Frame, tensor: str, dtype: str):  # type: ignore[no-untyped-def]
    from chiplore.simulator.pack.generator.frame import Value

    return Value(frame, tensor=tensor, dtype=dtype, uses=1)


def input_vrf(e: FrameEmitter, sig: Signature, frame: Frame, param: str, axis: str, engines: str) -> str:
    """A kernel input vector laid out in an input frame (its k-leaders), as a VRF."""
    p = sig.param(param)
    name = e.p.name(f"{param}_k")
    e.p.emit(f"    let {name}: dm<{p.dtype}>{{..{frame.layout}, elem: [{frame.elem}]}} = "
             f"{param}.rename({sig.axis_of(p.dims)}, {axis}, 0).dma(engines = {engines});\n", early=True)  # fmt: skip
    e.p.dm(frame.elements, p.dtype)
    return e.vrf(_committed(frame, name, p.dtype), stem=f"{param}_kv", early=True)
