"""Views in lowering: `.tile`, `.roll`, `.at` and `.rename` of a tensor as restrictions, shifts,
gathers, rolls and renames of the view (chiplore.simulator.toolchain.placement's View)."""

from __future__ import annotations

from chiplore.simulator.dsl import ir
from chiplore.simulator.toolchain.digits import Digit
from chiplore.simulator.toolchain.lower_names import Frame, NameResolution
from chiplore.simulator.toolchain.placement import LoweringError, View, range_restrictions


class ViewLowering(NameResolution):
    """Expressions that make a view of a tensor; the lowerer (chiplore.simulator.toolchain.lower) evaluates the rest."""

    def _value(self, expr: ir.Expr, frame: Frame, ttype: ir.DevType | None, name: str | None) -> object:
        raise NotImplementedError  # the lowerer evaluates expressions

    def _int(self, expr: ir.Expr, frame: Frame) -> int:
        raise NotImplementedError  # the lowerer evaluates integer expressions

    def _as_view(self, expr: ir.Expr, frame: Frame) -> View:
        value = self._value(expr, frame, None, None)
        if not isinstance(value, View):
            raise LoweringError("a view cannot be compiled as written: a tensor is needed here", rule="0107")
        return value

    def _digit_expr(self, expr: ir.Expr, frame: Frame) -> Digit:
        ops: list[tuple[str, int]] = []
        while isinstance(expr, ir.BinOp) and expr.op in ("/", "%"):
            ops.append((expr.op, self._int(expr.right, frame)))
            expr = expr.left
        if not isinstance(expr, ir.Name):
            raise LoweringError("a view cannot be compiled as written: a digit such as `A`, `A / d` or `A % m` is "
                                "needed here", rule="0107")  # fmt: skip
        saved, self._scope = self._scope, frame
        try:
            return self._digit(expr.id, list(reversed(ops)))
        finally:
            self._scope = saved

    def _view(self, method: ir.Method, frame: Frame) -> View:
        view = self._as_view(method.receiver, frame)
        positional = [a.value for a in method.args if a.name is None]
        shifts = dict(view.shifts)
        if method.name == "tile":
            if len(positional) != 3:
                raise LoweringError("tile cannot be compiled as written: it takes (digit, start, len)", rule="0107")
            digit = self._digit_expr(positional[0], frame)
            start, length = self._int(positional[1], frame), self._int(positional[2], frame)
            added = range_restrictions(digit, start, start + length, self.axes, shifts, move=True)
            return View(view.tensor, tuple(shifts.items()), view.restrictions + tuple(added), view.renames,
                        view.gathers, view.rolls, view.selectors)  # fmt: skip
        if method.name == "roll":
            digit = self._digit_expr(positional[0], frame)
            amount = self._int(positional[1], frame) if len(positional) > 1 else 1
            return View(view.tensor, view.shifts, view.restrictions, view.renames, view.gathers,
                        (*view.rolls, (digit, amount)), view.selectors)  # fmt: skip
        if method.name == "at":
            selected = [a for a in method.args if a.name is not None]
            if len(selected) != 1:
                raise LoweringError("at cannot be compiled as written: it takes one `Axis = index` argument",
                                    rule="0107")  # fmt: skip
            axis = self._axis_name(selected[0].name or "", frame)
            whole = self.axes.digit(axis, [])
            added = range_restrictions(whole, 0, 1, self.axes, shifts, move=True)
            atoms = tuple(d.axis for d in self.axes.to_atoms(whole))
            index = selected[0].value
            holder = self._lookup(index.id, frame) if isinstance(index, ir.Name) else None
            selector = ((axis, holder.tensor.name),) if isinstance(holder, View) else ()
            return View(view.tensor, tuple(shifts.items()), view.restrictions + tuple(added), view.renames,
                        view.gathers + atoms, view.rolls, view.selectors + selector)  # fmt: skip
        # rename(A, B, offset): axis A of the tensor seen as the range [offset, offset + |A|) of B
        if len(positional) != 3 or not all(isinstance(p, ir.Name) for p in positional[:2]):
            raise LoweringError("rename cannot be compiled as written: it takes (axis, axis, offset)", rule="0107")
        source = self._axis_name(positional[0].id, frame)  # type: ignore[union-attr]
        target = self._axis_name(positional[1].id, frame)  # type: ignore[union-attr]
        offset = self._int(positional[2], frame)
        for axis in (source, target):
            if axis not in self.axes.atoms and axis not in self.axes.composites:
                raise LoweringError(f"unknown axis '{axis}'", rule="0102")
        size = self.axes.size(source)
        added = range_restrictions(self.axes.digit(target, []), offset, offset + size, self.axes, shifts, move=False)
        return View(view.tensor, view.shifts, view.restrictions + tuple(added),
                    (*view.renames, (source, target, offset)), view.gathers, view.rolls, view.selectors)  # fmt: skip
