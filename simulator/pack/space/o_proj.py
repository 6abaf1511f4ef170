"""The attention-output design family (`sliding_attention_output`): y = o_weight @ x, row scale,
RMS norm, residual. Rows are spread over both clusters in row-groups of one HBM unit of output
(so the store is whole aligned packets), the reduction dim over `kgroups` slices per row-group;
weights stream in `chunks` pipelined chunks on `engines` engines per cluster and are contracted
directly as f8 (`direct`, where the toolchain allows it) or decoded first; split-K is finished by the
inter-slice reducer, the norm's sum of squares crosses clusters by one small DMA.
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
    lookup,
    narrowing,
    packet_arg,
    usable_dm,
    widening,
)
from simulator.pack.workload import Stream, Workload

H, QS = 3840, 4096
SLICES = 256


class OutputProjection(Family):
    kernel = "sliding_attention_output"
    knobs = (
        Knob("kgroups", (2, 4, 8, 16)),
        Knob("chunks", (1, 2, 4, 8, 16)),
        Knob("depth", (2, 3, 4, 6)),
        Knob("engines", (1, 2, 3, 4)),
        # 1: contract the f8 codes as they stream in; 0: widen them to bf16 in a decode pass first
        Knob("direct", (1, 0)),
        # the weights' DMA packet: 0 = the longest contiguous run (the compiler's choice), else smaller
        Knob("packet", (0, 256, 128)),
    )

    def valid(self, p: dict[str, int], facts: dict[str, float]) -> bool:
        if p["direct"] and facts.get(C.F8_STREAM, 1.0) <= 0:
            return False  # the toolchain's contraction refuses f8 streams
        if p["packet"] and p["packet"] >= QS // p["kgroups"]:
            return False  # no smaller than the run: the same program as packet 0
        rows = self.rows_per_group(facts)
        groups = H // 2 // rows
        if H // 2 % rows or rows % p["chunks"] or rows // p["chunks"] % 8:
            return False
        if groups > SLICES // p["kgroups"] or p["depth"] > max(p["chunks"], 2):
            return False
        return self.dm_bytes(p, facts) <= usable_dm(facts)

    @staticmethod
    def rows_per_group(facts: dict[str, float]) -> int:
        # one output row-group is one whole HBM unit of bf16: stores never read-modify-write
        return int(facts.get(P.HBM_UNIT.key, 256)) // 2

    def dm_bytes(self, p: dict[str, int], facts: dict[str, float]) -> int:
        rows = self.rows_per_group(facts)
        chunk = rows // p["chunks"] * QS // p["kgroups"]
        decoded = 0 if p["direct"] else 2 * chunk  # the bf16 copy of a chunk
        return p["depth"] * (chunk + decoded) + rows * 4 + 8 * 1024

    def workload(self, p: dict[str, int], facts: dict[str, float]) -> Workload:
        rows = self.rows_per_group(facts)
        width = QS // p["kgroups"]
        chunk_rows = rows // p["chunks"]
        groups = H // 2 // rows
        direct = bool(p["direct"])
        chunk_bytes = chunk_rows * width
        return Workload(
            streams=(
                Stream(
                    bytes_per_cluster=H * QS // 2,
                    packet_bytes=min(width, p["packet"] or 4096),
                    engines=p["engines"],
                    commands=p["chunks"],
                    slices=groups * p["kgroups"],
                ),
            ),
            chunk_compute=chunk_bytes / 64 + (0 if direct else chunk_bytes / facts.get(P.DECODE_RATE.key, 1.6)),
            chunk_passes=1 if direct else 2,
            head_passes=5,
            head_switch=(SLICES // p["kgroups"], width // 16),
            tail_passes=6,
            tail_reduce=(p["kgroups"], rows // 8),
            tail_dmas=1 if bridge(facts) else 2,  # the bridge replaces the DMA that swaps the clusters' sums
            depth=p["depth"],
            chunks=p["chunks"],
        )

    def source(self, p: dict[str, int], facts: dict[str, float], version: str) -> str:
        rows = self.rows_per_group(facts)
        kg, width = p["kgroups"], QS // p["kgroups"]
        groups = H // 2 // rows
        pad = SLICES // kg
        crows = rows // p["chunks"]
        weights = engine_list(p["engines"])
        direct = bool(p["direct"])
        cast = widening(facts)
        narrow = narrowing(facts)
        rms = f".vector(mul({1 / H:.12f}), add(0.000001), rsqrt())"
        if bridge(facts):  # the clusters' sums added over the cluster bridge, in the pass that takes the root
            cross = (
                "    let rms_d: dm<f32>{..Every, elem: [1 # 8]} = main(csum)\n"
                f"        .fetch(time = [1], packet = [1 # 8])\n        .reduce_clusters(add)\n        {rms}\n"
                "        .commit();\n"
            )
        else:  # each cluster DMAs its sum to both, and one pass adds them
            cross = (
                f"    let both: dm<f32>{{..Every, elem: [H / {H // 2} # 8]}} = csum.dma(engines = [0, 1, 2, 3, 4, 5, 6, 7]);\n"
                "    let rms_d: dm<f32>{..Every, elem: [1 # 8]} = main(both)\n"
                f"        .fetch(time = [1], packet = [H / {H // 2} # 8])\n"
                f"        .vector(sum_all(), mul({1 / H:.12f}), add(0.000001), rsqrt())\n        .commit();\n"
            )
        if direct:
            stream = (
                f"        main(wc)\n"
                f"            .fetch(time = [H % {rows} = {crows}, Qs % {width} / 32], packet = [Qs % 32])\n"
                f"            .contract(trf = xs, reduce = [Qs], fold = [H % 8])\n"
                f"            .commit_into(part.tile(H % {rows}, c * {crows}, {crows}));\n"
            )
        else:  # no mixed-precision contraction: widen the f8 tile to bf16 through the lookup adapter
            stream = (
                f"        let wb: dm<bf16>{{..Rows, elem: [H % {rows} = {crows}, Qs % {width}]}} = main(wc)\n"
                f"            .fetch(time = [H % {rows} = {crows}, Qs % {width} / 32], packet = [Qs % 32])\n"
                f"            .{lookup(facts)}(bf16)\n"
                f"            .commit();\n"
                f"        main(wb)\n"
                f"            .fetch(time = [H % {rows} = {crows}, Qs % {width} / 16], packet = [Qs % 16])\n"
                f"            .contract(trf = xs, reduce = [Qs], fold = [H % 8])\n"
                f"            .commit_into(part.tile(H % {rows}, c * {crows}, {crows}));\n"
            )
        return f"""#![toolchain = "{version}"]
// chiplore design: output projection, {kg} k-groups of {width}, {p["chunks"]} chunks, depth {p["depth"]},
// {p["engines"]} weight engines per cluster
axes! {{ H = {H}, Ns = 8, Gs = 2, Ds = 256, Qs = (Ns, Gs, Ds) }}

layout Rows  = {{ cluster: [H / {H // 2}], slice: [H / {rows} % {groups} # {pad}, Qs / {width}] }};
layout Heads = {{ cluster: [H / {H // 2}], slice: [H / {rows} % {groups} # {pad}, 1 # {kg}] }};
layout XIn   = {{ cluster: [rep(2)], slice: [1 # {pad}, Qs / {width}] }};
layout Every = {{ cluster: [rep(2)], slice: [rep({groups}) # {pad}, 1 # {kg}] }};

kernel sliding_attention_output(
    x: &hbm<bf16>[Ns, Gs, Ds],
    post_attn_rms_weight: &hbm<bf16>[H],
    o_weight: &hbm<f8e4m3>[H, Qs],
    o_weight_scale: &hbm<bf16>[H],
    residual: &mut hbm<bf16>[H],
) {{
    let xin: dm<bf16>{{..XIn, elem: [Qs % {width}]}} = x.dma(engines = [0, 4]);
    let xs: trf<bf16>{{cluster: [rep(2)], slice: [rep({pad}), Qs / {width}], lane: [1], elem: [Qs % {width}]}} =
        main(xin)
            .fetch(time = [Qs % {width} / 16], packet = [Qs % 16])
            .switch(broadcast, slice = [rep({pad}), Qs / {width}])
            .to_trf();
    let scale_d: dm<bf16>{{..Heads, elem: [H % {rows}]}} = o_weight_scale.dma(engines = [1, 5]);
    let norm_d: dm<bf16>{{..Heads, elem: [H % {rows}]}} = post_attn_rms_weight.dma(engines = [1, 5]);
    let res_d: dm<bf16>{{..Heads, elem: [H % {rows}]}} = residual.dma(engines = [1, 5]);
    let scale_v: vrf<f32>{{..Heads, elem: [H % {rows}]}} = sub(scale_d).fetch(time = [H % {rows} / 8], packet = [H % 8]).{cast}(f32).to_vrf();
    let norm_v: vrf<f32>{{..Heads, elem: [H % {rows}]}} = sub(norm_d).fetch(time = [H % {rows} / 8], packet = [H % 8]).{cast}(f32).to_vrf();
    let res_v: vrf<f32>{{..Heads, elem: [H % {rows}]}} = sub(res_d).fetch(time = [H % {rows} / 8], packet = [H % 8]).{cast}(f32).to_vrf();

    let mut part: dm<f32>{{..Rows, elem: [H % {rows}]}} = dm::empty();
    #[pipeline(depth = {p["depth"]})]
    for c in 0..{p["chunks"]} {{
        let wc: dm<f8e4m3>{{..Rows, elem: [H % {rows} = {crows}, Qs % {width}]}} =
            o_weight.tile(H % {rows}, c * {crows}, {crows}).dma(engines = {weights}{packet_arg(p)});
{stream}    }}
    let y: dm<f32>{{..Heads, elem: [H % {rows}]}} = main(part)
        .fetch(time = [H % {rows} / 8], packet = [H % 8])
        .reduce_slices(add, group = [Qs / {width}], result = leader)
        .vector(mul(vrf = scale_v))
        .commit();
    let sq: dm<f32>{{..Heads, elem: [1 # 8]}} = main(y)
        .fetch(time = [H % {rows} / 8], packet = [H % 8])
        .vector(square(), sum_all())
        .commit();
    let csum: dm<f32>{{cluster: [H / {H // 2}], slice: [rep({groups}) # {pad}, 1 # {kg}], elem: [1 # 8]}} = main(sq)
        .fetch(time = [1], packet = [1 # 8])
        {all_reduce(f"H / {rows} % {groups}", facts)}
        .commit();
{cross}    let rms: vrf<f32>{{..Every, elem: [1 # 8]}} = main(rms_d).fetch(time = [1], packet = [1 # 8]).to_vrf();
    let out: dm<bf16>{{..Heads, elem: [H % {rows}]}} = main(y)
        .fetch(time = [H % {rows} / 8], packet = [H % 8])
        .vector(mul(vrf = rms), mul(vrf = norm_v), add(vrf = res_v))
        .{narrow}(bf16)
        .commit();
    out.dma_into(residual, engines = [0, 1, 2, 3, 4, 5, 6, 7]);
}}
"""
