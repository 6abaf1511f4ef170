"""The lowerer's scopes and names: frames of bound values, axis and layout references, mapping terms
as places, types resolved to tensors, and the buffers those tensors occupy. `NameResolution` is the
base of the lowerer (chiplore.simulator.toolchain.lower); it holds the state every part of lowering shares."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from chiplore.simulator._truth import chip_shape
from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import AxisSystem, Digit
from chiplore.simulator.toolchain.env import Env, expand_layout
from chiplore.simulator.toolchain.lower_dma import dm_base, dm_dims
from chiplore.simulator.toolchain.lowered import BufferInfo, DmaOp, PassOp
from chiplore.simulator.toolchain.op_semantics import SemOp
from chiplore.simulator.toolchain.placement import LoweringError, Place, Tensor, View, range_restrictions
from chiplore.simulator.toolchain.versions import VersionSpec


@dataclass(frozen=True)
class AxisRef:
    """An axis passed to a fn's axis parameter."""

    name: str


@dataclass(frozen=True)
class LayoutRef:
    """A layout passed to a fn's layout parameter."""

    name: str


@dataclass
class Frame:
    """One scope of the interpreter: a kernel body, an inlined fn's body or a loop iteration."""

    values: dict[str, object]
    label: str = ""  # op labels: call sites and loop iterations, e.g. "q/" or "c=2/"
    slot: str = ""  # buffer identities: call sites and loop variables without their values
    depth: int = 1  # pipeline depth of the innermost loop
    iteration: int | None = None

    def child(self, label: str, slot: str, **changes: object) -> Frame:
        frame = Frame(dict(self.values), self.label + label, self.slot + slot, self.depth, self.iteration)
        for key, value in changes.items():
            setattr(frame, key, value)
        return frame


@dataclass
class LoweringState:
    """What lowering has produced so far: the ops, who wrote each tensor, the buffers and the names taken."""

    ops: list[DmaOp | PassOp] = field(default_factory=list)
    writers: dict[str, list[str]] = field(default_factory=dict)
    buffers: dict[str, BufferInfo] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    tensor_ids: dict[str, int] = field(default_factory=dict)
    written: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # HBM param -> byte ranges
    selected: dict[str, set[str]] = field(default_factory=dict)  # HBM param -> atoms picked by `.at`


class NameResolution:
    """Names, mappings and types in the current scope, and the tensors and buffers they make."""

    version: str
    spec: VersionSpec
    env: Env
    axes: AxisSystem
    state: LoweringState
    trace: list[SemOp] | None  # filled by lower_semantics
    _scope: Frame | None = None

    def _axis_name(self, name: str, frame: Frame | None = None) -> str:
        frame = frame or self._scope
        value = frame.values.get(name) if frame is not None else None
        return value.name if isinstance(value, AxisRef) else name

    def _layout_name(self, name: str, frame: Frame | None = None) -> str:
        frame = frame or self._scope
        value = frame.values.get(name) if frame is not None else None
        return value.name if isinstance(value, LayoutRef) else name

    def _operand(self, operand: int | str) -> int:
        if isinstance(operand, int):
            return operand
        value = self._scope.values.get(operand) if self._scope is not None else None
        if not isinstance(value, int):
            raise LoweringError(f"mapping operand '{operand}' cannot be compiled as written: it is not an integer",
                                rule="0107")  # fmt: skip
        return value

    def _digit(self, axis: str, ops: list[tuple[str, int]]) -> Digit:
        axis = self._axis_name(axis)
        if axis not in self.axes.atoms and axis not in self.axes.composites:
            raise LoweringError(f"unknown axis '{axis}'", rule="0102")
        try:
            return self.axes.digit(axis, ops)
        except ValueError as error:  # `Q % n` with n = 0 from a fn's int parameter
            raise LoweringError(f"{error}: a digit's operands must be positive", rule="0201") from None

    def _place(self, term: ir.Term) -> Place:
        if term.kind == "axis":
            digit = self._digit(str(term.axis), [(op, self._operand(x)) for op, x in term.ops])
            atoms = self.axes.to_atoms(digit)
            if len(atoms) == 1 and atoms[0].axis in self.axes.composites:
                raise LoweringError(f"{digit} does not align with the atoms of {digit.axis}", rule="0204")
            digits = tuple(a for a in atoms if a.size > 1)
            size = digit.size
            count = min(size, term.restrict) if term.restrict is not None else size
            return Place(term.pad or count, digits, restrict=term.restrict, written=digit)
        if term.kind == "rep":
            return Place(term.pad or int(term.value or 1), copies=int(term.value or 1))
        if term.kind == "at":
            return Place(int(term.positions or 1), at=int(term.value or 0))
        return Place(term.pad or 1)

    def _places(self, mapping: ir.Mapping) -> tuple[Place, ...]:
        return tuple(self._place(term) for term in mapping.terms)

    def _mapping_arg(self, expr: ir.Expr | None) -> tuple[Place, ...]:
        if expr is None:
            return ()
        if isinstance(expr, ir.Bracket):
            return self._places(expr.mapping)
        if isinstance(expr, ir.Name):  # `slice = Layout` names a layout's slice mapping
            layout = self.env.layouts.get(self._layout_name(expr.id))
            if layout is not None:
                fields = self.env.fields(layout)
                slice_field = fields.get("slice")
                if isinstance(slice_field, ir.MapField):
                    return self._places(slice_field.mapping)
        raise LoweringError("the argument cannot be compiled as written: a mapping ([...]) or a layout name is "
                            "needed", rule="0107")  # fmt: skip

    def _resolve_type(self, ttype: ir.TType | None) -> ir.DevType | ir.HbmType | None:
        resolved = self.env.resolve(ttype)
        if resolved is None:
            raise LoweringError("unknown type (or a type that names itself)", rule="0102")
        return resolved

    def _layout_fields(self, layout: ir.Layout) -> dict[str, ir.MapField | ir.IntField]:
        def lookup(name: str) -> ir.Layout:
            target = self.env.layouts.get(self._layout_name(name))
            if target is None:
                raise LoweringError(f"unknown layout '{name}'", rule="0102")
            return target

        return expand_layout(layout, lookup)

    def _param_tensor(self, param: ir.TensorParam) -> Tensor:
        ttype = self._resolve_type(param.type)
        if not isinstance(ttype, ir.HbmType):
            raise LoweringError(f"a Ferrite file holds one kernel, whose parameters are HBM tensors: {param.name} "
                                "is not in HBM", rule="0106")  # fmt: skip
        digits = tuple(d for place in self._places(ttype.mapping) for d in place.digits)
        return Tensor(
            id=param.name, name=param.name, space="hbm", dtype=ttype.dtype, hbm=digits,
            mutable=param.ref == "&mut", line=param.span.line if param.span else None,
        )  # fmt: skip

    def _new_tensor(self, ttype: object, name: str | None, frame: Frame, line: int | None) -> Tensor:
        if not isinstance(ttype, ir.DevType):
            raise LoweringError(f"'{name or 'the result'}' cannot be compiled as written: it needs a device tensor "
                                "type (dm, trf or vrf)", rule="0107")  # fmt: skip
        fields = self._layout_fields(ttype.layout)
        places = {k: self._places(v.mapping) for k, v in fields.items() if isinstance(v, ir.MapField)}
        buffers_field = fields.get("buffers")
        # `#[pipeline(depth)]` rotates the loop's DM tensors; register files are rewritten in place.
        depth = buffers_field.value if isinstance(buffers_field, ir.IntField) else None
        return self._make_tensor(name, ttype.space, ttype.dtype, places, frame, line, depth)

    def _make_tensor(self, name: str | None, space: str, dtype: str, fields: dict[str, tuple[Place, ...]],
                     frame: Frame, line: int | None, depth: int | None = None) -> Tensor:  # fmt: skip
        """A device tensor with a unique id and its buffer identity (`depth` rotating buffers in a loop)."""
        name = name or "tmp"
        if depth is None:
            depth = frame.depth if space == "dm" else 1
        buffer = f"{frame.slot}{name}"
        if frame.iteration is not None:
            buffer += f"[{frame.iteration % max(depth, 1)}]"
        tensor_id = self._unique(self.state.tensor_ids, f"{frame.label}{name}")
        tensor = Tensor(id=tensor_id, name=name, space=space, dtype=dtype, fields=fields, buffer=buffer, line=line)
        self._record_buffer(tensor)
        return tensor

    def _view_of(self, tensor: Tensor) -> View:
        """A whole tensor: `T = k` terms hold only the first k values of their digit."""
        restrictions = []
        for places in tensor.fields.values():
            for place in places:
                if place.restrict is not None and place.written is not None and place.restrict < place.size:
                    restrictions += range_restrictions(place.written, 0, place.restrict, self.axes, {}, move=False)
        return View(tensor, restrictions=tuple(restrictions))

    def _record_buffer(self, tensor: Tensor) -> None:
        width = ir.DTYPE_BYTES[tensor.dtype]
        per_slice = width * math.prod(p.positions for p in tensor.places("elem") + tensor.places("lane"))
        slices = live_slice_ids(View(tensor), self.axes)
        self.state.buffers[tensor.buffer] = BufferInfo(
            id=tensor.buffer, space=tensor.space, bytes_per_slice=per_slice, live_slices=len(slices), slices=slices
        )

    @staticmethod
    def _unique(seen: dict[str, int], base: str) -> str:
        """`base`, or `base#n` when it was taken n times before."""
        n = seen.get(base, 0)
        seen[base] = n + 1
        return base if n == 0 else f"{base}#{n}"


def live_clusters(view: View, axes: AxisSystem) -> tuple[int, ...]:
    """Cluster indices that hold data of the view."""
    slices = chip_shape().slices
    return tuple(sorted({i // slices for i in live_slice_ids(view, axes)}))


def live_slice_ids(view: View, axes: AxisSystem) -> tuple[int, ...]:
    """Global ids (cluster * slices per cluster + slice) of the slices that hold the view's data or copies."""
    slices = chip_shape().slices
    dims = [d for d in dm_dims(view, view.constraints(), axes, with_copies=True) if d.field in ("cluster", "slice")]
    base = dm_base(view)
    ids = np.array([int(base["cluster"]) * slices + int(base["slice"])], dtype=np.int64)
    for dim in dims:  # every sum of one value per dim: up to every slice of the chip times a dim's values
        step = int(dim.step) * (slices if dim.field == "cluster" else 1)
        ids = np.unique(ids[:, None] + np.asarray(dim.values, dtype=np.int64)[None, :] * step)
    return tuple(ids.tolist())
