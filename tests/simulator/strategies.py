"""Hypothesis strategies that build arbitrary, printable Ferrite IR."""

from __future__ import annotations

from hypothesis import strategies as st

from chiplore.simulator.dsl import ir

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).map(lambda s: f"v{s}")
type_names = st.from_regex(r"[A-Z][A-Za-z0-9]{0,5}", fullmatch=True).map(lambda s: f"T{s}")
dtypes = st.sampled_from(ir.DTYPES)
small_ints = st.integers(min_value=0, max_value=10**6)
floats = st.floats(min_value=0, max_value=1e12, allow_nan=False, allow_infinity=False)
strings = st.text(alphabet=st.characters(codec="ascii", exclude_characters='"\\\n\r'), max_size=12)

ops = st.tuples(st.sampled_from(["/", "%"]), st.one_of(small_ints, names))
terms = st.one_of(
    st.builds(ir.Term, kind=st.just("axis"), axis=type_names, ops=st.lists(ops, max_size=3).map(tuple)),
    st.builds(ir.Term, kind=st.just("unit"), value=small_ints),
    st.builds(ir.Term, kind=st.just("rep"), value=small_ints),
    st.builds(ir.Term, kind=st.just("at"), value=small_ints, positions=small_ints),
).flatmap(
    lambda term: st.builds(
        lambda restrict, pad: term.model_copy(update={"restrict": restrict, "pad": pad}),
        st.none() | small_ints,
        st.none() | small_ints,
    )
)
mappings = st.builds(ir.Mapping, terms=st.lists(terms, max_size=4).map(tuple))
layout_items = st.one_of(
    st.builds(ir.MapField, name=names, mapping=mappings),
    st.builds(ir.IntField, name=names, value=small_ints),
    st.builds(ir.Spread, name=type_names),
)
layouts = st.builds(ir.Layout, items=st.lists(layout_items, min_size=1, max_size=4).map(tuple))
ttypes = st.one_of(
    st.builds(ir.HbmType, dtype=dtypes, mapping=mappings),
    st.builds(ir.DevType, space=st.sampled_from(["dm", "trf", "vrf"]), dtype=dtypes, layout=layouts),
    st.builds(ir.TypeRef, name=type_names),
)

leaves = st.one_of(
    st.builds(ir.Int, value=small_ints),
    st.builds(ir.Float, value=floats),
    st.builds(ir.Str, value=strings),
    st.builds(ir.Name, id=names),
)


def _compound(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    args = st.lists(
        st.builds(ir.Arg, name=st.none() | names, value=st.one_of(children, st.builds(ir.Bracket, mapping=mappings))),
        max_size=3,
    ).map(tuple)
    return st.one_of(
        st.builds(ir.BinOp, op=st.sampled_from(["+", "-", "*", "/", "%"]), left=children, right=children),
        st.builds(ir.Neg, operand=children),
        st.builds(ir.Call, func=names, args=args),
        st.builds(ir.PathCall, path=names, func=names, args=args),
        st.builds(ir.Method, receiver=children, name=names, args=args),
    )


exprs = st.recursive(leaves, _compound, max_leaves=12)
attrs = st.builds(
    ir.Attr,
    name=names,
    args=st.none()
    | st.lists(
        st.builds(
            ir.AttrArg,
            name=st.none() | names,
            value=st.one_of(
                st.builds(ir.AttrValue, kind=st.just("int"), value=small_ints),
                st.builds(ir.AttrValue, kind=st.just("float"), value=floats),
                st.builds(ir.AttrValue, kind=st.just("string"), value=strings),
                st.builds(ir.AttrValue, kind=st.just("name"), value=names),
            ),
        ),
        max_size=3,
    ).map(tuple),
)


def _statements(blocks: st.SearchStrategy[ir.Block]) -> st.SearchStrategy[object]:
    return st.one_of(
        st.builds(ir.Let, name=names, mutable=st.booleans(), type=st.none() | ttypes, value=exprs),
        st.builds(ir.Assign, name=names, value=exprs),
        st.builds(ir.ExprStmt, expr=exprs),
        st.builds(
            ir.For, attrs=st.lists(attrs, max_size=2).map(tuple), var=names, start=exprs, stop=exprs, body=blocks
        ),
    )


blocks = st.deferred(
    lambda: st.builds(
        ir.Block,
        stmts=st.lists(_statements(blocks), max_size=3).map(tuple),
        tail=st.none() | exprs,
    )
)
params = st.one_of(
    st.builds(ir.TensorParam, name=names, ref=st.sampled_from(["", "&", "&mut"]), type=ttypes),
    st.builds(ir.AxisParam, name=names),
    st.builds(ir.IntParam, name=names),
    st.builds(ir.LayoutParam, name=names),
)
axis_defs = st.one_of(
    st.builds(ir.AxisAtom, name=type_names, size=small_ints),
    st.builds(ir.AxisComposite, name=type_names, parts=st.lists(type_names, min_size=2, max_size=4).map(tuple)),
)
items = st.one_of(
    st.builds(ir.AxesDecl, axes=st.lists(axis_defs, min_size=1, max_size=4).map(tuple)),
    st.builds(ir.LayoutDecl, name=type_names, layout=layouts),
    st.builds(ir.TypeDecl, name=type_names, type=ttypes),
    st.builds(
        ir.FnDecl,
        attrs=st.lists(attrs, max_size=2).map(tuple),
        name=names,
        params=st.lists(params, max_size=3).map(tuple),
        returns=st.none() | ttypes,
        body=blocks,
    ),
    st.builds(
        ir.KernelDecl,
        attrs=st.lists(attrs, max_size=2).map(tuple),
        name=names,
        params=st.lists(params, max_size=3).map(tuple),
        body=blocks,
    ),
)
programs = st.builds(
    ir.Program,
    inner_attrs=st.lists(st.builds(ir.InnerAttr, name=names, value=strings), max_size=2).map(tuple),
    items=st.lists(items, max_size=4).map(tuple),
)
