"""Mutations of programs: small edits a user makes by mistake or on purpose (a number, a digit, a
dtype, a stage dropped, a statement moved), applied to generated programs, the docs' examples and
the shipped kernels. A mutant has no numpy meaning: it is judged by the invariants that hold for any
accepted program (runs, finite, deterministic)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from chiplore.simulator.dsl.ir import DTYPES
from chiplore.simulator.execute.difftest.program import Generated
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.signature import KernelSignature

TOKEN = re.compile(r"//[^\n]*|\s+|\d+\.\d+|\d+|[A-Za-z_][A-Za-z0-9_]*!?|::|\.\.|->|#!\[|#\[|&mut|\S")
Mutation = Callable[[list[str], random.Random], bool]


def mutate(program: Generated, rng: random.Random, seed: int, edits: int = 1) -> Generated:
    """`program` with `edits` random edits (each picked among the mutations that apply)."""
    tokens = TOKEN.findall(program.source)
    applied = []
    for _ in range(edits):
        for name in rng.sample(list(MUTATIONS), len(MUTATIONS)):
            if MUTATIONS[name](tokens, rng):
                applied.append(name)
                break
    source = "".join(tokens)
    return Generated(f"mutant:{program.family}", seed, program.version, source, program.recipe, None,
                     (*program.features, *(f"mutation:{a}" for a in applied)))  # fmt: skip


def _number(tokens: list[str], rng: random.Random) -> bool:
    """An integer literal becomes a neighbour: +-1, x2, /2, 0 or 1."""
    spots = [i for i, t in enumerate(tokens) if t.isdigit() and not _in_header(tokens, i)]
    if not spots:
        return False
    i = rng.choice(spots)
    value = int(tokens[i])
    tokens[i] = str(rng.choice([value + 1, max(value - 1, 0), value * 2, value // 2, 0, 1]))
    return True


def _operator(tokens: list[str], rng: random.Random) -> bool:
    """`/` and `%` in a digit trade places."""
    spots = [i for i, t in enumerate(tokens) if t in ("/", "%")]
    if not spots:
        return False
    i = rng.choice(spots)
    tokens[i] = "%" if tokens[i] == "/" else "/"
    return True


def _dtype(tokens: list[str], rng: random.Random) -> bool:
    spots = [i for i, t in enumerate(tokens) if t in DTYPES]
    if not spots:
        return False
    i = rng.choice(spots)
    tokens[i] = rng.choice([d for d in DTYPES if d != tokens[i]])
    return True


def _axis(tokens: list[str], rng: random.Random) -> bool:
    """One axis name in a term becomes another axis of the program."""
    axes = sorted({t for t in tokens if re.fullmatch(r"[A-Z][A-Za-z0-9]*", t)} - {"E"})
    spots = [i for i, t in enumerate(tokens) if t in axes and not _in_header(tokens, i)]
    if len(axes) < 2 or not spots:
        return False
    i = rng.choice(spots)
    tokens[i] = rng.choice([a for a in axes if a != tokens[i]])
    return True


def _drop_stage(tokens: list[str], rng: random.Random) -> bool:
    """A `.name(...)` call disappears from a chain (a cast, a vector chain, a tile)."""
    kept = ("fetch", "commit", "commit_into", "dma", "dma_into", "to_trf", "to_vrf")
    spots = [
        i for i in range(len(tokens) - 2) if tokens[i] == "." and tokens[i + 2] == "(" and tokens[i + 1] not in kept
    ]
    if not spots:
        return False
    i = rng.choice(spots)
    end = _closing(tokens, i + 2)
    if end is None:
        return False
    del tokens[i : end + 1]
    return True


def _drop_term(tokens: list[str], rng: random.Random) -> bool:
    """A term leaves a bracketed mapping list (`[A % 4, B]` -> `[B]`)."""
    spots = [i for i, t in enumerate(tokens) if t == "," and _inside(tokens, i, "[", "]")]
    if not spots:
        return False
    i = rng.choice(spots)
    start = i - 1
    while start > 0 and tokens[start] not in ("[", ","):
        start -= 1
    del tokens[start + 1 : i + 1]
    return True


def _swap_lines(tokens: list[str], rng: random.Random) -> bool:
    """Two statements trade places (a use before its definition, a store before the pass)."""
    text = "".join(tokens)
    lines = text.split("\n")
    body = [i for i, line in enumerate(lines) if line.startswith("    ") and line.rstrip().endswith(";")]
    if len(body) < 2:
        return False
    i, j = sorted(rng.sample(body, 2))
    lines[i], lines[j] = lines[j], lines[i]
    tokens[:] = TOKEN.findall("\n".join(lines))
    return True


def _restrict(tokens: list[str], rng: random.Random) -> bool:
    """A tile's extent `= k` changes, or a term gains one."""
    spots = [i for i in range(len(tokens) - 2) if tokens[i] == "=" and tokens[i + 2].isdigit()]
    if not spots:
        return False
    i = rng.choice(spots) + 2
    tokens[i] = str(max(1, int(tokens[i]) * rng.choice([2, 1]) // rng.choice([1, 2])))
    return True


MUTATIONS: dict[str, Mutation] = {
    "number": _number, "operator": _operator, "dtype": _dtype, "axis": _axis, "drop-stage": _drop_stage,
    "drop-term": _drop_term, "swap-lines": _swap_lines, "restrict": _restrict,
}  # fmt: skip


def _in_header(tokens: list[str], index: int) -> bool:
    """Inside `#![...]` or `axes! {...}`: edits there change sizes, not the program's logic."""
    text = "".join(tokens[:index])
    return (text.count("axes!") > 0 and "kernel" not in text) or "#![" in text.rsplit("\n", 1)[-1]


def _closing(tokens: list[str], opening: int) -> int | None:
    depth = 0
    for i in range(opening, len(tokens)):
        depth += tokens[i] == "("
        depth -= tokens[i] == ")"
        if depth == 0:
            return i
    return None


def _inside(tokens: list[str], index: int, left: str, right: str) -> bool:
    depth = 0
    for token in reversed(tokens[:index]):
        if token == right:
            depth += 1
        elif token == left:
            if depth == 0:
                return True
            depth -= 1
    return False


def default_recipe(signature: KernelSignature) -> FixtureRecipe:
    """Inputs for a program that brings no recipe (a docs example): codes for f8/f4, small integers
    for integer parameters (run-time indices), uniform values otherwise."""
    inputs: dict[str, dict[str, object]] = {}
    for param in signature.params:
        if param.dtype == "f8e4m3":
            inputs[param.name] = {"dist": {"kind": "f8_codes", "exponent_low": 5, "exponent_high": 8}}
        elif param.dtype == "f4e2m1" and param.shape and param.shape[-1][1] % 2 == 0:
            inputs[param.name] = {"dist": {"kind": "f4_codes"}}
        elif param.dtype in ("i8", "i32"):
            inputs[param.name] = {"dist": {"kind": "integers", "low": 0, "high": 2}}
        else:
            inputs[param.name] = {"dist": {"kind": "uniform", "low": -1.0, "high": 1.0}}
    return FixtureRecipe.model_validate({"inputs": inputs, "sets": ["g0"]})


def variant(program: Generated, rng: random.Random, seed: int) -> Generated:
    """`program` rewritten so that it must mean the same (the numpy meaning is kept): the time digits
    of a fetch in another order, or another engine list. A placement or coverage rule that refuses a
    variant of an accepted program is over-strict."""
    source = program.source
    fetches = list(re.finditer(r"fetch\(time = \[([^\]]*)\]", source))
    engine_lists = list(re.finditer(r"engines = \[[0-9, ]*\]", source))
    edits = []
    if fetches and rng.random() < 0.6:
        match = rng.choice(fetches)
        terms = [t.strip() for t in match.group(1).split(",")]
        rng.shuffle(terms)
        source = source[: match.start(1)] + ", ".join(terms) + source[match.end(1) :]
        edits.append("time-order")
    elif engine_lists:
        match = rng.choice(engine_lists)
        chosen = rng.choice(["[0]", "[3]", "[0, 1]", "[1, 2, 3]", "[0, 4]", "[4, 5, 6, 7]"])
        source = source[: match.start()] + f"engines = {chosen}" + source[match.end() :]
        edits.append("engines")
    return Generated(f"variant:{program.family}", seed, program.version, source, program.recipe, program.meaning,
                     (*program.features, *(f"variant:{e}" for e in edits)))  # fmt: skip
