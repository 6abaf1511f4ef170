"""The QKV projection family (`sliding_project_qkv`): q, k and v rows renamed into one 32-head
axis, q heads on cluster 0 and k/v heads on cluster 1, so one stream and one tail serve all three.
Each cluster's 4096 rows are cut into row-groups x `kgroups` k-groups over all 256 slices; weights
stream in `chunks` pipelined chunks on `engines` engines per cluster, contracted directly as f8
(`direct`, where the toolchain allows) or decoded first. The tail gathers each head's row-groups onto its
leader and applies scale, per-head RMS norm and RoPE to all 32 heads at once (V heads get identity
operands). The input RMS scalar is dropped: the per-head norm that follows is scale invariant.
"""

from __future__ import annotations

from simulator.pack import capabilities as C
from simulator.pack import params as P
from simulator.pack.space.family import Family, Knob, engines_text, lookup, narrowing, packet_arg, usable_dm, widening
from simulator.pack.workload import Stream, Workload

H, ROWS_PER_CLUSTER, HEAD = 3840, 4096, 256
SLICES = 256


class QKVProjection(Family):
    kernel = "sliding_project_qkv"
    knobs = (
        Knob("kgroups", (2, 4, 8)),
        Knob("chunks", (1, 2, 4, 8)),
        Knob("depth", (2, 3, 4)),
        Knob("engines", (1, 2, 3, 4)),
        # 1: contract the f8 codes as they stream in; 0: widen them to bf16 in a decode pass first
        Knob("direct", (1, 0)),
        # the weights' DMA packet: 0 = the longest contiguous run (the compiler's choice), else smaller
        Knob("packet", (0, 256, 128)),
    )

    @staticmethod
    def shape(p: dict[str, int]) -> tuple[int, int, int]:
        """(rows per row-group, row-groups per cluster, k-group width)."""
        groups = SLICES // p["kgroups"]
        return ROWS_PER_CLUSTER // groups, groups, H // p["kgroups"]

    def valid(self, p: dict[str, int], facts: dict[str, float]) -> bool:
        if p["direct"] and facts.get(C.F8_STREAM, 1.0) <= 0:
            return False  # the toolchain's contraction refuses f8 streams
        rows, _, width = self.shape(p)
        if p["packet"] and p["packet"] >= width:
            return False  # no smaller than the run: the same program as packet 0
        if rows % p["chunks"] or rows // p["chunks"] % 8 or HEAD % rows or width % 32:
            return False
        if p["depth"] > max(p["chunks"], 2):
            return False
        return self.dm_bytes(p, facts) <= usable_dm(facts)

    def dm_bytes(self, p: dict[str, int], facts: dict[str, float]) -> int:
        rows, _, width = self.shape(p)
        chunk = rows // p["chunks"] * width
        decoded = 0 if p["direct"] else 2 * chunk  # the bf16 copy of a chunk
        return p["depth"] * (chunk + decoded) + rows * 4 + 8 * 1024

    def workload(self, p: dict[str, int], facts: dict[str, float]) -> Workload:
        rows, groups, width = self.shape(p)
        direct = bool(p["direct"])
        chunk_bytes = rows // p["chunks"] * width
        return Workload(
            streams=(
                Stream(
                    bytes_per_cluster=ROWS_PER_CLUSTER * H,
                    packet_bytes=p["packet"] or width,
                    engines=p["engines"],
                    commands=p["chunks"],
                    slices=SLICES,
                ),
            ),
            chunk_compute=chunk_bytes / 64 + (0 if direct else chunk_bytes / facts.get(P.DECODE_RATE.key, 1.6)),
            chunk_passes=1 if direct else 2,
            head_passes=4,
            head_switch=(groups, width // 16),
            tail_passes=11,
            tail_reduce=(p["kgroups"], rows // 8),
            tail_dmas=3,
            depth=p["depth"],
            chunks=p["chunks"],
        )

    def source(self, p: dict[str, int], facts: dict[str, float], version: str) -> str:
        rows, groups, width = self.shape(p)
        kg = p["kgroups"]
        per_head = HEAD // rows
        crows = rows // p["chunks"]
        q_eng = engines_text(range(p["engines"]))  # q rows land in cluster 0, k and v rows in cluster 1
        kv_eng = engines_text(range(4, 4 + p["engines"]))
        widen = widening(facts)
        narrow = narrowing(facts)
        direct = bool(p["direct"])
        fetch = f".fetch(time = [Rall % {rows} = {crows}, H % {width} / 32], packet = [H % 32])"
        if direct:
            stream = (f"        main(wc)\n            {fetch}\n"
                      f"            .contract(trf = xs, reduce = [H], fold = [Rall % 8])\n"
                      f"            .commit_into(part.tile(Rall % {rows}, c * {crows}, {crows}));\n")  # fmt: skip
        else:  # no mixed-precision contraction: widen the f8 tile to bf16 through the lookup adapter
            stream = (f"        let wb: dm<bf16>{{..Grid, elem: [Rall % {rows} = {crows}, H % {width}]}} = main(wc)\n"
                      f"            {fetch}\n            .{lookup(facts)}(bf16)\n            .commit();\n"
                      f"        main(wb)\n"
                      f"            .fetch(time = [Rall % {rows} = {crows}, H % {width} / 16], packet = [H % 16])\n"
                      f"            .contract(trf = xs, reduce = [H], fold = [Rall % 8])\n"
                      f"            .commit_into(part.tile(Rall % {rows}, c * {crows}, {crows}));\n")  # fmt: skip
        return f"""#![toolchain = "{version}"]
// chiplore design: fused QKV heads, {kg} k-groups of {width}, row-groups of {rows}, {p["chunks"]} chunks,
// depth {p["depth"]}, {p["engines"]} weight engines per cluster
axes! {{
    H = {H}, Ns = 8, Gs = 2, Ds = 256, Ts = 1024, E = 32768, Hd = 32,
    Qs = (Ns, Gs, Ds), Ps = (Ns, Ds), Rall = (Hd, Ds),
}}

layout XIn  = {{ cluster: [rep(2)], slice: [1 # {groups}, H / {width}] }};
layout Grid = {{ cluster: [Rall / 4096], slice: [Rall / {rows} % {groups}, H / {width}] }};
layout Head = {{ cluster: [Rall / 4096], slice: [Rall / 256 % 16, 1 # {per_head}, 1 # {kg}] }};

kernel sliding_project_qkv(
    x: &hbm<bf16>[H],
    q_weight: &hbm<f8e4m3>[Qs, H],
    k_weight: &hbm<f8e4m3>[Ps, H],
    v_weight: &hbm<f8e4m3>[Ps, H],
    q_weight_scale: &hbm<bf16>[Qs],
    k_weight_scale: &hbm<bf16>[Ps],
    v_weight_scale: &hbm<bf16>[Ps],
    input_rms_weight: &hbm<bf16>[H],
    q_rms_weight: &hbm<bf16>[Ds],
    k_rms_weight: &hbm<bf16>[Ds],
    kv_pos: &hbm<i32>[1],
    rope_pos: &hbm<i32>[1],
    cos: &hbm<bf16>[E, Ds],
    sin: &hbm<bf16>[E, Ds],
    k_cache: &mut hbm<bf16>[Ts, Ns, Ds],
    v_cache: &mut hbm<bf16>[Ts, Ns, Ds],
    q_out: &mut hbm<bf16>[Ns, Gs, Ds],
) {{
    let xin: dm<bf16>{{..XIn, elem: [H % {width}]}} = x.dma(engines = [0, 4]);
    let win: dm<bf16>{{..XIn, elem: [H % {width}]}} = input_rms_weight.dma(engines = [0, 4]);
    let win_v: vrf<f32>{{..XIn, elem: [H % {width}]}} = sub(win)
        .fetch(time = [H % {width} / 8], packet = [H % 8]).{widen}(f32).to_vrf();
    let xw: dm<bf16>{{..XIn, elem: [H % {width}]}} = main(xin)
        .fetch(time = [H % {width} / 8], packet = [H % 8]).{widen}(f32)
        .vector(mul(vrf = win_v))
        .{narrow}(bf16)
        .commit();
    let xs: trf<bf16>{{cluster: [rep(2)], slice: [rep({groups}), H / {width}], lane: [1], elem: [H % {width}]}} =
        main(xw)
            .fetch(time = [H % {width} / 16], packet = [H % 16])
            .switch(broadcast, slice = [rep({groups}), H / {width}])
            .to_trf();

    let scale_d: dm<bf16>{{..Head, elem: [Ds]}} = dm::empty();
    q_weight_scale.rename(Qs, Rall, 0).dma_into(scale_d, engines = [1]);
    k_weight_scale.rename(Ps, Rall, 4096).dma_into(scale_d, engines = [5]);
    v_weight_scale.rename(Ps, Rall, 6144).dma_into(scale_d, engines = [5]);
    let gain_d: dm<bf16>{{..Head, elem: [Ds]}} = dm::empty();
    q_rms_weight.dma_into(gain_d.tile(Hd, 0, 16), engines = [1]);
    k_rms_weight.dma_into(gain_d.tile(Hd, 16, 8), engines = [5]);
    gain_d.tile(Hd, 24, 8).fill(1.0);
    let cos_d: dm<bf16>{{..Head, elem: [Ds]}} = dm::empty();
    let sin_d: dm<bf16>{{..Head, elem: [Ds]}} = dm::empty();
    cos.at(E = rope_pos).dma_into(cos_d.tile(Hd, 0, 24), engines = [2, 6]);
    sin.at(E = rope_pos).dma_into(sin_d.tile(Hd, 0, 24), engines = [2, 6]);
    cos_d.tile(Hd, 24, 8).fill(1.0);
    sin_d.tile(Hd, 24, 8).fill(0.0);

    let mut part: dm<f32>{{..Grid, elem: [Rall % {rows}]}} = dm::empty();
    #[pipeline(depth = {p["depth"]})]
    for c in 0..{p["chunks"]} {{
        let wc: dm<f8e4m3>{{..Grid, elem: [Rall % {rows} = {crows}, H % {width}]}} = dm::empty();
        q_weight.rename(Qs, Rall, 0).tile(Rall % {rows}, c * {crows}, {crows}).dma_into(wc, engines = {q_eng}{packet_arg(p)});
        k_weight.rename(Ps, Rall, 4096).tile(Rall % {rows}, c * {crows}, {crows}).dma_into(wc, engines = {kv_eng}{packet_arg(p)});
        v_weight.rename(Ps, Rall, 6144).tile(Rall % {rows}, c * {crows}, {crows}).dma_into(wc, engines = {kv_eng}{packet_arg(p)});
{stream}    }}

    let scale_v: vrf<f32>{{..Head, elem: [Ds]}} = sub(scale_d).fetch(time = [Ds / 8], packet = [Ds % 8]).{widen}(f32).to_vrf();
    let summed: dm<f32>{{..Grid, elem: [Rall % {rows}]}} = main(part)
        .fetch(time = [Rall % {rows} / 8], packet = [Rall % 8])
        .reduce_slices(add, group = [H / {width}], result = leader)
        .commit();
    let y: dm<f32>{{..Head, elem: [Ds]}} = main(summed)
        .fetch(time = [Rall % {rows} / 8], packet = [Rall % 8])
        .switch(gather, slice = Head, time = [Rall / {rows} % {per_head}, Rall % {rows} / 8], ring = 16)
        .vector(mul(vrf = scale_v))
        .commit();
    let rms_d: dm<f32>{{..Head, elem: [1 # 8]}} = main(y)
        .fetch(time = [Ds / 8], packet = [Ds % 8])
        .vector(square(), sum_all(), mul({1 / HEAD:.8f}), add(0.000001), rsqrt())
        .commit();
    let rms: vrf<f32>{{..Head, elem: [1 # 8]}} = sub(rms_d).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let gain_v: vrf<f32>{{..Head, elem: [Ds]}} = sub(gain_d).fetch(time = [Ds / 8], packet = [Ds % 8]).{widen}(f32).to_vrf();
    let yn: dm<f32>{{..Head, elem: [Ds]}} = main(y)
        .fetch(time = [Ds / 8], packet = [Ds % 8])
        .vector(mul(vrf = rms), mul(vrf = gain_v))
        .commit();
    let sin_v: vrf<f32>{{..Head, elem: [Ds]}} = sub(sin_d).fetch(time = [Ds / 8], packet = [Ds % 8]).{widen}(f32).to_vrf();
    let turned_d: dm<f32>{{..Head, elem: [Ds]}} = sub(yn.roll(Ds / 128, 1))
        .fetch(time = [Ds / 8], packet = [Ds % 8])
        .vector(mul(vrf = sin_v))
        .commit();
    let turned: vrf<f32>{{..Head, elem: [Ds]}} = sub(turned_d).fetch(time = [Ds / 8], packet = [Ds % 8]).to_vrf();
    let cos_v: vrf<f32>{{..Head, elem: [Ds]}} = sub(cos_d).fetch(time = [Ds / 8], packet = [Ds % 8]).{widen}(f32).to_vrf();
    let out: dm<bf16>{{..Head, elem: [Ds]}} = main(yn)
        .fetch(time = [Ds / 8], packet = [Ds % 8])
        .vector(mul(vrf = cos_v), add(vrf = turned))
        .{narrow}(bf16)
        .commit();

    out.tile(Hd, 0, 16).dma_into(q_out.rename(Qs, Rall, 0), engines = [0, 1]);
    out.tile(Hd, 16, 8).dma_into(k_cache.at(Ts = kv_pos).rename(Ps, Rall, 4096), engines = [4, 5]);
    out.tile(Hd, 24, 8).dma_into(v_cache.at(Ts = kv_pos).rename(Ps, Rall, 6144), engines = [6, 7]);
}}
"""
