"""The generated design space of one kernel: knobs that are schedule choices, for any op graph.

Knobs: per group, the split-K groups (`kgroups`) and how its input reaches the TRFs (`bcast`: 1 the
switch, on a ring of the slices its copies reach, 0 a replicating DMA on every engine, 2 one on the
engines the weights leave spare); shared, the chunk size (a level: about 2, 4, 8, 16, 32 or 64 KB of
weights per slice per chunk, up to 16 KB for a kernel of several groups; the largest halves the
commands, and so the DMA start-ups, where few slices stream a kernel), the pipeline depth, the
DMA engines per cluster for the weights, whether the last chunk is cut into smaller pieces after the
loop (`tail`: less contraction left once the last weight byte lands), and whether quantised codes are
contracted as they stream in where the rules allow it (`direct`) or decoded in the fetch adapter.
Rows per slice follow from the k-groups: the fewest rows that fit the row-groups in the slices, whole
heads when per-head ops run, and whole HBM units of output when the rows are stored. A slice's columns
come in tiles of the fastest contraction's packet; where those admit few k-group counts (a small K of
f4 codes), counts only a smaller tile admits are offered too, beside them. Where a design's
stored rows still end in partial units on their slices (spread rows, a cluster's share no multiple of
a unit), `stage` gathers them onto few slices in whole units before the store. Where a stream's codes
are decoded on the way in, `subdecode` has the sub queue decode every other chunk into DM beside main.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass

from chiplore.core.ops import CacheWrite, Store
from chiplore.core.pack import Facts, Knob, Params, settings
from chiplore.core.target import KernelSpec
from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.pack.generator.build import Design, RowSpace, program_text, write
from chiplore.simulator.pack.generator.geometry import Geometry, RowAxis
from chiplore.simulator.pack.generator.graph import Analysis, Group, Unsupported, analyse
from chiplore.simulator.pack.generator.program import Program, dtype_bytes
from chiplore.simulator.pack.generator.signature import Signature, SignatureError, read_signature
from chiplore.simulator.pack.generator.stream import block_of, column_packet, contraction, stream_dtype
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip

CHUNK_TARGETS = (2048, 4096, 8192, 16384, 32768, 65536)  # weight bytes per slice per chunk, by `chunk` level
DEPTHS = (2, 3, 4, 6)
KGROUPS = (1, 2, 4, 8, 16, 32, 64)
WIDE_KGROUPS = (128, 256, 512, 1024)  # only where no count above fits: a space's choices stay as they were


def split_clusters(rows: int, most: int) -> int:
    """The clusters `rows` split over evenly: the most of the first `most` they divide into."""
    return next(c for c in range(most, 0, -1) if rows % c == 0)


class Twin(str):
    """A refusal that only says another setting writes the same program (not a limit of the chip or
    the pack): `why_empty` leaves it out of what it reports."""


STAGE_NONE = Twin("stage 1: no store here leaves partial HBM units on its slices to gather: stage 0 writes it")
SHARE_NONE = Twin("share 1: no cluster takes two DMAs of a chunk on two engines or more: share 0 writes it")
SUBDECODE_NONE = Twin(
    "subdecode 1: no stream here decodes its codes in a loop of alternating chunks: subdecode 0 writes it"
)
DIRECT_NONE = Twin("direct 1: the rules let no weight of this kernel stream into the contraction: direct 0 writes it")
VRF_LIVE = " of VRF live"  # the end of a refusal for registers that fit no VRF of the chip
SHOWN_REASONS = 4  # an empty space's refusal names its most frequent reasons, then counts the rest
TAILS = (0, 1, 2)  # the last chunk whole, in two halves, or in a half and two quarters (Geometry.tail_rows)


@dataclass(frozen=True)
class GroupShape:
    """What the space knows of a group before any fact: its axes and its k-group choices."""

    row: RowAxis
    k_axis: str
    kgroups: tuple[int, ...]
    block: int | None  # the block of its block scales
    stored: bool  # its rows are written to an output
    fit: Fit = None  # type: ignore[assignment]  # how strictly rows and columns are cut (set by _shape)
    looser: tuple[tuple[int, Fit], ...] = ()  # k-group counts only a looser cut admits, each with its cut

    def at(self, kg: int) -> GroupShape:
        """The shape as `kg` k-groups cut it: under its own looser cut where only that admits them."""
        for count, fit in self.looser:
            if count == kg:
                return dataclasses.replace(self, fit=fit, looser=())
        return self


@dataclass(frozen=True)
class Fit:
    """How a group's rows and columns may be cut: a slice's columns in whole tiles of `step` (`f4` for
    f4 codes; a fetch packet of the fastest contraction, or a smaller one where K is no multiple of it:
    `column_packet` picks each design's), rows per slice in multiples of `rows` (a fold of 8 lanes, or
    4), over `clusters` clusters (both, or cluster 0 for rows that do not halve into whole row-groups).
    The space takes the strictest that fits; where it admits fewer k-group counts than the space offers,
    looser ones add theirs (a small K whose f4 columns do not cut into 64s over four k-groups cuts into
    32s: more slices share a decode-bound contraction)."""

    step: int
    f4: int
    rows: int
    clusters: int


FITS = (Fit(32, 64, 8, 2), Fit(8, 8, 8, 2), Fit(8, 8, 4, 2), Fit(8, 8, 8, 1), Fit(8, 8, 4, 1))


class GeneratedSpace:
    """A `DesignSpace` (chiplore.core.pack) written from the kernel's op graph."""

    consults = vocab.CONSULTS

    def __init__(self, spec: KernelSpec, sig: Signature, analysis: Analysis,
                 chip: Chip = DOCUMENTED_CHIP) -> None:  # fmt: skip
        self.kernel = spec.name
        self.spec, self.sig, self.analysis = spec, sig, analysis
        self.chip = chip  # the shape every design is written for (its layouts' sizes, its engines)
        self.max_trf_columns = chip.trf_lane_bytes // 2  # bf16 columns one lane holds
        # weight engines per cluster: two up to all of a cluster's (one where a cluster has one)
        self.engine_counts = tuple(range(min(2, chip.engines_per_cluster), chip.engines_per_cluster + 1))
        self._fit_cache: dict[tuple[int, int, int, int], list[int]] = {}
        # a space's validity asks for each group's geometry under every knob setting: once per choice
        self._geometries: dict[tuple[object, ...], Geometry | str] = {}  # a geometry, or why there is none
        self._layouts: dict[tuple[object, ...], tuple[Geometry, ...] | str] = {}  # see design
        self.shapes: list[GroupShape] = []
        self.rows: list[RowSpace] = []
        for group in analysis.groups:
            shape, rows = self._shape(group)
            self.shapes.append(shape)
            self.rows.append(rows)
        multi = len(analysis.groups) > 1
        knobs = [Knob(f"kgroups{g}" if multi else "kgroups", s.kgroups) for g, s in enumerate(self.shapes)]
        knobs.append(Knob("bcast", (1, 0, 2)))
        if multi:  # each group its own chunk size (a later group's pipeline holds the first one's bytes)
            # up to 16 KB: with the larger levels the FFN's space was no better and its climb found worse
            levels = tuple(range(len(CHUNK_TARGETS) - 2))
            knobs += [Knob(f"chunk{g}", levels) for g in range(len(self.shapes))]
        else:
            knobs.append(Knob("chunk", tuple(range(len(CHUNK_TARGETS)))))
        knobs += [
            Knob("depth", DEPTHS),
            Knob("engines", self.engine_counts),
            Knob("stagger", (0, 1)),
            Knob("tail", TAILS),
        ]
        if any(self._spreads(g) for g in range(len(self.shapes))):
            knobs.append(Knob("spread", (0, 1)))
        # the quantised weights' dtypes: `direct` chooses how they reach the contraction
        self.quantised = sorted({m.dtype for group in analysis.groups for m in group.members if m.dtype != "bf16"})
        if self.quantised:
            knobs.append(Knob("direct", (1, 0)))
        if any(group.chained_from is not None for group in analysis.groups):
            knobs.append(Knob("ahead", (0, 1)))
        # a store gathers whole rows only (a member's rows among others' are written where they lie)
        groups = zip(self.shapes, analysis.groups, strict=True)
        self.stageable = tuple(shape.stored and len(group.members) == 1 for shape, group in groups)
        if any(self.stageable):
            knobs.append(Knob("stage", (0, 1)))
        # members sharing a row space load a chunk with one DMA each: a cluster may share its engines among them
        if chip.engines_per_cluster > 1 and any(not g.stacked and len(g.members) > 1 for g in analysis.groups):
            knobs.append(Knob("share", (0, 1)))
        # quantised codes some toolchain decodes on the way in: the sub queue may decode every other chunk
        if self.quantised:
            knobs.append(Knob("subdecode", (0, 1)))
        self.knobs = tuple(knobs)
        self._programs: OrderedDict[str, Program | str] = OrderedDict()
        # why a design is invalid (None: it is valid), per design with `stagger` off and facts: see why_invalid
        self._verdicts: dict[tuple[Design, tuple[tuple[str, float], ...]], str | None] = {}
        self._dry_run()

    def _dry_run(self) -> None:
        """Write one design with the documented defaults, so that a graph the writers cannot lower is
        refused now (Unsupported, with the reason), not as a space of nothing but invalid points."""
        for setting in settings(self):
            design = self.design(setting, {})
            if not isinstance(design, str):
                self._write(design, {})
                return
        raise Unsupported(f"{self.kernel}: no knob setting fits its rows and columns on the slices")

    def _write(self, design: Design, facts: Facts) -> Program:
        return write(self.sig, self.analysis, tuple(self.rows), design, facts, "")

    # ---- construction ------------------------------------------------------------------------------

    def _shape(self, group: Group) -> tuple[GroupShape, RowSpace]:
        sig, g = self.sig, group.index
        if group.heads:
            hd = int(group.head_dim)  # type: ignore[arg-type]
            heads, head_rows = sig.add_atom(f"Hh{g}_", group.rows // hd), sig.add_atom(f"Dh{g}_", hd)
            name = sig.add_composite(f"R{g}_", (heads, head_rows))
            row = RowAxis(name, ((heads, group.rows // hd), (head_rows, hd)))
            space = RowSpace((heads, head_rows), None)
        elif len(group.members) > 1 and not group.stacked:
            # a unit divides every member's rows and each cluster's share (the rows split over the most of the
            # chip's clusters they divide into), so both cut the row axis evenly: on four clusters a unit of
            # half the rows left each cluster half a unit, and its operands' loads empty tiles (E0207)
            share = group.rows // split_clusters(group.rows, self.chip.clusters)
            unit = math.gcd(*(m.rows for m in group.members), share)
            units, unit_rows = sig.add_atom(f"Ru{g}_", group.rows // unit), sig.add_atom(f"Du{g}_", unit)
            name = sig.add_composite(f"R{g}_", (units, unit_rows))
            row = RowAxis(name, ((units, group.rows // unit), (unit_rows, unit)))
            space = RowSpace(None, (units, unit))
        else:
            name = sig.add_atom(f"R{g}_", group.rows)
            row, space = RowAxis(name, ((name, group.rows),)), RowSpace(None, None)
        k_axis = self._chained_axis(group) or sig.add_atom(f"K{g}_", group.k)
        blocks = {m.op.block for m in group.members if m.op.scale_kind == "block"}
        block = blocks.pop() if blocks else None
        stored = any(isinstance(op, Store | CacheWrite) for op in group.row_ops)
        wanted = 4 if len(self.analysis.groups) == 1 else 3
        ranked: list[tuple[int, int]] = []
        strict: Fit | None = None
        looser: dict[int, Fit] = {}
        for counts in (KGROUPS, WIDE_KGROUPS):  # a K too long for 64 k-groups spreads over more
            for fit in FITS:
                shape = GroupShape(row, k_axis, (), block, stored, fit)
                for kg in counts:
                    if any(kg == k for _, k in ranked):  # a stricter cut admits it already
                        continue
                    geo = self._geometry(group, shape, kg, 0, 2, vocab.HBM_UNIT)  # before any fact
                    if geo is not None:
                        ranked.append((-(geo.groups * kg), kg))
                        if strict is not None:
                            looser[kg] = fit
                if ranked and strict is None:
                    strict = fit
                if len(ranked) >= wanted:
                    break
            if ranked:
                break
        if strict is not None:
            shape = GroupShape(row, k_axis, (), block, stored, strict)
        if not ranked:
            raise Unsupported(f"group {g}: no split of {group.rows} rows x {group.k} columns fits the slices "
                              f"({self._why_not(group, shape)})")  # fmt: skip
        # a k-group's weight rows should be at least an HBM unit long (shorter packets waste the engines),
        # but where few are, shorter ones fill the choices: a small kernel's rows of whole heads leave
        # most slices idle, and spreading their columns over more slices is what shortens its passes
        strictly = [item for item in ranked if item[1] not in looser]
        row_bytes = {kg: group.k // kg * min(dtype_bytes(m.dtype) for m in group.members) for _, kg in strictly}
        long_enough = [item for item in strictly if row_bytes[item[1]] >= vocab.HBM_UNIT]
        short = [item for item in strictly if item not in long_enough]
        best = [kg for _, kg in (sorted(long_enough) + sorted(short))[:wanted]]
        # the counts only a looser cut admits fill what is left, the nearest first: they add choices
        # and never displace the strict cut's (faster packets where both fit)
        filled = best + sorted(looser)[: wanted - len(best)]
        chosen = tuple(sorted(filled))
        cuts = tuple((kg, fit) for kg, fit in sorted(looser.items()) if kg in chosen)
        return GroupShape(row, k_axis, chosen, block, stored, shape.fit, cuts), space

    def _chained_axis(self, group: Group) -> str | None:
        """A chained group reduces over its producer's row axis itself when that is an atom and the
        value is all of it: the copy between them is then plain (a renamed copy moves element by element)."""
        if group.chained_from is None:
            return None
        producer = self.analysis.groups[group.chained_from]
        member = self.analysis.member_of.get(group.input)
        offset = producer.members[member].offset if member is not None else 0
        row = self.shapes[group.chained_from].row
        if offset or len(row.atoms) != 1 or row.size != group.k:
            return None
        return row.name

    def _geometry(self, group: Group, shape: GroupShape, kg: int, chunk_level: int, depth: int,
                  unit: int, spread: bool = False) -> Geometry | None:  # fmt: skip
        """The geometry of a group for these choices, or None when none fits. `spread`: the rows over
        the most row-groups even when they are stored (a small kernel's passes then share the slices)."""
        found = self._geometry_or_why(group, shape, kg, chunk_level, depth, unit, spread)
        return found if isinstance(found, Geometry) else None

    def _geometry_or_why(self, group: Group, shape: GroupShape, kg: int, chunk_level: int, depth: int,
                         unit: int, spread: bool = False) -> Geometry | str:  # fmt: skip
        shape = shape.at(kg)
        key = (group.index, shape, kg, chunk_level, depth, unit, spread)
        if key not in self._geometries:
            self._geometries[key] = self._new_geometry(group, shape, kg, chunk_level, depth, unit, spread)
        return self._geometries[key]

    def _new_geometry(self, group: Group, shape: GroupShape, kg: int, chunk_level: int, depth: int,
                      unit: int, spread: bool) -> Geometry | str:  # fmt: skip
        k = group.k
        chip = self.chip
        if k % kg or chip.slices % kg:
            return f"{kg} k-groups do not divide {k} columns and {chip.slices} slices"
        width = k // kg
        if width % self._step(group, shape):
            return f"{width} columns a slice are no whole tiles of {self._step(group, shape)}"
        if width > self.max_trf_columns:
            return f"{width} columns a slice are more than a TRF holds ({self.max_trf_columns})"
        n = shape.row.size
        # rows split evenly over the most clusters they divide into (on three clusters, 8,192 rows take two:
        # a third's port idles, where every row on cluster 0 left two idle)
        clusters = split_clusters(n, chip.clusters if shape.fit.clusters > 1 else 1)
        per_cluster = n // clusters
        pad = chip.slices // kg
        fits = self._fits(group, shape, per_cluster, pad)
        if not fits:
            heads = f" of whole heads of {group.head_dim}" if group.heads else ""
            return (f"no rows per slice{heads} in multiples of {shape.fit.rows} split {per_cluster} rows into at "
                    f"most {pad} row-groups")  # fmt: skip
        # stored rows fill whole HBM units (a partial unit is read, modified and written back) unless
        # that leaves under an eighth of the row-groups; other rows take the most slices
        aligned = [r for r in fits if (2 * r) % unit == 0 and per_cluster // r >= per_cluster // fits[0] / 8]
        r = aligned[0] if shape.stored and aligned and not spread else fits[0]
        crows = self._chunk_rows(group, shape, r, width, chunk_level)
        if crows is None:
            return f"no chunk of whole lane folds divides {r} rows a slice"
        geo = Geometry(group.index, shape.row, shape.k_axis, k, clusters, r, kg, crows, depth, group.head_dim,
                       chip=chip)  # fmt: skip
        return geo.legal() or geo

    @staticmethod
    def _step(group: Group, shape: GroupShape) -> int:
        """The columns of a slice come in whole tiles of this many (f4 codes: two to a byte)."""
        step = shape.fit.f4 if any(m.dtype == "f4e2m1" for m in group.members) else shape.fit.step
        return math.lcm(step, shape.block) if shape.block else step

    def _why_not(self, group: Group, shape: GroupShape) -> str:
        """Why no k-group count fits under the loosest cut (the message of a refused group)."""
        step = self._step(group, shape)
        counts = [kg for kg in (*KGROUPS, *WIDE_KGROUPS) if kg <= self.chip.slices]
        widths = [kg for kg in counts if group.k % kg == 0 and (group.k // kg) % step == 0
                  and group.k // kg <= self.max_trf_columns]  # fmt: skip
        if not widths:
            return (f"no k-group count (a power of two up to the {self.chip.slices} slices of a cluster) cuts "
                    f"{group.k} columns into whole tiles of {step} of at most {self.max_trf_columns} a "
                    "slice")  # fmt: skip
        heads = f" of whole heads of {group.head_dim}" if group.heads else ""
        return (f"no rows per slice{heads} in multiples of {shape.fit.rows} split its rows into at most "
                f"{self.chip.slices // widths[0]} row-groups per cluster")  # fmt: skip

    def reach(self) -> float:
        """The share of a cluster's slices the least spread group can work on at most (its row-groups
        times its k-groups, over every k-group choice)."""
        return min(
            max((self._slices_used(group, shape, kg) for kg in shape.kgroups), default=0) / self.chip.slices
            for group, shape in zip(self.analysis.groups, self.shapes, strict=True)
        )

    def _slices_used(self, group: Group, shape: GroupShape, kg: int) -> int:
        geo = self._geometry(group, shape, kg, 0, DEPTHS[0], vocab.HBM_UNIT, spread=True)
        return 0 if geo is None else geo.groups * kg

    def _spreads(self, g: int) -> bool:
        """Whether spreading group g's rows over the most row-groups is another design for some k-groups."""
        group, shape = self.analysis.groups[g], self.shapes[g]
        return any(
            self._geometry(group, shape, kg, 0, 2, vocab.HBM_UNIT, spread=True)
            != self._geometry(group, shape, kg, 0, 2, vocab.HBM_UNIT)
            for kg in shape.kgroups
        )

    def _fits(self, group: Group, shape: GroupShape, per_cluster: int, pad: int) -> list[int]:
        """Rows per slice that split a cluster's rows into at most `pad` row-groups, ascending."""
        key = (group.index, per_cluster, pad, shape.fit.rows)
        if key not in self._fit_cache:
            divisors = {d for i in range(1, math.isqrt(per_cluster) + 1) if per_cluster % i == 0
                        for d in (i, per_cluster // i)}  # fmt: skip
            self._fit_cache[key] = [r for r in sorted(divisors) if per_cluster // r <= pad
                                    and self._rows_ok(group, shape, r) and shape.row.cuts(per_cluster, r)]  # fmt: skip
        return self._fit_cache[key]

    @staticmethod
    def _chunk_bytes(group: Group, geo: Geometry) -> float:
        """Weight bytes a slice receives per chunk."""
        members = len(group.members) if group.stacked else 1
        return geo.chunk_rows * geo.width * max(dtype_bytes(m.dtype) for m in group.members) * members

    def _rows_ok(self, group: Group, shape: GroupShape, r: int) -> bool:
        if shape.block:  # a flit of bf16 rows is at least 4 of them
            if r % 4:
                return False
        elif r % shape.fit.rows:  # the rows of a chunk fold onto the lanes
            return False
        if group.heads:
            hd = int(group.head_dim)  # type: ignore[arg-type]
            return r % hd == 0 and r // hd in (1, 2, 4, 6, 8)  # a head's sum per f32 lane of one flit
        return True

    def _chunk_rows(self, group: Group, shape: GroupShape, r: int, width: int, level: int) -> int | None:
        """The chunk of the level: the rows whose weights come closest to its target."""
        step = shape.fit.rows
        # block-scaled rows come in 2, 4 or 6 too (a flit of bf16 rows is 4), and in whole folds up to the
        # slice's rows: a small kernel of whole heads streams them in few large chunks, not 8 rows at a time
        folds = range(step, r + 1, step)
        options = [c for c in (sorted({2, 4, 6, *folds}) if shape.block else folds) if r % c == 0]
        per_row = (
            width * max(dtype_bytes(m.dtype) for m in group.members) * (len(group.members) if group.stacked else 1)
        )

        def choice(target: int) -> int:
            return min(options, key=lambda c: (abs(math.log(c * per_row / target)), -c))

        return choice(CHUNK_TARGETS[level]) if options else None

    # ---- knobs -> design ---------------------------------------------------------------------------

    def _value(self, params: Params, name: str, g: int) -> int:
        key = f"{name}{g}" if len(self.shapes) > 1 else name
        return params.get(key, params.get(name, 0))

    def design(self, params: Params, facts: Facts) -> Design | str:
        """The design a knob setting names, or why it names none."""
        unit = vocab.hbm_unit(facts)
        depth = params.get("depth", DEPTHS[0])
        spread = bool(params.get("spread", 0))
        tail = params.get("tail", 0)
        cuts = tuple(
            (self._value(params, "kgroups", g), self._value(params, "chunk", g)) for g in range(len(self.shapes))
        )
        # the groups' geometries follow from these knobs alone: a space's check asks for each of them under
        # every setting of the others (inputs, engines, stagger, decode), so they are worked out once
        key = (unit, depth, spread, tail, cuts)
        if key not in self._layouts:
            self._layouts[key] = self._layout(unit, depth, spread, tail, cuts)
        geometries = self._layouts[key]
        if isinstance(geometries, str):
            return geometries
        bcast = params.get("bcast", 1)
        broadcast = tuple(bcast == 1 for _ in geometries)
        engines = params.get("engines", self.chip.engines_per_cluster)
        if bcast == 2 and engines >= self.chip.engines_per_cluster:
            return f"bcast 2: {engines} weight engines per cluster leave none spare for the input's copy"
        direct = bool(params.get("direct", 1))
        if direct and self.quantised and not any(vocab.streams(facts, dtype) for dtype in self.quantised):
            return DIRECT_NONE
        for group, geo in zip(self.analysis.groups, geometries, strict=True):
            for m in group.members:
                plan = contraction(m.dtype, direct, facts)
                how = "directly" if direct else "decoded"
                if column_packet(plan, m.dtype, geo.width, block_of(m), self.chip.lanes) is None:
                    return f"{m.op.weight}: {geo.width} columns of {m.dtype} are no whole fetch packets {how}"
        if engines not in self.engine_counts:
            return "engines"
        stage = bool(params.get("stage", 0))
        # bf16 rows are the smallest a store writes: rows that fill whole units in bf16 fill them in f32
        partial = (ok and geo.rows_per_slice * 2 % unit for ok, geo in zip(self.stageable, geometries, strict=True))
        if stage and not any(partial):
            return STAGE_NONE
        return Design(geometries, broadcast, engines, direct, bool(params.get("stagger", 0)), copy_spare=bcast == 2,
                      chip=self.chip, ahead=bool(params.get("ahead", 0)), stage=stage,
                      share=bool(params.get("share", 0)), subdecode=bool(params.get("subdecode", 0)))  # fmt: skip

    def _layout(self, unit: int, depth: int, spread: bool, tail: int,
                cuts: tuple[tuple[int, int], ...]) -> tuple[Geometry, ...] | str:  # fmt: skip
        """Each group's geometry for its (k-groups, chunk level) in `cuts` and the shared depth, spread
        and tail, or why they name none."""
        if tail not in TAILS:
            return f"tail {tail}: not one of {TAILS}"
        spread_out = False  # whether spreading changed some group's rows (else it is the unspread design)
        tailed = False  # whether some group's last chunk is cut (else it is the tail 0 design)
        geometries: list[Geometry] = []
        for g, (group, shape) in enumerate(zip(self.analysis.groups, self.shapes, strict=True)):
            kg, level = cuts[g]
            found = self._geometry_or_why(group, shape, kg, level, depth, unit, spread)
            if isinstance(found, str):
                return f"group {g}: {kg} k-groups at chunk level {level}: {found}"
            geo = found
            spread_out = spread_out or (spread and geo != self._geometry(group, shape, kg, level, depth, unit))
            if tail:
                cut = dataclasses.replace(geo, tail=tail)
                # a flit of bf16 rows is 4 (block-scaled chunks run down to 2 rows); a group whose last
                # chunk does not cut keeps it whole
                if cut.legal() is None and min(cut.tail_rows) >= (2 if shape.block else 4):
                    geo, tailed = cut, True
            for lower in range(level):  # no two levels may write the same program
                if self._geometry(group, shape, kg, lower, depth, unit, spread) == geo:
                    return Twin(f"group {g}: chunk level {level} chooses what level {lower} does")
            if g == 0 and geo.depth > geo.uniform_chunks and geo.depth != DEPTHS[0]:
                return f"group {g}: depth {geo.depth} over {geo.uniform_chunks} chunk(s) in its loop"
            if g > 0:  # as many bytes in flight as the first group's pipeline holds
                first = geometries[0]
                held = first.depth * self._chunk_bytes(self.analysis.groups[0], first)
                wanted = math.ceil(held / self._chunk_bytes(group, geo))
                geo = dataclasses.replace(geo, depth=max(DEPTHS[0], min(geo.uniform_chunks, max(depth, wanted))))
            geometries.append(geo)
        if spread and not spread_out:
            return Twin("spread: every group's rows already take the most row-groups")
        if tail and not tailed:
            return Twin(f"tail {tail}: no group's last chunk cuts into pieces of whole flits")
        return tuple(geometries)

    def program(self, params: Params, facts: Facts) -> Program | str:
        """The design's program (cached), or why it cannot be written."""
        key = json.dumps([params, sorted(facts.items())], sort_keys=True)
        if key in self._programs:
            self._programs.move_to_end(key)
            return self._programs[key]
        result = self._written(self.design(params, facts), facts)
        self._programs[key] = result
        if len(self._programs) > 512:
            self._programs.popitem(last=False)
        return result

    def _written(self, design: Design | str, facts: Facts) -> Program | str:
        """A design's program within the chip's DM and VRF (its registers loaded where they are used when
        the VRF cannot hold them all from before the loop), or why it cannot be written."""
        if isinstance(design, str):
            return design
        try:
            result = self._write(design, facts)
        except Unsupported as error:
            return str(error)
        if design.stage and not result.staged:
            return STAGE_NONE
        if design.share and not result.shared:
            return SHARE_NONE
        if design.subdecode and not result.subdecoded:
            return SUBDECODE_NONE
        if design.copy_spare and not result.copied_input:
            return Twin("bcast 2: no input is copied by DMA here (each is loaded replicated): bcast 0 writes it")
        dm, vrf = result.budget.dm, result.budget.vrf_peak()
        if dm > vocab.usable_dm(facts):
            return f"{dm:,} B of DM per slice"
        if vrf > self.chip.vrf_bytes:
            tighter = _tighter(design)
            if tighter is not None:
                written = self._written(tighter, facts)
                # the tightest writing's live set is the one to report: the registers no writing fits
                if isinstance(written, Program) or written.endswith(VRF_LIVE):
                    return written
            return f"{vrf:,} B{VRF_LIVE}"
        return result

    # ---- the DesignSpace protocol --------------------------------------------------------------------

    def valid(self, params: Params, facts: Facts) -> bool:
        return self.why_invalid(params, facts) is None

    def why_invalid(self, params: Params, facts: Facts) -> str | None:
        design = self.design(params, facts)
        if isinstance(design, str):
            return design
        # Staggering only moves small loads from one engine to another: no DM or VRF byte changes, so a
        # design and its staggered twin are valid together, and checking a space writes one of the two.
        key = (dataclasses.replace(design, stagger=False), tuple(sorted(facts.items())))
        if key not in self._verdicts:
            # A staged design is its unstaged twin and a gather more (more DM, the same passes), a shared one
            # its twin on other engines: where the twin is refused, so is it, and an empty space's check
            # writes one program of the two.
            twin = next((knob for knob in ("stage", "share") if getattr(design, knob)), None)
            plain = self.why_invalid({**params, twin: 0}, facts) if twin else None
            result = Twin(f"{twin} 1: as {twin} 0, {plain}") if plain is not None else self.program(params, facts)
            self._verdicts[key] = None if isinstance(result, Program) else result
        return self._verdicts[key]

    def why_empty(self, facts: Facts) -> str:
        """Why no setting is valid ("" when one is): the refusals the settings get, most frequent first,
        each in the words of its first setting (a user learns what to change in the pack or the chip),
        the four most frequent and a count of the rest (with two, a new user's chip left 43 % of its
        settings unexplained). A setting refused only as another's twin counts in neither: that
        other setting's refusal is the reason."""
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for setting in settings(self):
            why = self.why_invalid(setting, facts)
            if why is None:
                return ""
            if isinstance(why, Twin):
                continue
            kind = re.sub(r"\d[\d,.]*", "#", why)  # "12,288 B of VRF live" and "9,216 B ..." are one refusal
            counts[kind] += 1
            first.setdefault(kind, why)
        total = sum(counts.values())
        shown = counts.most_common(SHOWN_REASONS if len(counts) > SHOWN_REASONS + 1 else None)  # not "1 other"
        said = "; ".join(f"{first[kind]} ({n:,} of {total:,} settings)" for kind, n in shown)
        rest = total - sum(n for _, n in shown)  # the reasons named left the rest of the space unexplained
        if rest:
            others = len(counts) - len(shown)
            said += f"; {others} other reason{'s' if others > 1 else ''} ({rest:,} of {total:,} settings)"
        return said

    def source(self, params: Params, facts: Facts, version: str) -> str:
        result = self.program(params, facts)
        if not isinstance(result, Program):
            raise ValueError(f"{self.kernel} {json.dumps(params, sort_keys=True)}: {result}")
        return program_text(self.sig, result, version, self.summary(params, facts))

    def summary(self, params: Params, facts: Facts) -> str:
        design = self.design(params, facts)
        if isinstance(design, str):
            return design
        parts = []
        copy = "DMA on the spare engines" if design.copy_spare else "DMA"
        for geo, bcast in zip(design.geometries, design.broadcast, strict=True):
            tail = f" (the last in pieces of {', '.join(map(str, geo.tail_rows))})" if geo.tail else ""
            parts.append(f"group {geo.index}: {geo.kgroups} k-groups of {geo.width}, {geo.rows_per_slice} rows x "
                         f"{geo.groups} row-groups per cluster, {geo.chunks} chunks of {geo.chunk_rows} rows{tail}, "
                         f"depth {geo.depth}, input by {'switch' if bcast else copy}")  # fmt: skip
        staged = "; stores gathered into whole HBM units" if design.stage else ""
        shared = ", shared out among a chunk's DMAs" if design.share else ""
        return "; ".join(parts) + f"; {design.engines} weight engines per cluster{shared}{staged}"

    def features(self, params: Params, facts: Facts) -> dict[str, object]:
        result = self.program(params, facts)
        design = self.design(params, facts)
        if not isinstance(result, Program) or isinstance(design, str):
            return {}
        dtypes = sorted({stream_dtype(m.dtype, design.direct, facts) for g in self.analysis.groups for m in g.members})
        packets = [min(vocab.MAX_PACKET, int(geo.width * dtype_bytes(m.dtype)))
                   for geo, g in zip(design.geometries, self.analysis.groups, strict=True)
                   for m in g.members]  # fmt: skip
        return {"dm.bytes_per_slice": result.budget.dm, "contract.stream_dtype": tuple(dtypes),
                "dma.packet_bytes": max(packets), "vrf.bytes_per_slice": result.budget.vrf_peak()}  # fmt: skip

    def rationale(self, params: Params, facts: Facts, predicted_cycles: float) -> str:
        result = self.program(params, facts)
        dm = result.budget.dm if isinstance(result, Program) else 0
        return (f"{json.dumps(params, sort_keys=True)}: {self.summary(params, facts)}; {dm:,} B of DM per slice; "
                f"predicted {predicted_cycles:,.0f} cycles")  # fmt: skip


def generation_problem(spec: KernelSpec, chip: Chip = DOCUMENTED_CHIP) -> str | None:
    """Why no space can be generated for the kernel on a chip of this shape (None when one can)."""
    try:
        _build(spec, chip)
    except (Unsupported, SignatureError, KeyError) as error:
        return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)  # no repr quotes
    return None


def generated_space(spec: KernelSpec, chip: Chip = DOCUMENTED_CHIP) -> GeneratedSpace | None:
    """The design space written from the kernel's op graph for a chip of this shape, or None without a
    graph or when the graph needs something the generator does not write (`generation_problem` says what)."""
    try:
        return _build(spec, chip)
    except (Unsupported, SignatureError, KeyError):
        return None


def _build(spec: KernelSpec, chip: Chip) -> GeneratedSpace:
    if spec.ops is None:
        raise Unsupported(f"{spec.name} declares no op graph")
    sig = read_signature(spec.baseline_source, spec.name)
    try:
        shared = GeneratedSpace(spec, sig, analyse(spec.ops, sig), chip)
    except Unsupported:  # members sharing a row space may fit the slices one by one
        split = _split_space(spec, chip)
        if split is None:
            raise
        return split
    # Rows that share a space may divide over the slices far worse than each member's alone (1,000 and
    # 1,536 rows: 1,268 a cluster, 4 x 317, fill one row-group; 500 and 768 fill 125 and 192): then
    # each member streams on its own.
    if shared.reach() < 1 / 2:
        split = _split_space(spec, chip)
        if split is not None and split.reach() > 2 * shared.reach():
            return split
    return shared


def _split_space(spec: KernelSpec, chip: Chip) -> GeneratedSpace | None:
    """The space with every matvec in a row space of its own, where that is another space and it fits."""
    assert spec.ops is not None
    try:
        whole = analyse(spec.ops, read_signature(spec.baseline_source, spec.name))
        sig = read_signature(spec.baseline_source, spec.name)
        analysis = analyse(spec.ops, sig, split=True)
        if len(analysis.groups) == len(whole.groups):
            return None
        return GeneratedSpace(spec, sig, analysis, chip)
    except Unsupported:
        return None


# How a design is written to need less VRF, in the order tried: (late, release, tile) registers.
_TIGHTER = ((False, False, False), (True, False, False), (True, True, False), (True, False, True), (True, True, True))


def _tighter(design: Design) -> Design | None:
    """The design written to need less VRF, when a VRF cannot hold its registers: loaded where they are
    first used (after the weight loop) rather than before it; then also dying with the pass that reads
    them; then, instead, a whole input vector's register loaded a tile at a time by the pass that reads
    it (a VRF that holds less than a slice's columns); then both. None after the last. A design that
    fitted before tiling existed is written as it was."""
    now = (design.late_registers, design.release_registers, design.tile_registers)
    at = _TIGHTER.index(now) if now in _TIGHTER else len(_TIGHTER) - 1
    if at + 1 == len(_TIGHTER):
        return None
    late, release, tile = _TIGHTER[at + 1]
    # recompute: a value read again by a sum is recomputed, unless each register dies with its pass
    return dataclasses.replace(design, late_registers=late, release_registers=release, recompute=not release,
                               tile_registers=tile)  # fmt: skip
