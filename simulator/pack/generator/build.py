"""One design's program: every group's input, weight stream and rows, in the order they run, with the
layouts they use and the budgets they need."""

from __future__ import annotations

import re
from dataclasses import dataclass

from chiplore.core.pack import Facts
from chiplore.simulator.pack.generator.frame import Frame, FrameEmitter, Value
from chiplore.simulator.pack.generator.geometry import Geometry
from chiplore.simulator.pack.generator.graph import Analysis, Member
from chiplore.simulator.pack.generator.inputs import Inputs
from chiplore.simulator.pack.generator.operands import RowOperands
from chiplore.simulator.pack.generator.program import Engines, Program
from chiplore.simulator.pack.generator.rows import Rows
from chiplore.simulator.pack.generator.signature import Signature
from chiplore.simulator.pack.generator.stream import Stream
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip


@dataclass(frozen=True)
class RowSpace:
    """A group's row axis and how its members and heads sit on it."""

    heads: tuple[str, str] | None  # (head axis, head-row axis)
    units: tuple[str, int] | None  # (unit axis, rows per unit) when members share it without heads


@dataclass(frozen=True)
class Design:
    """A resolved knob setting: each group's geometry and switch choice, and the shared choices."""

    geometries: tuple[Geometry, ...]
    broadcast: tuple[bool, ...]  # per group: the switch fills the TRFs (else a replicating DMA)
    engines: int
    direct: bool
    stagger: bool = False
    recompute: bool = True
    copy_spare: bool = False  # a replicating copy of an input goes on the spare engines
    chip: Chip = DOCUMENTED_CHIP  # the shape it is written for
    # Registers of the rows' ops loaded where they are first used (after the weight loop), not before
    # the loop while `sub` idles: longer tail, smaller VRF live set (a chip whose VRF holds fewer).
    late_registers: bool = False
    # Each pass that reads a register is committed at once, so the register dies with it: the VRF holds
    # one pass's operands at a time, at the cost of a pass per operand (a VRF too small for the rest).
    release_registers: bool = False
    # A register of a whole input vector (a norm's weight) is loaded a tile at a time, in a loop that
    # applies each tile's pass: the VRF holds a tile, at the cost of a pass start-up a tile (a chip
    # whose VRF holds less than a slice's columns).
    tile_registers: bool = False
    # A group that reads an earlier group's rows loads its first loop step's weights right after the
    # previous group's stream, ahead of its own input's copy (which waits for that group's passes).
    ahead: bool = False
    # A store whose slices hold partial HBM units of its rows (each read, modified and written back)
    # gathers them first, by a DM-to-DM copy, onto few slices that hold whole units.
    stage: bool = False
    # The DMAs of a chunk that land in one cluster (members sharing a row space) share out its weight
    # engines, in proportion to their rows, so that their start-ups run side by side, not one after another.
    share: bool = False
    # A stream whose codes are decoded on the way in (a quantised dtype the contraction cannot take) has
    # every other chunk decoded by the sub queue into DM, beside main's decodes: twice the table lookups.
    subdecode: bool = False


def row_frame(geo: Geometry) -> Frame:
    g, r = geo.index, geo.rows_per_slice
    packet = next(p for p in (8, 4, 2, 1) if r % p == 0)
    groups = geo.groups
    sum_group = None
    if groups > 1:
        sum_group = f"{geo.R} / {r} % {groups}" if r * groups < geo.n else f"{geo.R} / {r}"
    return Frame(
        layout=f"Lead{g}", elem=geo.rows_elem(), time=geo.row_digit(packet), packet=geo.row_mod(packet),
        elements=r, length=geo.n, sum_group=sum_group, sum_layout=f"Sum{g}", cross=geo.split,
        every_layout=f"Every{g}", cluster_digit=f"{geo.R} / {geo.per_cluster}",
    )  # fmt: skip


def write(sig: Signature, analysis: Analysis, rows: tuple[RowSpace, ...], design: Design, facts: Facts,
          version: str) -> Program:  # fmt: skip
    """The program of `design` (its text is `program_text`), with its budgets accounted."""
    reserved = frozenset(
        {
            sig.kernel,
            *(p.name for p in sig.params),
            *sig.atoms,
            *sig.composites,
            *sig.extra_atoms,
            *sig.extra_composites,
        }
    )
    program = Program(facts, Engines(design.engines, design.stagger, design.copy_spare, design.chip), reserved)
    emitter = FrameEmitter(
        program, recompute=design.recompute, release=design.release_registers, tile=design.tile_registers
    )
    program.preloading = any(m.op.scale_kind == "block" for g in analysis.groups[1:] for m in g.members)
    for geo in design.geometries:
        program.layouts.update(geo.layouts())
    exports: dict[str, tuple[Value, Member | None, Geometry]] = {}
    # An input no earlier group computes is written before every weight stream: a later group's own
    # input (its norm, its copy to the slices) would otherwise wait for the earlier groups' passes on
    # main, and its weights behind that copy on the engines.
    early = {
        group.index: Inputs(emitter, sig, group, geo, broadcast, None).run()
        for group, geo, broadcast in zip(analysis.groups, design.geometries, design.broadcast, strict=True)
        if group.chained_from is None
    }
    streamed: int | None = None  # the body mark just after the previous group's stream
    for group, geo, broadcast in zip(analysis.groups, design.geometries, design.broadcast, strict=True):
        chained = exports.get(group.input) if group.chained_from is not None else None
        trf = early[group.index] if group.index in early else Inputs(emitter, sig, group, geo, broadcast, chained).run()
        ahead = streamed if design.ahead and group.chained_from is not None else None
        stream = Stream(program, sig, group, geo, trf, design.direct, 0, ahead, design.share, design.subdecode)
        loop = program.mark()
        accumulators = stream.accumulators()
        stream.run(accumulators)
        streamed = program.mark()
        frame = row_frame(geo)
        space = rows[group.index]
        at = None if design.late_registers else loop
        operands = RowOperands(emitter, sig, group, geo, frame, space.heads, space.units, at, exports)
        out = Rows(emitter, sig, analysis, group, geo, frame, operands, accumulators, design.stage).run()
        for name, (value, member) in out.items():
            exports[name] = (value, member, geo)
    return program


def program_text(sig: Signature, program: Program, version: str, summary: str) -> str:
    renamed = free_layout_names(program)
    layouts = "".join(f"layout {renamed.get(name, name)} = {text};\n" for name, text in program.layouts.items())
    body = program.text()
    for name, free in renamed.items():  # a program names a layout only where it spreads it: `{..Grid0, ...}`
        body = re.sub(rf"(?<=\.\.){re.escape(name)}\b", free, body)
    return (f'#![toolchain = "{version}"]\n// chiplore generated design: {summary}\n{sig.axes_text()}\n\n{layouts}\n'
            f"kernel {sig.kernel}(\n{sig.params_text()}) {{\n{body}}}\n")  # fmt: skip


def free_layout_names(program: Program) -> dict[str, str]:
    """Each layout whose name (`Grid0`, `KIn0`, ...) the kernel binds already (a parameter, an axis, its
    own name) and a fresh name for it: a valid pack whose weight was called `Grid0` was refused."""
    return {name: program.unused(f"{name}_layout") for name in program.layouts if name in program.reserved}
