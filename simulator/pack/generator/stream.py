"""A group's weights, streamed in pipelined chunks and contracted against its input's TRF.

Each chunk is `chunk_rows` rows of every slice's row-group: one DMA per member on the weight engines
of the clusters its rows land in (members sharing a row space fill one chunk buffer side by side),
then one contraction pass per buffer into the accumulator's rows. Codes the contraction takes as they
stream in (f8, f4 where the rules allow) are contracted directly; others are decoded in the fetch
adapter on the way in. Block scales ride along: each chunk's scales are loaded into a VRF and applied
per block inside the contraction pass, between the contraction and the accumulation. Chunks the loop
does not take (the odd one a paired loop leaves, the pieces a `tail` cuts the last chunk into) follow
it one by one, each in a buffer of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.pack.generator.geometry import Geometry, digit
from chiplore.simulator.pack.generator.graph import Group, Member, Unsupported
from chiplore.simulator.pack.generator.program import Program, dtype_bytes
from chiplore.simulator.pack.generator.signature import Signature

CONTRACT_PACKET_BYTES = 32  # one fetch read per step on the main context
SUB_READ_BYTES = 8  # the sub context's fetch port


FOLD = 8  # rows (or blocks) a contraction folds onto its lanes at most: one flit of f32 sums


def fold_lanes(lanes: int, fits: Callable[[int], bool]) -> int:
    """The most lanes (a power of two, at most a flit's 8 and the chip's `lanes`) a contraction folds
    onto that `fits` accepts; 1 (no fold) where none does."""
    return next((n for n in (8, 4, 2) if n <= min(FOLD, lanes) and fits(n)), 1)


def block_of(member: Member) -> int | None:
    """The block of a member's block scales (None for per-row or no scales)."""
    return member.op.block if member.op.scale_kind == "block" else None


@dataclass(frozen=True)
class Contraction:
    """How codes of one dtype reach the contraction: the fetch packet (elements) and any decode."""

    packet: int
    decode: str | None

    @property
    def stream_dtype(self) -> str:
        return self.decode or ""


def contraction(dtype: str, direct: bool, facts: dict[str, float]) -> Contraction:
    """The contraction of `dtype` codes a design asks for. `direct`
    is a choice for quantised codes only (bf16 weights stream as they are either way): codes the rules
    let the contraction take as they stream in are taken so, the others are decoded all the same (a
    kernel of f8 and f4 weights streams its f8 ones where f4 ones still need a decode)."""
    if dtype == "bf16":
        return Contraction(16, None)
    if direct and vocab.streams(facts, dtype):
        return Contraction(int(CONTRACT_PACKET_BYTES / dtype_bytes(dtype)), None)
    target = "f8e4m3" if dtype == "f4e2m1" and vocab.streams(facts, "f8e4m3") else "bf16"
    # the decoded stream may be at most 64 B a step
    return Contraction(int(64 / dtype_bytes(target)), target)


def column_packet(plan: Contraction, dtype: str, width: int, block: int | None = None,
                  lanes: int = FOLD) -> int | None:  # fmt: skip
    """The fetch packet (elements) over a slice's `width` columns: the plan's, or where that does not
    divide them (K no multiple of a tile), the largest power of two that does and still leaves the
    fetch adapters in whole 8-byte words (fewer bytes a read, more reads); None when none does. A
    packet of block-scaled codes (blocks of `block`) leaves each block's sum in a lane: no more
    blocks than the chip's `lanes`."""
    packet = plan.packet if block is None else min(plan.packet, block * lanes)
    while packet > 1 and width % packet:
        packet //= 2
    words = packet * dtype_bytes(plan.decode or dtype)
    return packet if width % packet == 0 and words % 8 == 0 else None


def sub_packet(dtype: str) -> int:
    """Elements of `dtype` codes in one 8-byte read of the sub queue's fetch (its port is 8 bytes wide)."""
    return int(SUB_READ_BYTES / dtype_bytes(dtype))


def stream_dtype(dtype: str, direct: bool, facts: dict[str, float]) -> str:
    """The element type the contraction receives (the screener's `contract.stream_dtype`)."""
    plan = contraction(dtype, direct, facts)
    return plan.decode or dtype


class Stream:
    def __init__(self, p: Program, sig: Signature, group: Group, geo: Geometry, trf: str, direct: bool,
                 packet: int, ahead: int | None = None, share: bool = False,
                 subdecode: bool = False) -> None:  # fmt: skip
        self.p, self.sig, self.group, self.geo, self.trf = p, sig, group, geo, trf
        self.direct, self.packet = direct, packet
        # codes the contraction cannot take as they stream in are decoded by main's fetch adapter, a pass's
        # slowest stage where the chip has few slices: with `subdecode` the sub queue decodes every other
        # chunk into DM beside main, and main contracts those decoded (twice the table lookups at once)
        self.subdecode = subdecode
        # the DMAs of a chunk that land in one cluster share out its weight engines (else each takes them all)
        self.share = share
        # a body mark (after the previous group's stream) where the first loop step's weights are loaded
        self.ahead = ahead
        self.loop_vrfs: list[tuple[str, int]] = []

    def accumulators(self) -> dict[int, str]:
        """The f32 accumulators: one per member when members are stacked, else one shared (-1)."""
        g, geo = self.group.index, self.geo
        keys = [m.index for m in self.group.members] if self.group.stacked else [-1]
        out = {}
        for key in keys:
            name = self.p.name(f"acc{g}" if key < 0 else f"acc{g}_{key}")
            self.p.emit(f"    let mut {name}: dm<f32>{{..Grid{g}, elem: [{geo.rows_elem()}]}} = dm::empty();\n")
            self.p.dm(geo.rows_per_slice, "f32")
            out[key] = name
        return out

    def run(self, accumulators: dict[int, str]) -> None:
        group, geo = self.group, self.geo
        dtypes = {m.dtype for m in group.members}
        kinds = {m.op.scale_kind == "block" for m in group.members}
        if not group.stacked and (len(dtypes) > 1 or len(kinds) > 1):
            raise Unsupported(f"group {group.index}: members of one row space differ in dtype or scale kind")
        buffers = vocab.buffers(self.p.facts)
        units = [(m,) for m in group.members] if group.stacked else [group.members]
        cr, chunks = geo.chunk_rows, geo.uniform_chunks
        # One block-scaled stream alternates two chunks per step: a VRF is not rotated by the pipeline,
        # so the next chunk's scales load into the other one while this chunk contracts. A stream whose
        # decode is shared with the sub queue alternates too: the second chunk of a step is sub's (of
        # stacked members, every other member's chunks are).
        sub = self._shares_decode(units)
        pairs = len(units) == 1 and (units[0][0].op.scale_kind == "block" or sub) and chunks > 1
        turns = sub and (pairs or len(units) > 1)  # the loop gives every other chunk to the sub queue
        var = self.p.loop_var("s" if pairs else "c")
        steps = (
            [(var, f"{var} * {cr}", "")]
            if not pairs
            else [(var, f"{var} * {2 * cr}", "_a"), (var, f"{var} * {2 * cr} + {cr}", "_b")]
        )
        depth = max(2, -(-geo.depth // 2)) if pairs else geo.depth
        head = "" if buffers else f"    #[pipeline(depth = {depth})]\n"
        body: list[str] = []
        loop_bytes = 0
        count = chunks // 2 if pairs else chunks
        if count and self.ahead is not None:
            # The first step's weights are loaded right after the previous group's stream, before this
            # group's input is copied: the engines run their commands in order, and that copy waits for
            # the previous group's passes, so the weights behind it would wait too.
            step = 2 * cr if pairs else cr
            for members in units:
                for start in range(0, step, cr):
                    suffix = f"_h{start // cr}"
                    self._peel(members, self._accumulator(accumulators, members), start, cr, suffix, self.ahead)
            count -= 1
            steps = [(v, f"{offset} + {step}", suffix) for v, offset, suffix in steps]
        if count:
            looped = len(self.loop_vrfs)  # the head's registers, if any, were live before the loop
            for unit, members in enumerate(units):
                accumulator = self._accumulator(accumulators, members)
                for _, offset, suffix in steps:
                    on_sub = turns and (suffix.endswith("_b") if pairs else unit % 2 == 1)
                    loads, work, size = self._chunk(members, accumulator, buffers, offset, suffix, depth, cr,
                                                    on_sub)  # fmt: skip
                    body.append(loads + work)
                    loop_bytes += size
            self.p.budget.dm_loops.append(loop_bytes * depth)
            for name, elements in self.loop_vrfs[looped:]:  # all of a loop step's registers are live together
                self.p.vrf_defined(name, elements)
                self.p.vrf_used(name)
            self.p.emit(f"{head}    for {var} in 0..{count} {{\n" + "".join(body) + "    }\n")
        # after the loop, one by one: the odd chunk a paired loop leaves, then the last chunk's pieces
        pieces = [((chunks - 1) * cr, cr, "_z")] if pairs and chunks % 2 else []
        offset = chunks * cr
        for index, rows in enumerate(geo.tail_rows):
            pieces.append((offset, rows, f"_t{index}"))
            offset += rows
        for start, rows, suffix in pieces:
            for members in units:
                self._peel(members, self._accumulator(accumulators, members), start, rows, suffix)

    def _shares_decode(self, units: list[tuple[Member, ...]]) -> bool:
        """Whether the design shares this stream's decode with the sub queue: codes some unit decodes on the
        way in, and a sub fetch of whole 8-byte reads over a slice's columns."""
        if not self.subdecode:
            return False
        decoded = [m for unit in units for m in unit if contraction(m.dtype, self.direct, self.p.facts).decode]
        return bool(decoded) and all(self.geo.width % sub_packet(m.dtype) == 0 for m in decoded)

    def _accumulator(self, accumulators: dict[int, str], members: tuple[Member, ...]) -> str:
        return accumulators[members[0].index if self.group.stacked else -1]

    def _peel(self, members: tuple[Member, ...], accumulator: str, start: int, rows: int, suffix: str,
              ahead: int | None = None) -> None:  # fmt: skip
        """One chunk outside the loop (a buffer of its own, no rotation), its rows from `start`; its
        weights loaded at body mark `ahead` when given, else just before it contracts."""
        defined = len(self.loop_vrfs)
        loads, work, size = self._chunk(members, accumulator, False, str(start), suffix, 1, rows)
        self.p.budget.dm_fixed += size
        if ahead is not None:
            self.p.emit(_outdented(loads), at=ahead)
            self.p.emit(_outdented(work))
        else:
            self.p.emit(_outdented(loads + work))
        for name, elements in self.loop_vrfs[defined:]:
            self.p.vrf_defined(name, elements)
            self.p.vrf_used(name)

    def _chunk(self, members: tuple[Member, ...], accumulator: str, buffers: bool, offset: str, suffix: str,
               depth: int, cr: int, on_sub: bool = False) -> tuple[str, str, int]:  # fmt: skip
        """One chunk of `cr` rows, its rows from `offset` and names ending in `suffix`: the loads of its
        weights, then the rest (its block scales and contraction), and its DM bytes. `on_sub`: the sub
        queue decodes its codes into DM first and main contracts them as decoded."""
        geo, g = self.geo, self.group.index
        first = members[0]
        plan = contraction(first.dtype, self.direct, self.p.facts)
        rows = geo.rows_elem(cr)
        rotate = f", buffers: {depth}" if buffers and depth > 1 else ""
        stem = (first.op.weight if len(members) == 1 else f"w{g}") + suffix
        buf = self.p.name(f"{stem}_c")
        chunk_type = f"dm<{first.dtype}>{{..Grid{g}, elem: [{rows}, {geo.k_elem()}]{rotate}}}"
        tile = f".tile({geo.row_mod(geo.rows_per_slice)}, {offset}, {cr})"
        packet = f", packet = {self.packet}" if self.packet else ""
        # a member over both clusters: one DMA per cluster, on that cluster's engines
        weights = self._loads(members, buf, chunk_type, lambda m: m.op.weight, tile, self._engines, packet,
                              shared=self.share)  # fmt: skip
        lines = [weights]
        size = int(cr * geo.width * dtype_bytes(first.dtype))
        codes = first.dtype
        if on_sub and plan.decode:
            decoded = self.p.name(f"{stem}_d")
            step = sub_packet(codes)
            kind = f"dm<{plan.decode}>{{..Grid{g}, elem: [{rows}, {geo.k_elem()}]{rotate}}}"
            lines.append(f"        let {decoded}: {kind} = sub({buf})\n"
                         f"            .fetch(time = [{rows}, {geo.k_digit(step)}], "
                         f"packet = [{digit(geo.k_axis, 1, step, geo.k)}])\n"
                         f"            .{vocab.lookup(self.p.facts)}({plan.decode})\n"
                         "            .commit();\n")  # fmt: skip
            size += int(cr * geo.width * dtype_bytes(plan.decode))
            buf, codes, plan = decoded, plan.decode, contraction(plan.decode, True, self.p.facts)
            self.p.subdecoded = True
        packet = column_packet(plan, codes, geo.width, block_of(first), geo.chip.lanes)
        if packet is None:
            raise Unsupported(f"{first.dtype} weights: {geo.width} columns are no whole fetch packets")
        fetch = (f".fetch(time = [{rows}, {geo.k_digit(packet)}], "
                 f"packet = [{digit(geo.k_axis, 1, packet, geo.k)}])")  # fmt: skip
        decode = f"\n            .{vocab.lookup(self.p.facts)}({plan.decode})" if plan.decode else ""
        target = f"{accumulator}{tile}"
        if first.op.scale_kind == "block":
            scale, scale_bytes, scales = self._block_scales(members, buffers, tile, rows, stem, depth, cr)
            lines.append(scale)
            size += scale_bytes
            block = first.op.block
            if geo.width % block or (packet % block and block % packet):
                raise Unsupported(f"block scales of {block}: {geo.width} columns are not whole fetch packets of blocks")
            # each block's sum in a lane (a block longer than a packet sums over fetch steps too), scaled
            # there, then summed over time and lanes; as many blocks as the lanes (eight at most) fold
            # into them when a slice's columns are whole groups of that many (fewer steps)
            step = max(packet, block)
            lanes = min(FOLD, geo.chip.lanes)
            group = lanes * block if geo.width % (lanes * block) == 0 and lanes * block >= packet else step
            fold = f", fold = [{geo.k_axis} / {block} % {lanes}]" if group > step else ""
            sums = f", sum_time([{geo.k_digit(group)}])" if geo.width > group else ""
            lines.append(f"        main({buf})\n            {fetch}{decode}\n"
                         f"            .contract(trf = {self.trf}, "
                         f"reduce = [{digit(geo.k_axis, 1, block, geo.k)}]{fold})\n"
                         f"            .vector(mul(vrf = {scales}){sums}, sum_packet())\n"
                         f"            .transpose(time = [1], packet = [{rows}])\n"
                         f"            .commit_into({target});\n")  # fmt: skip
        else:
            lanes = fold_lanes(geo.chip.lanes, lambda n: cr % n == 0)  # the chunk's rows fold onto the lanes
            fold = f", fold = [{geo.row_mod(lanes)}]" if lanes > 1 else ""
            # one lane: a step's sum is one f32, less than a commit writes a flit; the chunk's rows are
            # gathered into one packet first
            gather = f"            .transpose(time = [1], packet = [{rows}])\n" if lanes == 1 else ""
            lines.append(f"        main({buf})\n            {fetch}{decode}\n"
                         f"            .contract(trf = {self.trf}, reduce = [{geo.k_axis}]{fold})\n"
                         f"{gather}            .commit_into({target});\n")  # fmt: skip
        return lines[0], "".join(lines[1:]), size

    def _engines(self, m: Member, clusters: tuple[int, ...]) -> str:
        """The first group streams on the design's engines (the others load its operands); a later
        group's small loads are done by the time it streams, so it takes every engine but the one
        that loads its block scales chunk by chunk."""
        return self.p.engines.stream(clusters, self._count((m,)))

    def _count(self, members: tuple[Member, ...]) -> int | None:
        if self.group.index == 0:
            return None
        per_chunk = any(m.op.scale_kind == "block" for m in members) and self.p.preload_engine() is None
        every = self.geo.chip.engines_per_cluster
        return max(1, every - 1) if per_chunk else every

    def _clusters(self, members: tuple[Member, ...]) -> tuple[int, ...]:
        geo = self.geo
        if not geo.split:
            return (0,)
        share = geo.per_cluster
        if self.group.stacked:
            return geo.chip.every
        return tuple(
            c for c in geo.chip.every
            if any(m.offset < (c + 1) * share and m.offset + m.rows > c * share for m in members)
        )  # fmt: skip

    def _block_scales(self, members: tuple[Member, ...], buffers: bool, tile: str, rows: str, stem: str,
                      depth: int, cr: int) -> tuple[str, int, str]:  # fmt: skip
        """Each chunk's block scales in a VRF: DMA'd per chunk on a spare engine, or, for a group whose
        stream starts after another's (and an engine to spare), read from all of the group's scales
        loaded up front while the earlier streams run (their short rows are slow per packet). Members
        sharing a row space fill one scale buffer side by side, as their codes fill the chunk's. Gives
        the statements, their DM bytes and the VRF's name."""
        geo, g = self.geo, self.group.index
        block = members[0].op.block
        dtypes = {self.sig.param(str(m.op.scale)).dtype for m in members}
        if len(dtypes) > 1:
            raise Unsupported(f"group {g}: the block scales of one row space differ in dtype")
        dtype = dtypes.pop()
        rotate = f", buffers: {depth}" if buffers and depth > 1 else ""
        blocks = f"{geo.k_axis} % {geo.width} / {block}" if geo.kgroups > 1 else f"{geo.k_axis} / {block}"
        widen = (f".{vocab.widen(self.p.facts)}(f32)" if dtype != "f32" else "") + ".to_vrf();\n"
        vrf_type = f"vrf<f32>{{..Grid{g}, elem: [{rows}, {blocks}]}}"
        # a row's scales as one packet of f32 words, or (an odd count) the chunk's rows of them at once
        count = geo.width // block
        fetch = (f"time = [{rows}], packet = [{blocks}]" if count % 2 == 0
                 else f"time = [1], packet = [{rows}{f', {blocks}' if count > 1 else ''}]")  # fmt: skip
        vrf = self.p.name(f"{stem}_s")
        self.loop_vrfs.append((vrf, cr * geo.width // block))
        preload = self.p.preload_engine()
        if self.group.index > 0 and preload is not None:
            key = ",".join(m.op.weight for m in members)
            whole = self.p.preloaded.get(key)
            if whole is None:
                stem_whole = members[0].op.weight if len(members) == 1 else f"w{g}"
                whole = self.p.preloaded[key] = self.p.name(f"{stem_whole}_sa")
                buffer = f"dm<{dtype}>{{..Grid{g}, elem: [{geo.rows_elem()}, {blocks}]}}"
                loads = self._loads(members, whole, buffer, lambda m: str(m.op.scale), "",
                                    lambda m, c: self.p.engines.listed(c, [preload]), indent="    ")  # fmt: skip
                self.p.emit(loads, early=True)
                self.p.dm(geo.rows_per_slice * geo.width // block, dtype)
            return (f"        let {vrf}: {vrf_type} = sub({whole}{tile})\n"
                    f"            .fetch({fetch}){widen}"), 0, vrf  # fmt: skip
        loaded = self.p.name(f"{stem}_sd")
        buffer = f"dm<{dtype}>{{..Grid{g}, elem: [{rows}, {blocks}]{rotate}}}"
        text = self._loads(members, loaded, buffer, lambda m: str(m.op.scale), tile,
                           lambda m, c: self.p.loop_engines(c))  # fmt: skip
        text += f"        let {vrf}: {vrf_type} = sub({loaded})\n            .fetch({fetch}){widen}"
        return text, int(cr * geo.width // block * dtype_bytes(dtype)), vrf

    def _loads(self, members: tuple[Member, ...], name: str, buffer: str, param: Callable[[Member], str],
               tile: str, engines: Callable[[Member, tuple[int, ...]], str], packet: str = "",
               indent: str = "        ", shared: bool = False) -> str:  # fmt: skip
        """`let name: buffer` holding each member's rows of a [rows, K] parameter (its codes, its block
        scales; the chunk `tile` selects): one DMA for a member alone, else one per member and cluster
        its rows land in, side by side (`shared`: on a share of the cluster's stream engines each). The
        early loads (indented once) are written on one line."""
        geo = self.geo

        def rows(m: Member) -> str:
            return f"{param(m)}.rename({m.row_axis}, {geo.R}, {m.offset}).rename({m.k_axis}, {geo.k_axis}, 0)"

        if len(members) == 1:
            m = members[0]
            wrap = " " if indent == "    " else f"\n{indent}    "
            load = f"{rows(m)}{tile}.dma(engines = {engines(m, self._clusters(members))}{packet})"
            return f"{indent}let {name}: {buffer} ={wrap}{load};\n"
        lines = [f"{indent}let {name}: {buffer} = dm::empty();\n"]
        spans = {m.index: self._clusters((m,)) for m in members}
        loads = [(m, cluster, len(spans[m.index])) for m in members for cluster in spans[m.index]]
        shares = self._shares(loads) if shared else {}
        for m, cluster, spread in loads:
            part = f".tile({geo.R} / {geo.per_cluster}, {cluster}, 1)" if spread > 1 else ""
            listed = shares.get((m.index, cluster)) or engines(m, (cluster,))
            lines.append(f"{indent}{rows(m)}{part}{tile}.dma_into({name}, engines = {listed}{packet});\n")
        return "".join(lines)

    def _shares(self, loads: list[tuple[Member, int, int]]) -> dict[tuple[int, int], str]:
        """Each cluster's stream engines shared out among the DMAs that land in it, in proportion to
        their rows (one engine at least; in turn where there are more DMAs than engines). An engine runs
        its commands one after another, each after a start-up: several DMAs on every engine would pay
        their start-ups in a row, on engines of their own they pay them side by side."""
        geo, out = self.geo, {}
        for cluster in {c for _, c, _ in loads}:
            here = [m for m, c, _ in loads if c == cluster]
            if len(here) < 2:
                continue
            low, high = cluster * geo.per_cluster, (cluster + 1) * geo.per_cluster
            rows = [min(m.offset + m.rows, high) - max(m.offset, low) if geo.split else m.rows for m in here]
            engines = self.p.engines.stream_local(self._count((here[0],)))
            if len(engines) < 2:
                continue
            self.p.shared = True
            for m, taken in zip(here, share_out(rows, engines), strict=True):
                out[(m.index, cluster)] = self.p.engines.listed((cluster,), taken)
        return out


def share_out(sizes: list[int], engines: list[int]) -> list[list[int]]:
    """`engines` shared out among loads of `sizes`: in proportion to size, one at least, each load's
    engines next to each other (largest remainder); with fewer engines than loads, one each in turn."""
    if not engines:
        return [[] for _ in sizes]
    if len(sizes) >= len(engines):
        return [[engines[i % len(engines)]] for i in range(len(sizes))]
    spare = len(engines) - len(sizes)
    total = sum(sizes) or 1
    exact = [spare * size / total for size in sizes]
    counts = [1 + int(e) for e in exact]
    order = sorted(range(len(sizes)), key=lambda i: (int(exact[i]) - exact[i], i))
    for i in order[: len(engines) - sum(counts)]:
        counts[i] += 1
    out, start = [], 0
    for count in counts:
        out.append(engines[start : start + count])
        start += count
    return out


def _outdented(text: str) -> str:
    """A loop body's statements one level out (a chunk peeled off the loop)."""
    return text.replace("        ", "    ", 1).replace("\n        ", "\n    ")
