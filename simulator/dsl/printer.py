"""IR -> canonical Ferrite text: 4-space indent, one pipeline stage per line, comments dropped.

`parse(print_program(p)) == p` for every program, and printing is a fixed point of
print(parse(.)); tests check both on the shipped programs and on generated IR.
"""

from __future__ import annotations

from chiplore.simulator.dsl import ir

INDENT = "    "
# Binding strength of expression forms, loosest first (the grammar's sum < product < unary < postfix).
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}
_UNARY, _POSTFIX = 3, 4
PIPELINE_ROOTS = frozenset({"main", "sub"})


def print_program(program: ir.Program) -> str:
    parts = [f'#![{a.name} = "{a.value}"]' for a in program.inner_attrs]
    if parts:
        parts.append("")
    for index, item in enumerate(program.items):
        if index and (isinstance(item, ir.FnDecl | ir.KernelDecl) or isinstance(program.items[index - 1], ir.FnDecl)):
            parts.append("")
        parts.append(_item(item))
    return "\n".join(parts) + "\n"


# ---- items ----------------------------------------------------------------------------------


def _item(item: ir.AxesDecl | ir.LayoutDecl | ir.TypeDecl | ir.FnDecl | ir.KernelDecl) -> str:
    if isinstance(item, ir.AxesDecl):
        return "axes! { " + ", ".join(_axis(a) for a in item.axes) + " }"
    if isinstance(item, ir.LayoutDecl):
        return f"layout {item.name} = {_layout(item.layout)};"
    if isinstance(item, ir.TypeDecl):
        return f"type {item.name} = {_type(item.type)};"
    head = "".join(_attrs(item.attrs, ""))
    keyword = "fn" if isinstance(item, ir.FnDecl) else "kernel"
    signature = f"{keyword} {item.name}({_params(item.params)})"
    if isinstance(item, ir.FnDecl) and item.returns is not None:
        signature += f" -> {_type(item.returns)}"
    return head + signature + " " + _block(item.body, 0)


def _axis(axis: ir.AxisAtom | ir.AxisComposite) -> str:
    if isinstance(axis, ir.AxisAtom):
        return f"{axis.name} = {axis.size}"
    return f"{axis.name} = ({', '.join(axis.parts)})"


def _params(params: tuple[ir.TensorParam | ir.AxisParam | ir.IntParam | ir.LayoutParam, ...]) -> str:
    if not params:
        return ""
    return "\n" + "".join(f"{INDENT}{_param(p)},\n" for p in params)


def _param(param: ir.TensorParam | ir.AxisParam | ir.IntParam | ir.LayoutParam) -> str:
    if isinstance(param, ir.TensorParam):
        ref = {"": "", "&": "&", "&mut": "&mut "}[param.ref]
        return f"{param.name}: {ref}{_type(param.type)}"
    return f"{param.name}: {param.kind}"


def _attrs(attrs: tuple[ir.Attr, ...], indent: str) -> list[str]:
    return [f"{indent}#[{_attr(a)}]\n" for a in attrs]


def _attr(attr: ir.Attr) -> str:
    if attr.args is None:
        return attr.name
    return f"{attr.name}({', '.join(_attr_arg(a) for a in attr.args)})"


def _attr_arg(arg: ir.AttrArg) -> str:
    value = _literal(arg.value)
    return value if arg.name is None else f"{arg.name} = {value}"


def _literal(value: ir.AttrValue) -> str:
    if value.kind == "string":
        return f'"{value.value}"'
    if value.kind == "float":
        return _float(float(value.value))
    return str(value.value)


# ---- types, layouts, mappings ---------------------------------------------------------------


def _type(ttype: ir.HbmType | ir.DevType | ir.TypeRef) -> str:
    if isinstance(ttype, ir.HbmType):
        return f"hbm<{ttype.dtype}>{print_mapping(ttype.mapping)}"
    if isinstance(ttype, ir.DevType):
        return f"{ttype.space}<{ttype.dtype}>{_layout(ttype.layout)}"
    return ttype.name


def _layout(layout: ir.Layout) -> str:
    return "{" + ", ".join(_layout_item(i) for i in layout.items) + "}"


def _layout_item(item: ir.MapField | ir.IntField | ir.Spread) -> str:
    if isinstance(item, ir.Spread):
        return f"..{item.name}"
    if isinstance(item, ir.IntField):
        return f"{item.name}: {item.value}"
    return f"{item.name}: {print_mapping(item.mapping)}"


def print_mapping(mapping: ir.Mapping) -> str:
    return "[" + ", ".join(print_term(t) for t in mapping.terms) + "]"


def print_term(term: ir.Term) -> str:
    if term.kind == "axis":
        text = str(term.axis) + "".join(f" {op} {operand}" for op, operand in term.ops)
    elif term.kind == "unit":
        text = str(term.value)
    elif term.kind == "rep":
        text = f"rep({term.value})"
    else:
        text = f"at({term.value}, {term.positions})"
    if term.restrict is not None:
        text += f" = {term.restrict}"
    if term.pad is not None:
        text += f" # {term.pad}"
    return text


# ---- statements -----------------------------------------------------------------------------


def _block(block: ir.Block, depth: int) -> str:
    inner = INDENT * (depth + 1)
    lines = [_stmt(s, depth + 1) for s in block.stmts]
    if block.tail is not None:
        lines.append(inner + _expr(block.tail, depth + 1))
    if not lines:
        return "{}"
    return "{\n" + "\n".join(lines) + "\n" + INDENT * depth + "}"


def _stmt(stmt: ir.Let | ir.Assign | ir.ExprStmt | ir.For, depth: int) -> str:
    indent = INDENT * depth
    if isinstance(stmt, ir.Let):
        mut = "mut " if stmt.mutable else ""
        annotation = f": {_type(stmt.type)}" if stmt.type is not None else ""
        return f"{indent}let {mut}{stmt.name}{annotation} = {_expr(stmt.value, depth)};"
    if isinstance(stmt, ir.Assign):
        return f"{indent}{stmt.name} = {_expr(stmt.value, depth)};"
    if isinstance(stmt, ir.ExprStmt):
        return f"{indent}{_expr(stmt.expr, depth)};"
    head = "".join(_attrs(stmt.attrs, indent))
    return f"{head}{indent}for {stmt.var} in {_expr(stmt.start, depth)}..{_expr(stmt.stop, depth)} " + _block(
        stmt.body, depth
    )


# ---- expressions ----------------------------------------------------------------------------


def _precedence(expr: object) -> int:
    if isinstance(expr, ir.BinOp):
        return _PRECEDENCE[expr.op]
    if isinstance(expr, ir.Neg):
        return _UNARY
    return _POSTFIX + 1  # primaries bind tightest


def _wrapped(expr: object, depth: int, minimum: int) -> str:
    text = _expr(expr, depth)
    return f"({text})" if _precedence(expr) < minimum else text


def _expr(expr: object, depth: int) -> str:
    if isinstance(expr, ir.Int):
        return str(expr.value)
    if isinstance(expr, ir.Float):
        return _float(expr.value)
    if isinstance(expr, ir.Str):
        return f'"{expr.value}"'
    if isinstance(expr, ir.Name):
        return expr.id
    if isinstance(expr, ir.Bracket):
        return print_mapping(expr.mapping)
    if isinstance(expr, ir.BinOp):
        level = _PRECEDENCE[expr.op]
        # Left-associative: an operand of equal strength needs parentheses only on the right.
        return f"{_wrapped(expr.left, depth, level)} {expr.op} {_wrapped(expr.right, depth, level + 1)}"
    if isinstance(expr, ir.Neg):
        return "-" + _wrapped(expr.operand, depth, _UNARY)
    if isinstance(expr, ir.Call):
        return f"{expr.func}({_args(expr.args, depth)})"
    if isinstance(expr, ir.PathCall):
        return f"{expr.path}::{expr.func}({_args(expr.args, depth)})"
    if isinstance(expr, ir.Method):
        return _method_chain(expr, depth)
    raise TypeError(f"not an expression: {expr!r}")


def _method_chain(expr: ir.Method, depth: int) -> str:
    chain: list[ir.Method] = []
    root: object = expr
    while isinstance(root, ir.Method):
        chain.append(root)
        root = root.receiver
    chain.reverse()
    head = _wrapped(root, depth, _POSTFIX)
    calls = [f".{m.name}({_args(m.args, depth)})" for m in chain]
    if isinstance(root, ir.Call) and root.func in PIPELINE_ROOTS:
        # A Tensor-Unit pass: one stage per line, in hardware order.
        stage_indent = INDENT * (depth + 1)
        return head + "".join(f"\n{stage_indent}{call}" for call in calls)
    return head + "".join(calls)


def _args(args: tuple[ir.Arg, ...], depth: int) -> str:
    return ", ".join(_expr(a.value, depth) if a.name is None else f"{a.name} = {_expr(a.value, depth)}" for a in args)


def _float(value: float) -> str:
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        return text  # `1e-05` is a FLOAT as written
    return text if ("." in text or "e" in text) else f"{text}.0"
