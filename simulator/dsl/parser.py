"""Ferrite text -> IR. Syntax errors become E0101 diagnostics with line, column and expected tokens; a
text past the reader's limits (nesting depth, literal size: docs/simrngd.md §3.10) becomes E0105."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from importlib import resources
from types import SimpleNamespace
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir

MAX_SOURCE_BYTES = 10 * 1024 * 1024
CACHED_SOURCE_BYTES = 256 * 1024  # larger texts are parsed each time rather than kept
# The LALR parser keeps its own stack, but building the IR, printing and checking it recurse once per
# level of the syntax tree: a deeper tree is refused before any of them runs. The shipped programs
# reach 19 levels.
MAX_NESTING_DEPTH = 100
MAX_INT_LITERAL = 2**63 - 1  # integers are i64 wherever numpy meets them
_READABLE = {
    "AXES": "'axes!'",
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a float",
    "STRING": "a string",
    "$END": "end of input",
}


class FerriteSyntaxError(Exception):
    """The text is not Ferrite the compiler reads; `diagnostic` says where and why (E0101, or E0105
    for a text past the reader's limits)."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def _grammar() -> str:
    return resources.files("chiplore.simulator.dsl").joinpath("grammar.lark").read_text()


@functools.cache
def _parser() -> Lark:
    """The reference reader: a parse tree, then its limits (`_past_limits`), then the IR."""
    return Lark(_grammar(), parser="lalr", start="start", propagate_positions=True, maybe_placeholders=True)


@functools.cache
def _fast_parser() -> Lark:
    """The same grammar, building the IR as it reduces (`_Reduced`)."""
    to_ir = _ToIR()
    names = {str(rule.alias or rule.options.template_source or rule.origin.name) for rule in _parser().rules}
    callbacks = SimpleNamespace(**{name: _reducer(name, getattr(to_ir, name, None)) for name in names})
    return Lark(_grammar(), parser="lalr", start="start", propagate_positions=True, maybe_placeholders=True,
                transformer=callbacks)  # fmt: skip


def parse(text: str) -> ir.Program:
    """Parse Ferrite source; raises FerriteSyntaxError with an E0101 diagnostic."""
    size = len(text.encode("utf-8", errors="replace")) if len(text) * 4 > MAX_SOURCE_BYTES else len(text)
    if size > MAX_SOURCE_BYTES:
        raise FerriteSyntaxError(
            _syntax_diagnostic(1, 1, f"at most {MAX_SOURCE_BYTES:,} bytes of source", f"{size:,} bytes")
        )
    if size > CACHED_SOURCE_BYTES:
        return _parse(text)
    parsed = _parse_small(text)
    if isinstance(parsed, Diagnostic):
        raise FerriteSyntaxError(parsed)
    return parsed


@functools.lru_cache(maxsize=128)
def _parse_small(text: str) -> ir.Program | Diagnostic:
    """Programs are parsed again and again (check, lower, estimate, execute): the IR is frozen, so
    one parse per text is shared; so is the refusal of one that is not Ferrite (a device job reads
    its program two or three times, and a 64 KB refusal takes seconds)."""
    try:
        return _parse(text)
    except FerriteSyntaxError as error:
        return error.diagnostic


def _parse(text: str) -> ir.Program:
    """The IR of a text: built while parsing where the text is well within the reader's limits (the
    architect parses a program per design it prices), else by the reference reader, which also gives
    every refusal, so both answer the same."""
    try:
        return _parse_reducing(text)
    except Exception:  # past a limit, not Ferrite, or refused by the IR builder: the reference reader says how
        return _parse_tree(text)


class _PastLimits(Exception):
    """The fast reader met a nesting or a literal past the reader's limits."""


class _Reduced(Tree):  # type: ignore[type-arg]
    """A rule the fast reader has reduced. Its children are IR already; its own IR is built when its
    parent is reduced, once Lark has given it its position (`meta`), as the transformer would."""

    height: int  # levels of the parse tree from here down, as `_past_limits` counts them
    user: Callable[[Any, list[Any]], Any] | None
    value: Any
    built: bool

    def ir(self) -> Any:
        if not self.built:
            self.value = self.user(self.meta, self.children) if self.user else Tree(self.data, self.children, self.meta)
            self.built = True
        return self.value


def _reducer(rule: str, user: Callable[[Any, list[Any]], Any] | None) -> Callable[[list[Any]], Tree[Token]]:
    """Lark's callback for `rule`: its children's IR, its depth and its literals checked on the way."""
    if rule.startswith("_"):  # spliced into its parent by Lark: its children stay as they are
        return lambda children: Tree(rule, children)

    def reduce(children: list[Any]) -> _Reduced:
        height, values = 0, []
        for child in children:
            if isinstance(child, _Reduced):
                height = max(height, child.height)
                values.append(child.ir())
            else:
                if isinstance(child, Token) and child.type in ("INT", "FLOAT") and _literal_problem(child):
                    raise _PastLimits
                values.append(child)
        node = _Reduced(rule, values)
        node.height, node.user, node.value, node.built = height + 1, user, None, False
        if node.height > MAX_NESTING_DEPTH:
            raise _PastLimits
        return node

    return reduce


def _parse_reducing(text: str) -> ir.Program:
    root = _fast_parser().parse(text)
    if not isinstance(root, _Reduced):
        raise TypeError(f"the start rule reduced to {type(root).__name__}")
    program = root.ir()
    if not isinstance(program, ir.Program):
        raise TypeError(f"the start rule built {type(program).__name__}")
    return program


def _parse_tree(text: str) -> ir.Program:
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as error:
        raise FerriteSyntaxError(_from_lark(error, text)) from None
    beyond = _past_limits(tree)
    if beyond is not None:
        raise FerriteSyntaxError(beyond)
    try:
        return _ToIR().transform(tree)
    except VisitError as error:
        if isinstance(error.orig_exc, FerriteSyntaxError):
            raise error.orig_exc from None
        raise


def _past_limits(tree: Tree[Token]) -> Diagnostic | None:
    """E0105 for the first place the tree nests deeper than MAX_NESTING_DEPTH or a literal is out of
    range; walked with an explicit stack, since the point is to refuse what recursion cannot take."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING_DEPTH:
            line, column = _tree_position(node)
            return _limit_diagnostic(
                line, column, f"the program's nesting is past the compiler's limit of {MAX_NESTING_DEPTH} levels (each "
                "nested loop, block, operator, unary minus, call and method of a chain adds a level); name "
                "intermediate results with `let` or split the loop nest",
            )  # fmt: skip
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth + 1))
            elif isinstance(child, Token) and child.type in ("INT", "FLOAT"):
                problem = _literal_problem(child)
                if problem:
                    return _limit_diagnostic(child.line or 1, child.column or 1, problem, len(child))
    return None


def _literal_problem(token: Token) -> str:
    """Why a numeric literal is out of range ("" when it is not)."""
    text = str(token)
    shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]} ({len(text):,} characters)"
    if token.type == "INT":
        # Compare digit counts first: int() of a 5,000-digit string is itself refused by Python.
        if len(text.lstrip("0")) > len(str(MAX_INT_LITERAL)) or int(text) > MAX_INT_LITERAL:
            return f"integer literal {shown} is past the compiler's limit of {MAX_INT_LITERAL:,} (2^63 - 1)"
        return ""
    if not math.isfinite(float(text)):
        return f"float literal {shown} is past the compiler's limit of the 64-bit float range"
    return ""


def _limit_diagnostic(line: int, column: int, message: str, width: int = 1) -> Diagnostic:
    return Diagnostic(
        code="E0105",
        severity="error",
        message=message,
        span=ir.Span(line=line, column=column, end_line=line, end_column=column + max(1, width)),
    )


def _tree_position(node: Tree[Token]) -> tuple[int, int]:
    """Where a subtree starts: its own position, else its first token's (found without recursion)."""
    stack: list[Tree[Token] | Token] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Token):
            return current.line or 1, current.column or 1
        if isinstance(current, Tree):
            meta = current.meta
            if not getattr(meta, "empty", True):
                return meta.line, meta.column
            stack.extend(reversed(current.children))
    return 1, 1


def _syntax_diagnostic(line: int, column: int, expected: str, found: str, width: int = 1) -> Diagnostic:
    return Diagnostic(
        code="E0101",
        severity="error",
        message=f"syntax error at {line}:{column}: expected {expected}, found {found}",
        span=ir.Span(line=line, column=column, end_line=line, end_column=column + max(1, width)),
    )


def _readable(terminal: str) -> str:
    if terminal in _READABLE:
        return _READABLE[terminal]
    try:
        pattern = _parser().get_terminal(terminal).pattern
    except KeyError:
        return terminal
    return f"'{pattern.value}'" if pattern.type == "str" else terminal.lower()


def _expected(names: set[str] | frozenset[str] | list[str]) -> str:
    readable = sorted({_readable(name) for name in names})
    if len(readable) > 12:
        readable = [*readable[:12], f"... ({len(readable) - 12} more)"]
    return " or ".join(readable) if len(readable) <= 2 else ", ".join(readable[:-1]) + " or " + readable[-1]


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just past the last character: where "end of input" was found."""
    last_line = text.rsplit("\n", 1)[-1]
    return text.count("\n") + 1, len(last_line) + 1


def _from_lark(error: UnexpectedInput, text: str) -> Diagnostic:
    line = max(1, getattr(error, "line", 1) or 1)
    column = max(1, getattr(error, "column", 1) or 1)
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            return _syntax_diagnostic(*_end_position(text), _expected(error.expected), "end of input")
        return _syntax_diagnostic(line, column, _expected(error.expected), repr(str(token)), len(str(token)))
    if isinstance(error, UnexpectedCharacters):
        return _syntax_diagnostic(line, column, _expected(error.allowed or {"a token"}), repr(error.char))
    if isinstance(error, UnexpectedEOF):
        return _syntax_diagnostic(*_end_position(text), _expected(error.expected), "end of input")
    return _syntax_diagnostic(line, column, "valid Ferrite", "something else")


def _span(meta: Any) -> ir.Span | None:
    if getattr(meta, "empty", True):
        return None
    return ir.Span(line=meta.line, column=meta.column, end_line=meta.end_line, end_column=meta.end_column)


def _token_span(token: Token) -> ir.Span:
    return ir.Span(
        line=token.line or 1,
        column=token.column or 1,
        end_line=token.end_line or token.line or 1,
        end_column=token.end_column or (token.column or 1) + len(token),
    )


class _Params(tuple):  # type: ignore[type-arg]
    """Marks a parameter list among a declaration's children."""


class _Args(tuple):  # type: ignore[type-arg]
    """Marks an argument list among a call's children."""


class _Restrict(int):
    pass


class _Pad(int):
    pass


@v_args(meta=True)
class _ToIR(Transformer[Token, ir.Program]):
    """Builds IR bottom-up; every node gets the span of its rule."""

    # -- program and items ----------------------------------------------------------------------

    def start(self, meta: Any, children: list[Any]) -> ir.Program:
        inner = tuple(c for c in children if isinstance(c, ir.InnerAttr))
        items = tuple(c for c in children if not isinstance(c, ir.InnerAttr))
        return ir.Program(inner_attrs=inner, items=items, span=_span(meta))

    def inner_attr(self, meta: Any, children: list[Any]) -> ir.InnerAttr:
        name, value = children
        return ir.InnerAttr(name=str(name), value=str(value)[1:-1], span=_span(meta))

    def axes_decl(self, meta: Any, children: list[Any]) -> ir.AxesDecl:
        return ir.AxesDecl(axes=tuple(c for c in children if not isinstance(c, Token)), span=_span(meta))

    def axis_atom(self, meta: Any, children: list[Any]) -> ir.AxisAtom:
        name, size = children
        return ir.AxisAtom(name=str(name), size=int(size), span=_span(meta))

    def axis_composite(self, meta: Any, children: list[Any]) -> ir.AxisComposite:
        return ir.AxisComposite(name=str(children[0]), parts=tuple(str(c) for c in children[1:]), span=_span(meta))

    def layout_decl(self, meta: Any, children: list[Any]) -> ir.LayoutDecl:
        name, layout = children
        return ir.LayoutDecl(name=str(name), layout=layout, span=_span(meta))

    def type_decl(self, meta: Any, children: list[Any]) -> ir.TypeDecl:
        name, ttype = children
        return ir.TypeDecl(name=str(name), type=ttype, span=_span(meta))

    def kernel_decl(self, meta: Any, children: list[Any]) -> ir.KernelDecl:
        attrs = _attrs(children)
        rest = [c for c in children if not isinstance(c, list)]
        name, params, body = rest[0], next((c for c in rest if isinstance(c, _Params)), ()), rest[-1]
        return ir.KernelDecl(attrs=attrs, name=str(name), params=tuple(params), body=body, span=_span(meta))

    def fn_decl(self, meta: Any, children: list[Any]) -> ir.FnDecl:
        attrs = _attrs(children)
        rest = [c for c in children if not isinstance(c, list)]
        name, body = rest[0], rest[-1]
        params = next((c for c in rest if isinstance(c, _Params)), ())
        returns = next((c for c in rest[1:-1] if isinstance(c, ir.HbmType | ir.DevType | ir.TypeRef)), None)
        return ir.FnDecl(
            attrs=attrs, name=str(name), params=tuple(params), returns=returns, body=body, span=_span(meta)
        )

    def params(self, meta: Any, children: list[Any]) -> _Params:
        return _Params(children)

    def tensor_param(self, meta: Any, children: list[Any]) -> ir.TensorParam:
        name, *rest = children
        ref = ""
        if len(rest) == 2:
            ref = "&mut" if "mut" in str(rest[0]) else "&"
        return ir.TensorParam(name=str(name), ref=ref, type=rest[-1], span=_span(meta))

    def axis_param(self, meta: Any, children: list[Any]) -> ir.AxisParam:
        return ir.AxisParam(name=str(children[0]), span=_span(meta))

    def int_param(self, meta: Any, children: list[Any]) -> ir.IntParam:
        return ir.IntParam(name=str(children[0]), span=_span(meta))

    def layout_param(self, meta: Any, children: list[Any]) -> ir.LayoutParam:
        return ir.LayoutParam(name=str(children[0]), span=_span(meta))

    # -- attributes -----------------------------------------------------------------------------

    def outer_attr(self, meta: Any, children: list[Any]) -> list[ir.Attr]:
        return children

    def attr_item(self, meta: Any, children: list[Any]) -> ir.Attr:
        name, *args = children
        if not args:
            return ir.Attr(name=str(name), args=None, span=_span(meta))
        return ir.Attr(name=str(name), args=tuple(a for a in args if a is not None), span=_span(meta))

    def attr_arg(self, meta: Any, children: list[Any]) -> ir.AttrArg:
        if len(children) == 2:
            return ir.AttrArg(name=str(children[0]), value=children[1], span=_span(meta))
        return ir.AttrArg(name=None, value=children[0], span=_span(meta))

    def literal(self, meta: Any, children: list[Any]) -> ir.AttrValue:
        token: Token = children[0]
        kinds = {"INT": ("int", int), "FLOAT": ("float", float), "STRING": ("string", lambda t: t[1:-1])}
        kind, convert = kinds.get(token.type, ("name", str))
        return ir.AttrValue(kind=kind, value=convert(str(token)), span=_token_span(token))

    # -- types and layouts ----------------------------------------------------------------------

    def hbm_type(self, meta: Any, children: list[Any]) -> ir.HbmType:
        dtype, mapping = children
        return ir.HbmType(dtype=str(dtype), mapping=mapping, span=_span(meta))

    def dev_type(self, meta: Any, children: list[Any]) -> ir.DevType:
        space, dtype, layout = children
        return ir.DevType(space=space, dtype=str(dtype), layout=layout, span=_span(meta))

    def space(self, meta: Any, children: list[Any]) -> str:
        return str(children[0])

    def type_ref(self, meta: Any, children: list[Any]) -> ir.TypeRef:
        return ir.TypeRef(name=str(children[0]), span=_span(meta))

    def layout_body(self, meta: Any, children: list[Any]) -> ir.Layout:
        return ir.Layout(items=tuple(children), span=_span(meta))

    def lf_map(self, meta: Any, children: list[Any]) -> ir.MapField:
        name, mapping = children
        return ir.MapField(name=str(name), mapping=mapping, span=_span(meta))

    def lf_int(self, meta: Any, children: list[Any]) -> ir.IntField:
        name, value = children
        return ir.IntField(name=str(name), value=int(value), span=_span(meta))

    def lf_spread(self, meta: Any, children: list[Any]) -> ir.Spread:
        return ir.Spread(name=str(children[-1]), span=_span(meta))

    # -- mappings -------------------------------------------------------------------------------

    def bracket(self, meta: Any, children: list[Any]) -> ir.Mapping:
        return ir.Mapping(terms=tuple(c for c in children if c is not None), span=_span(meta))

    def mterm(self, meta: Any, children: list[Any]) -> ir.Term:
        factor: ir.Term = children[0]
        updates: dict[str, Any] = {"span": _span(meta)}
        for extra in children[1:]:
            if isinstance(extra, _Restrict):
                updates["restrict"] = int(extra)
            elif isinstance(extra, _Pad):
                updates["pad"] = int(extra)
        return factor.model_copy(update=updates)

    def mrestrict(self, meta: Any, children: list[Any]) -> _Restrict:
        return _Restrict(int(children[0]))

    def mpad(self, meta: Any, children: list[Any]) -> _Pad:
        return _Pad(int(children[0]))

    def m_axis(self, meta: Any, children: list[Any]) -> ir.Term:
        return ir.Term(kind="axis", axis=str(children[0]), ops=tuple(children[1:]), span=_span(meta))

    def m_div(self, meta: Any, children: list[Any]) -> tuple[str, int | str]:
        return ("/", _int_or_name(children[0]))

    def m_mod(self, meta: Any, children: list[Any]) -> tuple[str, int | str]:
        return ("%", _int_or_name(children[0]))

    def m_unit(self, meta: Any, children: list[Any]) -> ir.Term:
        return ir.Term(kind="unit", value=int(children[0]), span=_span(meta))

    def m_rep(self, meta: Any, children: list[Any]) -> ir.Term:
        return ir.Term(kind="rep", value=int(children[0]), span=_span(meta))

    def m_at(self, meta: Any, children: list[Any]) -> ir.Term:
        return ir.Term(kind="at", value=int(children[0]), positions=int(children[1]), span=_span(meta))

    # -- statements -----------------------------------------------------------------------------

    def block(self, meta: Any, children: list[Any]) -> ir.Block:
        statements = tuple(c for c in children if isinstance(c, ir.Let | ir.Assign | ir.ExprStmt | ir.For))
        tail = next(
            (c for c in children if c is not None and not isinstance(c, ir.Let | ir.Assign | ir.ExprStmt | ir.For)),
            None,
        )
        return ir.Block(stmts=statements, tail=tail, span=_span(meta))

    def let_stmt(self, meta: Any, children: list[Any]) -> ir.Let:
        mutable = isinstance(children[0], Token) and children[0].type == "MUT"
        rest = children[1:] if mutable else children
        name, value = rest[0], rest[-1]
        ttype = rest[1] if len(rest) == 3 else None
        return ir.Let(name=str(name), mutable=mutable, type=ttype, value=value, span=_span(meta))

    def assign_stmt(self, meta: Any, children: list[Any]) -> ir.Assign:
        name, value = children
        return ir.Assign(name=str(name), value=value, span=_span(meta))

    def for_stmt(self, meta: Any, children: list[Any]) -> ir.For:
        attrs = _attrs(children)
        rest = [c for c in children if not isinstance(c, list) and not (isinstance(c, Token) and c.type == "DOTDOT")]
        var, start, stop, body = rest
        return ir.For(attrs=attrs, var=str(var), start=start, stop=stop, body=body, span=_span(meta))

    def expr_stmt(self, meta: Any, children: list[Any]) -> ir.ExprStmt:
        return ir.ExprStmt(expr=children[0], span=_span(meta))

    # -- expressions ----------------------------------------------------------------------------

    def _binop(self, op: str, meta: Any, children: list[Any]) -> ir.BinOp:
        left, right = children
        return ir.BinOp(op=op, left=left, right=right, span=_span(meta))  # type: ignore[arg-type]

    def add(self, meta: Any, children: list[Any]) -> ir.BinOp:
        return self._binop("+", meta, children)

    def sub(self, meta: Any, children: list[Any]) -> ir.BinOp:
        return self._binop("-", meta, children)

    def mul(self, meta: Any, children: list[Any]) -> ir.BinOp:
        return self._binop("*", meta, children)

    def div(self, meta: Any, children: list[Any]) -> ir.BinOp:
        return self._binop("/", meta, children)

    def mod(self, meta: Any, children: list[Any]) -> ir.BinOp:
        return self._binop("%", meta, children)

    def neg(self, meta: Any, children: list[Any]) -> ir.Neg:
        return ir.Neg(operand=children[0], span=_span(meta))

    def method(self, meta: Any, children: list[Any]) -> ir.Method:
        receiver, name, *rest = children
        return ir.Method(
            receiver=receiver, name=str(name), args=_args(rest), span=_span(meta), name_span=_token_span(name)
        )

    def int(self, meta: Any, children: list[Any]) -> ir.Int:
        return ir.Int(value=int(children[0]), span=_span(meta))

    def float(self, meta: Any, children: list[Any]) -> ir.Float:
        return ir.Float(value=float(children[0]), span=_span(meta))

    def string(self, meta: Any, children: list[Any]) -> ir.Str:
        return ir.Str(value=str(children[0])[1:-1], span=_span(meta))

    def name(self, meta: Any, children: list[Any]) -> ir.Name:
        return ir.Name(id=str(children[0]), span=_span(meta))

    def call(self, meta: Any, children: list[Any]) -> ir.Call:
        name, *rest = children
        return ir.Call(func=str(name), args=_args(rest), span=_span(meta))

    def path_call(self, meta: Any, children: list[Any]) -> ir.PathCall:
        path, func, *rest = children
        return ir.PathCall(path=str(path), func=str(func), args=_args(rest), span=_span(meta))

    def args(self, meta: Any, children: list[Any]) -> _Args:
        return _Args(_arg(child) for child in children)

    def kwarg(self, meta: Any, children: list[Any]) -> ir.Arg:
        name, value = children
        return ir.Arg(name=str(name), value=_as_expr(value), span=_span(meta))


def _attrs(children: list[Any]) -> tuple[ir.Attr, ...]:
    """The attributes of all `#[...]` groups before a declaration, in order."""
    return tuple(attr for group in children if isinstance(group, list) for attr in group)


def _int_or_name(token: Token) -> int | str:
    return int(token) if token.type == "INT" else str(token)


def _as_expr(value: Any) -> Any:
    if isinstance(value, ir.Mapping):
        return ir.Bracket(mapping=value, span=value.span)
    return value


def _arg(child: Any) -> ir.Arg:
    if isinstance(child, ir.Arg):
        return child
    value = _as_expr(child)
    return ir.Arg(name=None, value=value, span=value.span)


def _args(rest: list[Any]) -> tuple[ir.Arg, ...]:
    for item in rest:
        if isinstance(item, _Args):
            return tuple(item)
    return ()
