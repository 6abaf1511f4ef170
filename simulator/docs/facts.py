"""The fact table behind the docs (docs/simrngd.md §2.6): what each version's pages say about each hidden
parameter or behaviour. S: stated correctly, W: stated wrongly, ~: stated vaguely, O: omitted.

A page template asks for a fact by id; the renderer writes the true statement (S, from the chip's
values), the given wrong or vague text (W, ~) or nothing (O). The docs test reads this table to
check the rendered pages, and that no page, changelog or diagnostic leaks a true value the table
marks W or O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

VERSIONS = ("0.5.0", "0.6.0", "0.7.0")


class Fact(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    param: str | None  # the hidden parameter (docs/simrngd.md §2.2) it is about, if any
    true: str  # the correct statement; `{name}` fields are the chip's values
    states: tuple[str, str, str]  # per version in VERSIONS order: "S" | "O" | "W:<text>" | "~:<text>"
    leaks: tuple[str, ...] = ()  # regexes (over the chip's values) that state the true value
    compiler_states: bool = False  # the compiler enforces it and quotes it in its diagnostics

    def state(self, version: str) -> str:
        return self.states[VERSIONS.index(version)]


def _fact(id: str, param: str | None, true: str, states: tuple[str, str, str], *leaks: str,
          compiler_states: bool = False) -> Fact:  # fmt: skip
    return Fact(id=id, param=param, true=true, states=states, leaks=leaks, compiler_states=compiler_states)


_SAME = "S", "S", "S"

FACTS: dict[str, Fact] = {f.id: f for f in (
    _fact("clock", None, "The chip runs at {clock_ghz:g} GHz.", _SAME),
    _fact("launch", "P01", "Launching a kernel costs about {launch_cycles:.0f} cycles before its first command runs.",
          ("O", "O", "O"), r"\b{launch_cycles:.0f} cycles"),
    _fact("dma_startup", "P02", "A DMA command spends about {dma_startup:.0f} cycles starting up before data moves.",
          ("W:A DMA command needs roughly 500 cycles to start before data flows.",
           "W:A DMA command needs roughly 500 cycles to start before data flows.",
           "~:A DMA command needs roughly 350 cycles to start before data flows."),
          r"\b{dma_startup:.0f}\b"),
    _fact("dma_chain", "P03", "A command already queued on its engine starts {dma_chain_startup:.0f} cycles after the "
          "one before it finishes.",
          ("O", "O", "~:A command that is already queued behind another on the same engine starts much sooner, "
           "after about 90 cycles."),
          r"\b{dma_chain_startup:.0f} cycles"),
    _fact("engine_bw", "P04", "One DMA engine moves up to {engine_bw:.0f} bytes per cycle.",
          ("W:One DMA engine moves up to 256 bytes per cycle.",) * 3, r"\b{engine_bw:.0f}\b"),
    _fact("pkt_overhead", "P05", "Every packet costs its engine {pkt_overhead:.0f} extra cycles.",
          ("O", "O", "O"), r"\b{pkt_overhead:.0f} (extra )?cycles per packet"),
    _fact("dmn_bw", "P06", "A stream that stays in one DMN moves at most {dmn_bw:.0f} bytes per cycle.",
          ("W:Each DMN accepts 128 bytes per cycle, so a stream that stays in one DMN moves 128 bytes per cycle.",)
          * 3, r"\b{dmn_bw:.0f}\b"),
    _fact("cluster_ingress", "P07", "A cluster's NoC port accepts {cluster_ingress:.0f} bytes per cycle, shared by "
          "every engine writing into that cluster.",
          ("W:Each cluster accepts 256 bytes per cycle.", "O",
           "~:Each cluster's port accepts about 280 bytes per cycle, shared by the engines that write into it."),
          r"\b{cluster_ingress:.0f}\b", r"\b{roof:.0f}\b"),
    _fact("hbm_bw", "P08", "HBM itself serves {hbm_bw:.0f} bytes per cycle; the NoC ports bind long before it.",
          ("W:HBM delivers 1.5 TB/s, which is the limit for all DMA traffic.",) * 3, r"\b{hbm_bw:.0f}\b",
          r"\b{hbm_bw:,.0f}\b"),
    _fact("hbm_unit", "P09", "HBM moves data in {hbm_unit}-byte transaction units.", _SAME),
    _fact("unaligned_reads", "P09", "A read of P bytes starting at byte offset o of a unit costs "
          "ceil((o + P) / {hbm_unit}) units.",
          ("~:Unaligned reads cost about twice as much as aligned ones.",
           "~:Unaligned reads cost about twice as much as aligned ones.", "S")),
    _fact("rmw", "P10", "A store that fills only part of a unit costs about {rmw_factor:.0f} unit-times "
          "(read, modify, write).",
          ("~:Stores that do not fill whole units are very slow, about 50 times slower.",) * 3,
          r"\b{rmw_factor:.0f}\b"),
    _fact("xcluster", "P11", "A DMA between the two clusters runs at {xcluster_factor:g} of the same-cluster rate.",
          ("O", "O", "S"), r"{xcluster_factor:g} of the (same-cluster )?rate",
          r"x ?{xcluster_factor:g}\b"),
    _fact("dm2dm", "P12", "A DM -> DM copy reads and then writes each packet: it moves about {dm2dm_rate:.1f} "
          "bytes per cycle end to end.",
          ("W:DM -> DM copies run at 256 bytes per cycle.",) * 3, r"\b{dm2dm_rate:.1f}\b",
          r"\b{dm2dm_phase_bw:g}\b"),
    _fact("dm_capacity", "P15", "The allocator can use {dm_usable_kb:.0f} KB of DM per slice.",
          ("W:Each slice has 512 KB of DM for your tensors.",) * 3, r"\b{dm_usable_kb:.0f} ?KB",
          r"\b{dm_usable_per_slice:,}\b", compiler_states=True),
    _fact("lut_rate", "P16", "A table lookup decodes {lut_bpc:g} input bytes per cycle and slice.",
          ("W:Lookups run at the fetch rate, 32 bytes per cycle.", "O",
           "~:Lookups are slower than a plain fetch; keep them off the critical path."),
          r"\b{lut_bpc:g}\b", r"\b{lut_bpc:.2f}\b"),
    _fact("fetch_read", "P17", "A fetch reads {fetch_read_main} bytes per cycle on `main` and {fetch_read_sub} on "
          "`sub`.", _SAME),
    _fact("contract_step", "P18", "The contraction engine consumes {contract_bytes_per_step} bytes of stream per "
          "step.", _SAME),
    _fact("ve_trans", "P19", "A transcendental op (exp, erf, tanh, rsqrt, recip) costs {ve_trans_cycles:.0f} "
          "cycles per flit; plain arithmetic costs one.",
          ("W:Every vector op processes one flit per cycle.", "W:Every vector op processes one flit per cycle.",
           "S"), r"\b{ve_trans_cycles:.0f} cycles per flit"),
    _fact("ve_chain", "P20", "A vector stage chains at most {ve_max_chain} ops.",
          ("W:A vector stage chains up to 8 ops.", "W:A vector stage chains up to 8 ops.", "S"),
          r"at most {ve_max_chain} ops", compiler_states=True),
    _fact("pass_fixed", "P23", "Every pass pays {pass_fixed:.0f} cycles of fixed cost plus its stages' latencies.",
          ("O", "O", "O"), r"\b{pass_fixed:.0f} cycles"),
    _fact("sync", "P24", "A hand-off between queues costs {sync_cycles:.0f} cycles.",
          ("O", "O", "~:A hand-off between queues costs a few dozen cycles."), r"\b{sync_cycles:.0f} cycles"),
    _fact("interference", "P25", "DMA into a cluster runs at {interference:g} of its rate while a pass runs there.",
          ("O", "O", "O"), r"\b{interference:g}\b"),
    _fact("bank_rule", "P26", "A pass must not read or write one DM bank {bank_run_limit} times in a row while a "
          "DMA may write its cluster.", _SAME),
    _fact("bridge", "P27", "`reduce_clusters` costs 48 + {cluster_bridge_cycles:.0f} cycles plus "
          "{cluster_bridge_per_flit:.0f} per flit over the cluster bridge.", ("O", "O", "S")),
    _fact("noise", "P30", "Run-to-run noise is lognormal with sigma {noise_sigma_pct:g} %.",
          ("~:Timings vary by a few percent from run to run.",) * 3, r"\b{noise_sigma_pct:g} ?%"),
    _fact("switch_cost", None, "A switch costs ring x flits x T + ring cycles, for a ring of `ring` slices.", _SAME),
    _fact("reducer_cost", None, "`reduce_slices` over a group of r slices costs 2r + T (1 + r / 64) cycles for T "
          "flits.",
          ("~:`reduce_slices` takes about r cycles for a group of r slices.",
           "~:`reduce_slices` takes about r cycles for a group of r slices.", "S")),
    _fact("cluster_path", None, "Only a DMA or `reduce_clusters` moves data between clusters; the switch stays "
          "inside one.",
          ("W:Clusters exchange data through the switch.", "W:Clusters exchange data through the switch.", "S")),
    _fact("auto_engines", None, "`engines = auto` uses one engine per destination cluster.",
          ("~:`engines = auto` picks the local engine.",) * 3),
    _fact("dma_order", None, "`order = [...]` on `.dma` sets the stream loop order; the default walks the "
          "destination's digits, outermost first.", ("O", "S", "S")),
)}  # fmt: skip
