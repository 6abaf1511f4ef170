"""The feed-forward family (`decoder_feedforward`): pre-norm, up and gate (f4 codes with f8 block
scales), GeGLU, down, post-norm, residual and layer scalar.

up/gate: each cluster takes half of L, its 256 slices are 128 row-groups of 60 rows x 2 k-groups
of 1920; the stream carries both matrices in chunks of `up_rows` rows per slice. down: each cluster
takes half of H, 15 row-groups of 128 rows x 16 k-groups of 960 of L, two chunks of `down_rows`
rows per loop step so their block scales alternate between two VRFs. f4 codes are widened to f8 in
the fetch adapter on the way into the contraction, or contracted as they are (`direct`, where the
rules say a contraction takes an f4 stream); block scales are applied by the vector engine.
Scales, whose short rows are slow per packet, get engines of their own beside the weights'.
"""

from __future__ import annotations

from simulator.pack import capabilities as C
from simulator.pack import params as P
from simulator.pack.space.family import (
    Family,
    Knob,
    all_reduce,
    bridge,
    engine_list,
    engines_text,
    lookup,
    narrowing,
    packet_arg,
    usable_dm,
    widening,
)
from simulator.pack.workload import Stream, Workload

H, L = 3840, 15360
UP_ROWS_PER_SLICE = 60  # L / 2 clusters / 128 row-groups
DOWN_ROWS_PER_SLICE = 128  # H / 2 clusters / 15 row-groups, one HBM unit of bf16 output


class FeedForward(Family):
    kernel = "decoder_feedforward"
    knobs = (
        Knob("up_rows", (2, 4, 6)),  # a commit writes 8, 16, 24 or 32 B of f32 per flit
        Knob("up_depth", (4, 6, 8, 12)),
        Knob("down_rows", (4, 8, 16)),
        Knob("down_depth", (2, 4, 6, 8)),
        Knob("engines", (1, 2)),  # engine 3 of each cluster fetches the down scales
        # the weights' DMA packet: 0 = the longest contiguous run (the compiler's choice), else smaller
        Knob("packet", (0, 256, 128)),
        Knob("direct", (0, 1)),  # 1: f4 codes straight into the contraction, no decode in the fetch adapter
    )

    def valid(self, p: dict[str, int], facts: dict[str, float]) -> bool:
        up_chunks = UP_ROWS_PER_SLICE // p["up_rows"]
        down_steps = DOWN_ROWS_PER_SLICE // p["down_rows"] // 2
        if UP_ROWS_PER_SLICE % p["up_rows"] or p["up_depth"] > up_chunks or p["down_depth"] > down_steps:
            return False
        if p.get("direct", 0) and facts.get(C.F4_STREAM, 0.0) <= 0:
            return False
        return self.dm_bytes(p, facts) <= usable_dm(facts)

    def dm_bytes(self, p: dict[str, int], facts: dict[str, float]) -> int:
        up = p["up_depth"] * p["up_rows"] * (1920 // 2 + 120) * 2
        down = p["down_depth"] * 2 * p["down_rows"] * 960 // 2 + 128 * 60
        return up + down + 60 * 4 * 2 + 128 * 4 + 16 * 1024

    def stream_dtypes(self, p: dict[str, int], facts: dict[str, float]) -> tuple[str, ...]:
        return ("f4e2m1",) if p.get("direct", 0) else ("f8e4m3",)  # else widened to f8 in the fetch adapter

    def workload(self, p: dict[str, int], facts: dict[str, float]) -> Workload:
        decode = facts.get(P.DECODE_F4_RATE.key, facts.get(P.DECODE_RATE.key, 1.6))
        up_chunks = UP_ROWS_PER_SLICE // p["up_rows"]
        down_chunks = DOWN_ROWS_PER_SLICE // p["down_rows"]
        chunk_bytes = p["up_rows"] * 1920 // 2 * 2  # up and gate codes per slice per chunk
        return Workload(
            streams=(
                Stream(
                    bytes_per_cluster=2 * L * H / 2 / 2,
                    packet_bytes=p["packet"] or 960,
                    engines=p["engines"],
                    commands=up_chunks * 2,
                    slices=256,
                ),
                Stream(
                    bytes_per_cluster=2 * L * H / 16 / 2,
                    packet_bytes=120,
                    engines=1,
                    commands=up_chunks * 2,
                    slices=256,
                ),
                Stream(
                    bytes_per_cluster=L * H / 2 / 2,
                    packet_bytes=p["packet"] or 480,
                    engines=4,
                    commands=down_chunks,
                    slices=240,
                ),
                Stream(bytes_per_cluster=L * H / 16 / 2, packet_bytes=60, engines=1, commands=1, slices=240),
            ),
            # a direct contraction takes 64 f4 codes (32 B) a step; a decoded stream is paced by the decoder
            chunk_compute=chunk_bytes / 32 if p.get("direct", 0) else chunk_bytes / decode,
            chunk_passes=4,
            head_passes=6,
            head_switch=(128, 1920 // 16),
            tail_passes=12 if bridge(facts) else 11,
            tail_reduce=(16, 16),
            tail_dmas=3 if bridge(facts) else 4,  # the bridge replaces the DMA that swaps the clusters' sums
            depth=p["up_depth"],
            chunks=up_chunks + down_chunks,
        )

    def source(self, p: dict[str, int], facts: dict[str, float], version: str) -> str:
        ur, dr = p["up_rows"], p["down_rows"]
        up_chunks, down_steps = UP_ROWS_PER_SLICE // ur, DOWN_ROWS_PER_SLICE // dr // 2
        n = p["engines"]
        weights, scales = engine_list(n), engines_text([n, 4 + n])  # scales on the next engine of each cluster
        widen = widening(facts)
        narrow = narrowing(facts)
        decode = "" if p.get("direct", 0) else f"            .{lookup(facts)}(f8e4m3)\n"

        def up_pass(codes: str, scale: str, acc: str) -> str:
            return (
                f"        main({codes})\n"
                f"            .fetch(time = [L % 60 = {ur}, H % 1920 / 64], packet = [H % 64])\n"
                f"{decode}"
                f"            .contract(trf = xs, reduce = [H % 16], fold = [H / 16 % 8])\n"
                f"            .vector(mul(vrf = {scale}), sum_time([H % 1920 / 128]), sum_packet())\n"
                f"            .transpose(time = [1], packet = [L % 60 = {ur}])\n"
                f"            .commit_into({acc}.tile(L % 60, c * {ur}, {ur}));\n"
            )

        def down_pass(codes: str, scale: str, offset: str) -> str:
            return (
                f"        main({codes})\n"
                f"            .fetch(time = [H % 128 = {dr}, L % 960 / 64], packet = [L % 64])\n"
                f"{decode}"
                f"            .contract(trf = acts, reduce = [L % 16])\n"
                f"            .vector(mul(vrf = {scale}), sum_time([L % 960 / 64]), sum_packet())\n"
                f"            .transpose(time = [1], packet = [H % 128 = {dr}])\n"
                f"            .commit_into(down_acc.tile(H % 128, {offset}, {dr}));\n"
            )

        def down_chunk(name: str, offset: str) -> str:
            return (
                f"        let {name}: dm<f4e2m1>{{..DGrid, elem: [H % 128 = {dr}, L % 960]}} =\n"
                f"            down_weight_packed.tile(H % 128, {offset}, {dr}).dma(engines = [0, 1, 2, 3, 4, 5, 6, 7]{packet_arg(p)});\n"
            )

        def down_scale(name: str, offset: str) -> str:
            return (
                f"        let {name}: vrf<f32>{{..DGrid, elem: [H % 128 = {dr}, L % 960 / 16]}} = "
                f"sub(down_s.tile(H % 128, {offset}, {dr}))\n"
                f"            .fetch(time = [H % 128 = {dr}], packet = [L % 960 / 16]).{widen}(f32).to_vrf();\n"
            )

        def up_load(name: str, matrix: str) -> str:
            return (
                f"        let {name}: dm<f4e2m1>{{..UGrid, elem: [L % 60 = {ur}, H % 1920]}} =\n"
                f"            {matrix}_weight_packed.tile(L % 60, c * {ur}, {ur}).dma(engines = {weights}{packet_arg(p)});\n"
            )

        def up_scale(name: str, matrix: str) -> str:
            return (
                f"        let {name}_d: dm<f8e4m3>{{..UGrid, elem: [L % 60 = {ur}, H % 1920 / 16]}} =\n"
                f"            {matrix}_weight_scale.tile(L % 60, c * {ur}, {ur}).dma(engines = {scales});\n"
                f"        let {name}: vrf<f32>{{..UGrid, elem: [L % 60 = {ur}, H % 1920 / 16]}} = sub({name}_d)\n"
                f"            .fetch(time = [L % 60 = {ur}], packet = [H % 1920 / 16]).{widen}(f32).to_vrf();\n"
            )

        first, second = "c2", "c2 + " + str(dr)
        rms = f".vector(mul({1 / H:.12f}), add(0.000001), rsqrt())"
        if bridge(facts):  # sum over the row-groups, then over the clusters on the bridge
            post_layout = "DSum"
            sum_layout = "\nlayout DSum  = { cluster: [rep(2)], slice: [rep(15) # 16, 1 # 16] };"
            cross = (
                "    let csum: dm<f32>{cluster: [H / 1920], slice: [rep(15) # 16, 1 # 16], elem: [1 # 8]} = main(sq)\n"
                f"        .fetch(time = [1], packet = [1 # 8])\n        {all_reduce('H / 128 % 15', facts)}\n"
                "        .commit();\n"
                "    let post_d: dm<f32>{..DSum, elem: [1 # 8]} = main(csum)\n"
                f"        .fetch(time = [1], packet = [1 # 8])\n        .reduce_clusters(add)\n        {rms}\n"
                "        .commit();\n"
            )
        else:  # each cluster's row-group sums DMA'd to both clusters, added in one pass
            post_layout, sum_layout = "DAll", ""
            cross = (
                "    let sq_all: dm<f32>{..DAll, elem: [H / 128 # 32]} = sq.dma(engines = [2, 6]);\n"
                "    let post_d: dm<f32>{..DAll, elem: [1 # 8]} = main(sq_all)\n"
                "        .fetch(time = [1], packet = [H / 128 # 32])\n"
                f"        .vector(sum_all(), mul({1 / H:.12f}), add(0.000001), rsqrt())\n        .commit();\n"
            )
        return f"""#![toolchain = "{version}"]
// chiplore design: feed-forward, up/gate chunks of {ur} rows (depth {p["up_depth"]}), down chunks of {dr} rows
// in pairs (depth {p["down_depth"]}), {n} weight engines per cluster for up/gate
axes! {{ H = {H}, L = {L} }}

layout KIn   = {{ cluster: [rep(2)], slice: [1 # 128, H / 1920] }};
layout UGrid = {{ cluster: [L / 7680], slice: [L / 60 % 128, H / 1920] }};
layout URow  = {{ cluster: [L / 7680], slice: [L / 60 % 128, 1 # 2] }};
layout AIn   = {{ cluster: [rep(2)], slice: [1 # 16, L / 960] }};
layout DGrid = {{ cluster: [H / 1920], slice: [H / 128 % 15 # 16, L / 960] }};
layout DRow  = {{ cluster: [H / 1920], slice: [H / 128 % 15 # 16, 1 # 16] }};
layout DAll  = {{ cluster: [rep(2)], slice: [rep(16), 1 # 16] }};{sum_layout}

kernel decoder_feedforward(
    residual: &mut hbm<bf16>[H],
    pre_ff_rms_weight: &hbm<bf16>[H],
    up_weight_packed: &hbm<f4e2m1>[L, H],
    gate_weight_packed: &hbm<f4e2m1>[L, H],
    down_weight_packed: &hbm<f4e2m1>[H, L],
    up_weight_scale: &hbm<f8e4m3>[L, H / 16],
    gate_weight_scale: &hbm<f8e4m3>[L, H / 16],
    down_weight_scale: &hbm<f8e4m3>[H, L / 16],
    up_global_scale: &hbm<f32>[1],
    gate_global_scale: &hbm<f32>[1],
    down_global_scale: &hbm<f32>[1],
    post_ff_rms_weight: &hbm<bf16>[H],
    layer_scalar: &hbm<bf16>[1],
) {{
    let res_k: dm<bf16>{{..KIn, elem: [H % 1920]}} = residual.dma(engines = [0, 4]);
    let pre_k: dm<bf16>{{..KIn, elem: [H % 1920]}} = pre_ff_rms_weight.dma(engines = [0, 4]);
    let rms_d: dm<f32>{{..KIn, elem: [1 # 8]}} = main(res_k)
        .fetch(time = [H % 1920 / 16], packet = [H % 16]).{widen}(f32)
        .vector(square(), sum_all())
        {all_reduce("H / 1920", facts)}
        .vector(mul({1 / H:.12f}), add(0.000001), rsqrt())
        .commit();
    let rms: vrf<f32>{{..KIn, elem: [1 # 8]}} = sub(rms_d).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let pre_v: vrf<f32>{{..KIn, elem: [H % 1920]}} = sub(pre_k)
        .fetch(time = [H % 1920 / 8], packet = [H % 8]).{widen}(f32).to_vrf();
    let xn: dm<bf16>{{..KIn, elem: [H % 1920]}} = main(res_k)
        .fetch(time = [H % 1920 / 8], packet = [H % 8]).{widen}(f32)
        .vector(mul(vrf = rms), mul(vrf = pre_v))
        .{narrow}(bf16)
        .commit();
    let xs: trf<bf16>{{cluster: [rep(2)], slice: [rep(128), H / 1920], lane: [1], elem: [H % 1920]}} =
        main(xn).fetch(time = [H % 1920 / 16], packet = [H % 16])
            .switch(broadcast, slice = [rep(128), H / 1920])
            .to_trf();

    let down_s: dm<f8e4m3>{{..DGrid, elem: [H % 128, L % 960 / 16]}} = down_weight_scale.dma(engines = [3, 7]);

    let mut up_acc: dm<f32>{{..UGrid, elem: [L % 60]}} = dm::empty();
    let mut gate_acc: dm<f32>{{..UGrid, elem: [L % 60]}} = dm::empty();
    #[pipeline(depth = {p["up_depth"]})]
    for c in 0..{up_chunks} {{
{up_load("up_c", "up")}{up_load("gate_c", "gate")}{up_scale("up_sv", "up")}{up_scale("gate_sv", "gate")}{up_pass("up_c", "up_sv", "up_acc")}{up_pass("gate_c", "gate_sv", "gate_acc")}    }}

    let up_g: dm<f32>{{..URow, elem: [1 # 8]}} = up_global_scale.dma(engines = [1, 5]);
    let gate_g: dm<f32>{{..URow, elem: [1 # 8]}} = gate_global_scale.dma(engines = [1, 5]);
    let up_gv: vrf<f32>{{..URow, elem: [1 # 8]}} = sub(up_g).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let gate_gv: vrf<f32>{{..URow, elem: [1 # 8]}} = sub(gate_g).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let gelu_d: dm<f32>{{..URow, elem: [L % 60]}} = main(gate_acc)
        .fetch(time = [L % 60 / 4], packet = [L % 4])
        .reduce_slices(add, group = [H / 1920], result = leader)
        .vector(mul(vrf = gate_gv), stash(), mul(0.70710678), erf(), add(1.0), mul(stash))
        .commit();
    let gelu: vrf<f32>{{..URow, elem: [L % 60]}} = sub(gelu_d).fetch(time = [L % 60 / 4], packet = [L % 4]).to_vrf();
    let act: dm<bf16>{{..URow, elem: [L % 60]}} = main(up_acc)
        .fetch(time = [L % 60 / 4], packet = [L % 4])
        .reduce_slices(add, group = [H / 1920], result = leader)
        .vector(mul(vrf = up_gv), mul(vrf = gelu), mul(0.5))
        .{narrow}(bf16)
        .commit();
    let act_k: dm<bf16>{{..AIn, elem: [L % 960]}} = act.dma(engines = [2, 3, 6, 7]);
    let acts: trf<bf16>{{cluster: [rep(2)], slice: [rep(16), L / 960], lane: [1], elem: [L % 960]}} =
        main(act_k).fetch(time = [L % 960 / 16], packet = [L % 16])
            .switch(broadcast, slice = [rep(16), L / 960])
            .to_trf();

    let mut down_acc: dm<f32>{{..DGrid, elem: [H % 128]}} = dm::empty();
    #[pipeline(depth = {p["down_depth"]})]
    for s in 0..{down_steps} {{
        let c2 = s * {2 * dr};
{down_chunk("dn_a", first)}{down_chunk("dn_b", second)}{down_scale("dn_as", first)}{down_scale("dn_bs", second)}{down_pass("dn_a", "dn_as", first)}{down_pass("dn_b", "dn_bs", second)}    }}

    let down_g: dm<f32>{{..DRow, elem: [1 # 8]}} = down_global_scale.dma(engines = [1, 5]);
    let down_gv: vrf<f32>{{..DRow, elem: [1 # 8]}} = sub(down_g).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let d: dm<f32>{{..DRow, elem: [H % 128]}} = main(down_acc)
        .fetch(time = [H % 128 / 8], packet = [H % 8])
        .reduce_slices(add, group = [L / 960], result = leader)
        .vector(mul(vrf = down_gv))
        .commit();
    let sq: dm<f32>{{..DRow, elem: [1 # 8]}} = main(d)
        .fetch(time = [H % 128 / 8], packet = [H % 8])
        .vector(square(), sum_all())
        .commit();
{cross}    let post: vrf<f32>{{..{post_layout}, elem: [1 # 8]}} = sub(post_d).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let post_w: dm<bf16>{{..DRow, elem: [H % 128]}} = post_ff_rms_weight.dma(engines = [3, 7]);
    let res_r: dm<bf16>{{..DRow, elem: [H % 128]}} = residual.dma(engines = [3, 7]);
    let layer: dm<bf16>{{..DRow, elem: [1 # 16]}} = layer_scalar.dma(engines = [3, 7]);
    let post_wv: vrf<f32>{{..DRow, elem: [H % 128]}} = sub(post_w).fetch(time = [H % 128 / 8], packet = [H % 8]).{widen}(f32).to_vrf();
    let res_v: vrf<f32>{{..DRow, elem: [H % 128]}} = sub(res_r).fetch(time = [H % 128 / 8], packet = [H % 8]).{widen}(f32).to_vrf();
    let layer_v: vrf<f32>{{..DRow, elem: [1 # 16]}} = sub(layer).fetch(time = [1], packet = [1 # 16]).{widen}(f32).to_vrf();
    let summed: dm<bf16>{{..DRow, elem: [H % 128]}} = main(d)
        .fetch(time = [H % 128 / 8], packet = [H % 8])
        .vector(mul(vrf = post), mul(vrf = post_wv), add(vrf = res_v))
        .{narrow}(bf16)
        .commit();
    let out: dm<bf16>{{..DRow, elem: [H % 128]}} = main(summed)
        .fetch(time = [H % 128 / 8], packet = [H % 8]).{widen}(f32)
        .vector(mul(vrf = layer_v))
        .{narrow}(bf16)
        .commit();
    out.dma_into(residual, engines = [0, 4]);
}}
"""
