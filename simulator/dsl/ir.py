"""The Ferrite IR: frozen pydantic nodes, one per construct of the grammar (docs/simrngd.md §3.10).

Every node keeps the source span it came from; spans are excluded from equality and hashing, so
`parse(print_program(p)) == p` compares programs, not their layout on the page. Sequences are
tuples so that nodes stay hashable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chiplore.core.target import Span

DTYPES = ("bf16", "f32", "i32", "i8", "f8e4m3", "f4e2m1")
DTYPE_BYTES = {"bf16": 2.0, "f32": 4.0, "i32": 4.0, "i8": 1.0, "f8e4m3": 1.0, "f4e2m1": 0.5}  # f4: two per byte


WALKED = "_walked"  # the key of a node's walk in its __dict__ (Node.walked)


class Node(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    span: Span | None = Field(default=None, repr=False)

    # The node and every node below it, once walked (dsl/walk.py), is kept in the instance's __dict__
    # under WALKED: the checks walk each program's tree a few dozen times, and a frozen tree's nodes never
    # change. Not a PrivateAttr: pydantic initialises those on every construction, which made building a
    # program's IR 2.5x slower per node (the architect parses a program per design it prices).

    def walked(self) -> tuple[Node, ...] | None:
        return self.__dict__.get(WALKED)

    def keep_walked(self, nodes: tuple[Node, ...]) -> None:
        self.__dict__[WALKED] = nodes

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:  # type: ignore[override]
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop(WALKED, None)  # another node: what was below this one may not be below it
        return copy

    def _key(self) -> tuple[Any, ...]:
        # Where a node came from is not part of what it is.
        return tuple(getattr(self, name) for name in type(self).model_fields if not name.endswith("span"))

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))


# ---- mappings -------------------------------------------------------------------------------


class Term(Node):
    """One mapping term: `A / d % m`, `1`, `rep(n)`, `at(k, n)`, optionally `= k` and `# n`."""

    kind: Literal["axis", "unit", "rep", "at"]
    axis: str | None = None
    ops: tuple[tuple[Literal["/", "%"], int | str], ...] = ()
    value: int | None = None  # unit: the integer written (normally 1); rep: n; at: k
    positions: int | None = None  # at: n
    restrict: int | None = None  # `= k`
    pad: int | None = None  # `# n`


class Mapping(Node):
    terms: tuple[Term, ...]


# ---- layouts and types ----------------------------------------------------------------------


class MapField(Node):
    kind: Literal["map"] = "map"
    name: str
    mapping: Mapping


class IntField(Node):
    kind: Literal["int"] = "int"
    name: str
    value: int


class Spread(Node):
    kind: Literal["spread"] = "spread"
    name: str


LayoutItem = Annotated[MapField | IntField | Spread, Field(discriminator="kind")]


class Layout(Node):
    items: tuple[LayoutItem, ...]


class HbmType(Node):
    kind: Literal["hbm"] = "hbm"
    dtype: str
    mapping: Mapping


class DevType(Node):
    kind: Literal["dev"] = "dev"
    space: Literal["dm", "trf", "vrf"]
    dtype: str
    layout: Layout


class TypeRef(Node):
    kind: Literal["ref"] = "ref"
    name: str


TType = Annotated[HbmType | DevType | TypeRef, Field(discriminator="kind")]


# ---- attributes -----------------------------------------------------------------------------


class AttrValue(Node):
    kind: Literal["int", "float", "string", "name"]
    value: int | float | str


class AttrArg(Node):
    name: str | None
    value: AttrValue


class Attr(Node):
    name: str
    args: tuple[AttrArg, ...] | None = None  # None: written without parentheses


# ---- expressions ----------------------------------------------------------------------------


class Int(Node):
    kind: Literal["int"] = "int"
    value: int


class Float(Node):
    kind: Literal["float"] = "float"
    value: float


class Str(Node):
    kind: Literal["str"] = "str"
    value: str  # the text between the quotes, escapes kept as written


class Name(Node):
    kind: Literal["name"] = "name"
    id: str


class BinOp(Node):
    kind: Literal["binop"] = "binop"
    op: Literal["+", "-", "*", "/", "%"]
    left: Expr
    right: Expr


class Neg(Node):
    kind: Literal["neg"] = "neg"
    operand: Expr


class Bracket(Node):
    """A bracket list used as an argument: a mapping, or a list of integers (engines = [0, 4])."""

    kind: Literal["bracket"] = "bracket"
    mapping: Mapping


class Arg(Node):
    name: str | None  # keyword arguments keep their name; positional ones have None
    value: Expr


class Call(Node):
    kind: Literal["call"] = "call"
    func: str
    args: tuple[Arg, ...] = ()


class PathCall(Node):
    kind: Literal["path_call"] = "path_call"
    path: str
    func: str
    args: tuple[Arg, ...] = ()


class Method(Node):
    kind: Literal["method"] = "method"
    receiver: Expr
    name: str
    args: tuple[Arg, ...] = ()
    name_span: Span | None = Field(default=None, repr=False)  # where `.name` is written

    def kwarg(self, name: str) -> Expr | None:
        """The value of keyword argument `name`, if given."""
        return next((arg.value for arg in self.args if arg.name == name), None)


Expr = Annotated[
    Int | Float | Str | Name | BinOp | Neg | Bracket | Call | PathCall | Method, Field(discriminator="kind")
]


# ---- statements -----------------------------------------------------------------------------


class Let(Node):
    kind: Literal["let"] = "let"
    name: str
    mutable: bool = False
    type: TType | None = None
    value: Expr


class Assign(Node):
    kind: Literal["assign"] = "assign"
    name: str
    value: Expr


class ExprStmt(Node):
    kind: Literal["expr"] = "expr"
    expr: Expr


class Block(Node):
    stmts: tuple[Stmt, ...] = ()
    tail: Expr | None = None


class For(Node):
    kind: Literal["for"] = "for"
    attrs: tuple[Attr, ...] = ()
    var: str
    start: Expr
    stop: Expr
    body: Block


Stmt = Annotated[Let | Assign | ExprStmt | For, Field(discriminator="kind")]


# ---- items ----------------------------------------------------------------------------------


class AxisAtom(Node):
    kind: Literal["atom"] = "atom"
    name: str
    size: int


class AxisComposite(Node):
    kind: Literal["composite"] = "composite"
    name: str
    parts: tuple[str, ...]


AxisDef = Annotated[AxisAtom | AxisComposite, Field(discriminator="kind")]


class TensorParam(Node):
    kind: Literal["tensor"] = "tensor"
    name: str
    ref: Literal["", "&", "&mut"] = ""
    type: TType


class AxisParam(Node):
    kind: Literal["axis"] = "axis"
    name: str


class IntParam(Node):
    kind: Literal["int"] = "int"
    name: str


class LayoutParam(Node):
    kind: Literal["layout"] = "layout"
    name: str


Param = Annotated[TensorParam | AxisParam | IntParam | LayoutParam, Field(discriminator="kind")]


class AxesDecl(Node):
    kind: Literal["axes"] = "axes"
    axes: tuple[AxisDef, ...]


class LayoutDecl(Node):
    kind: Literal["layout"] = "layout"
    name: str
    layout: Layout


class TypeDecl(Node):
    kind: Literal["type"] = "type"
    name: str
    type: TType


class FnDecl(Node):
    kind: Literal["fn"] = "fn"
    attrs: tuple[Attr, ...] = ()
    name: str
    params: tuple[Param, ...] = ()
    returns: TType | None = None
    body: Block


class KernelDecl(Node):
    kind: Literal["kernel"] = "kernel"
    attrs: tuple[Attr, ...] = ()
    name: str
    params: tuple[Param, ...] = ()
    body: Block


Item = Annotated[AxesDecl | LayoutDecl | TypeDecl | FnDecl | KernelDecl, Field(discriminator="kind")]


class InnerAttr(Node):
    name: str
    value: str


class Program(Node):
    inner_attrs: tuple[InnerAttr, ...] = ()
    items: tuple[Item, ...] = ()

    @property
    def toolchain(self) -> str | None:
        """The version named by `#![toolchain = "X.Y.Z"]`, if any."""
        return next((a.value for a in self.inner_attrs if a.name == "toolchain"), None)

    @property
    def kernels(self) -> list[KernelDecl]:
        return [item for item in self.items if isinstance(item, KernelDecl)]


for _model in (BinOp, Neg, Arg, Call, PathCall, Method, Let, Assign, ExprStmt, Block, For, FnDecl, KernelDecl):
    _model.model_rebuild()
