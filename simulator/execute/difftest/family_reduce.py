"""Row reductions: y[A] = sum (or max) over B of f(x[A, B]), rows on clusters and slices, B in each
slice's elem and optionally split over a group of slices that `reduce_slices` adds up."""

from __future__ import annotations

import random

import numpy as np

from chiplore.simulator.execute.difftest.layouts import Digit, Placement, cut
from chiplore.simulator.execute.difftest.program import Generated, dense, engines, header, widen
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.values import Inputs, Outputs

WIDTH = {"bf16": 2, "f32": 4}


def generate(rng: random.Random, seed: int, version: str) -> Generated | None:
    a, b = 1 << rng.randint(0, 5), 1 << rng.randint(4, 9)
    dx = rng.choice(["bf16", "f32"])
    op = rng.choice(["add", "add", "max"])
    square = op == "add" and rng.random() < 0.5
    split = rng.choice([1, 1, 2, 4, 8, 16])
    if b // split < 8:
        return None
    q = b // split  # B values per slice
    rows = cut(rng, "A", a, rng.randint(1, 2)) if a > 1 else []
    spatial = Placement()
    if rows and rows[0].size == 2 and rng.random() < 0.4:
        spatial.cluster.append(rows.pop(0))
    spatial.slice.extend(rows)
    if split > 1:
        spatial.slice.append(Digit("B", q, split, b))
    used = 1
    for spot in spatial.slice:
        used *= spot if isinstance(spot, int) else spot.size
    if used > 256:
        return None
    packet = rng.choice([p for p in (4, 8, 16) if p <= q and p * WIDTH[dx] >= 8])
    inner = "B" if q == b else f"B % {q}"
    time = f"{inner} / {packet}" if packet < q else "1"
    if packet < q and q == b:
        time = f"B / {packet}"
    elif packet < q:
        time = f"B % {q} / {packet}"
    chain = ([f"{'square(), ' if square else ''}{'sum_all' if op == 'add' else 'max_all'}()"])[0]
    up = f".{widen(version)}(f32)" if dx != "f32" else ""
    reducer = f".reduce_slices({op}, group = [B / {q}], result = leader)" if split > 1 else ""
    features = [f"x:{dx}", f"op:{op}", f"split:{split}"]
    lines = [header(version, {"A": a, "B": b}) if a > 1 else header(version, {"A": 1, "B": b}),
             f"kernel rowsum(x: &hbm<{dx}>[A, B], y: &mut hbm<f32>[A]) {{",
             f"    let xd: dm<{dx}>{{{spatial.spatial_text()}, elem: [{inner}]}} = x.dma(engines = "
             f"{engines(rng.choice)});",
             f"    let s: dm<f32>{{{spatial.spatial_text()}, elem: [1 # 8]}} = main(xd)"
             f".fetch(time = [{time}], packet = [B % {packet}]){up}.vector({chain}){reducer}.commit();",
             f"    s{f'.tile(B / {q}, 0, 1)' if split > 1 else ''}.dma_into(y, engines = {engines(rng.choice)});",
             "}"]  # fmt: skip
    recipe = FixtureRecipe.model_validate({"inputs": {"x": {"dist": {"kind": "uniform", "low": -1.0, "high": 1.0}}},
                                           "sets": ["g0"]})  # fmt: skip

    def meaning(given: Inputs) -> Outputs:
        x = dense(given["x"]).astype(np.float64).reshape(a, b)
        values = np.square(x) if square else x
        total = values.sum(axis=1) if op == "add" else values.max(axis=1)
        return {"y": total.astype(np.float32)}

    source = "\n".join(lines) + "\n"
    return Generated("reduce", seed, version, source, recipe, meaning, tuple(features))
