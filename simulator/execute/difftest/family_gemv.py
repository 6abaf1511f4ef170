"""Matrix-vector programs: y[R] = sum_K w[R, K] x[K], rows spread over clusters and slices, x loaded
into a TRF, optionally contracted in chunks of K (a TRF of the chunk's extent each time, partials
added by a vector pass), with bf16 or f8 weights drawn as periodic rows of any period."""

from __future__ import annotations

import random

import numpy as np

from chiplore.simulator.execute.difftest.layouts import Digit, Placement, cut
from chiplore.simulator.execute.difftest.program import Generated, dense, engines, header, narrow, stored
from chiplore.simulator.execute.recipe import FixtureRecipe
from chiplore.simulator.execute.values import Inputs, Outputs

WIDTH = {"bf16": 2, "f8e4m3": 1}


def generate(rng: random.Random, seed: int, version: str) -> Generated | None:
    r, k = 1 << rng.randint(3, 9), 1 << rng.randint(6, 11)
    dw = rng.choice(["bf16", "f8e4m3"]) if version != "0.5.0" else "bf16"
    chunks = rng.choice([1, 1, 2, 4])
    m = rng.choice([2, 4, 8] if chunks > 1 else [1, 2, 4, 8])
    dy = "bf16" if m >= 4 and rng.random() < 0.5 else "f32"
    if r // m > 512 or m > r:
        return None
    rows = cut(rng, "R", r // m if r > m else 1, rng.randint(1, 2)) if r > m else []
    rows = [Digit("R", d.stride * m, d.size, r) for d in rows]
    spatial = Placement()
    if rows and rows[0].size == 2 and rng.random() < 0.4:
        spatial.cluster.append(rows.pop(0))
    spatial.slice.extend(rows)
    if sum(d.size.bit_length() - 1 for d in rows if isinstance(d, Digit)) > 8:
        return None
    both = bool(spatial.cluster)
    inner = f"R % {m}" if m < r else "R"
    elem_rows = f"{inner}, " if m > 1 else ""
    fold = f"[{inner}]" if m > 1 else "[1 # 8]"
    kc = k // chunks
    packet = rng.choice([p for p in (8, 16, 32, 64) if p * WIDTH[dw] <= 64 and p <= kc])
    features = [f"w:{dw}", f"y:{dy}", f"chunks:{chunks}", f"rows/slice:{m}"]
    every = f"cluster: [{'rep(2)' if both else '1 # 2'}], slice: [rep(256)]"
    lines = [header(version, {"R": r, "K": k}),
             f"kernel gemv(w: &hbm<{dw}>[R, K], x: &hbm<bf16>[K], y: &mut hbm<{dy}>[R]) {{",
             f"    let xa: dm<bf16>{{{every}, elem: [K]}} = x.dma(engines = {engines(rng.choice)});",
             f"    let wd: dm<{dw}>{{{spatial.spatial_text()}, elem: [{elem_rows}K]}} = w.dma(engines = "
             f"{engines(rng.choice)});"]  # fmt: skip
    trf = f"trf<bf16>{{{spatial.spatial_text()}, lane: [1], elem: [K{f' = {kc}' if chunks > 1 else ''}]}}"
    time_k = f"K / {packet}" + (f" = {kc // packet}" if chunks > 1 else "")
    contract = (f".fetch(time = [{elem_rows}{time_k}], packet = [K % {packet}])"
                f".contract(trf = xt, reduce = [K], fold = {fold})")  # fmt: skip
    acc = f"dm<f32>{{{spatial.spatial_text()}, elem: [{inner if m > 1 else '1 # 8'}]}}"
    if chunks == 1:
        lines.append(f"    let xt: {trf} = sub(xa).fetch(time = [K / 16], packet = [K % 16]).to_trf();")
        lines.append(f"    let acc: {acc} = main(wd){contract}.commit();")
    else:
        lines.append(f"    let mut acc: {acc} = dm::zeros();")
        lines.append(f"    for c in 0..{chunks} {{")
        lines.append(f"        let xt: {trf} = sub(xa.tile(K, c * {kc}, {kc}))"
                     f".fetch(time = [K / 16 = {kc // 16}], packet = [K % 16]).to_trf();")  # fmt: skip
        lines.append(f"        let part: {acc} = main(wd.tile(K, c * {kc}, {kc})){contract}.commit();")
        lines.append(f"        let pv: vrf<f32>{{{spatial.spatial_text()}, elem: [{inner}]}} = sub(part)"
                     f".fetch(time = [1], packet = [{inner}]).to_vrf();")  # fmt: skip
        accumulate = f"main(acc).fetch(time = [1], packet = [{inner}]).vector(add(vrf = pv)).commit_into(acc);"
        lines.append(f"        {accumulate}")
        lines.append("    }")
    result = "acc"
    if dy == "bf16":
        rounding = f".fetch(time = [1], packet = [{inner}]).vector(mul(1.0)).{narrow(version)}(bf16).commit();"
        lines.append(f"    let yb: dm<bf16>{{{spatial.spatial_text()}, elem: [{inner}]}} = main(acc){rounding}")
        result = "yb"
    lines.append(f"    {result}.dma_into(y, engines = {engines(rng.choice)});")
    lines.append("}")
    period = rng.choice([1, 3, 5, 7, r])
    weights = (
        {"dist": {"kind": "f8_codes", "exponent_low": 4, "exponent_high": 7}}
        if dw == "f8e4m3"
        else {"dist": {"kind": "uniform", "low": -1.0, "high": 1.0}}
    )
    recipe = FixtureRecipe.model_validate({
        "inputs": {"w": {**weights, "distinct_rows": period}, "x": {"dist": {"kind": "uniform", "low": -1.0,
                                                                                  "high": 1.0}}},
        "sets": ["g0"],
    })  # fmt: skip

    def meaning(given: Inputs) -> Outputs:
        w = dense(given["w"]).astype(np.float64).reshape(r, k)
        x = dense(given["x"]).astype(np.float64).reshape(k)
        total = np.zeros(r, dtype=np.float32)
        for c in range(chunks):
            part = (w[:, c * kc : (c + 1) * kc] @ x[c * kc : (c + 1) * kc]).astype(np.float32)
            total = part if chunks == 1 else (total + part).astype(np.float32)
        return {"y": stored(total, dy)}

    source = "\n".join(lines) + "\n"
    return Generated("gemv", seed, version, source, recipe, meaning, tuple(features))
