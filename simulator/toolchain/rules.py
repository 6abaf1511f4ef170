"""The catalogue of legality rules (docs/simrngd.md §5.3): code, message template, predicate, and the
severity each toolchain version gives it.

A rule keeps its number across versions; the letter of the emitted code is its severity in that
version (E0205 in 0.6.0 is W0205 in 0.5.0, E0520 is N0520 in 0.6.0).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from chiplore.simulator.diagnostics import Diagnostic

Level = Literal["E", "W", "N"]
SEVERITY_NAMES: dict[str, Literal["error", "warning", "note"]] = {"E": "error", "W": "warning", "N": "note"}
VERSIONS = ("0.5.0", "0.6.0", "0.7.0")


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True)

    number: str  # "0301"
    template: str
    predicate: str
    levels: tuple[Level | None, Level | None, Level | None]  # per version, in VERSIONS order
    fix: str = ""

    def level(self, version: str) -> Level | None:
        """The severity letter in that version; None where the rule is not checked."""
        return self.levels[VERSIONS.index(version)]

    def code(self, version: str) -> str | None:
        level = self.level(version)
        return None if level is None else f"{level}{self.number}"


def _rule(number: str, template: str, predicate: str, levels: str, fix: str = "") -> Rule:
    letters = tuple(None if c == "-" else c for c in levels)
    return Rule(number=number, template=template, predicate=predicate, levels=letters, fix=fix)  # type: ignore[arg-type]


STAGE_ORDER = (  # the Tensor Unit order, as E0120 words it
    "fetch, decode/widen, switch, collect, contract, vector, one reducer (reduce_slices, allreduce_slices or "
    "reduce_clusters), vector, narrow, transpose, commit"
)

RULES: tuple[Rule, ...] = (
    _rule(
        "0101",
        "syntax error at {line}:{col}: expected {expected}, found {found}",
        "Lark parse failure",
        "EEE",
        "fix the text at the caret; the expected tokens are listed",
    ),
    _rule(
        "0102",
        "unknown {kind} '{name}'{did_you_mean}",
        "undeclared axis/layout/tensor/fn/dtype, or kernel signature differs from the harness",
        "EEE",
        "declare the name, correct its spelling, or match the kernel's signature",
    ),
    _rule(
        "0103",
        "'{construct}' is not available in toolchain {version}; {replacement}",
        "construct not in the version's vocabulary",
        "EEE",
        "use the replacement the message names",
    ),
    _rule(
        "0104",
        "the program is too large to compile: {what} (the budget is {limit})",
        "source over 65,536 bytes, or more than 4,096 lowering steps (loop iterations, statements and fn calls "
        "after unrolling and inlining), or fn calls nested more than 32 deep",
        "EEE",
        "do the repeated work in fewer, larger passes (bigger tiles, fewer loop iterations), or split the kernel",
    ),
    _rule(
        "0105",
        "{what} is past the compiler's limit of {limit}",
        "syntax nested more than 100 levels deep (each nested loop or block, operator, unary minus, call and method "
        "of a chain adds a level), an integer literal over 2^63 - 1, a float literal beyond the range of a 64-bit "
        "float, an HBM tensor of more than 2^40 bytes (1 TiB), an output of more than 268,435,456 elements, a DMA of "
        "more than 4,000,000 packets",
        "EEE",
        "name intermediate results with `let`, split long chains and loop nests, and keep literals in range",
    ),
    _rule(
        "0106",
        "a Ferrite file holds one kernel, whose parameters are HBM tensors: {problem}",
        "a file with no kernel or with more than one, or a kernel parameter that is not an HBM tensor "
        "(`&hbm<D>[...]`, or `&mut hbm<D>[...]` for an output)",
        "EEE",
        "keep one kernel per file (helpers are `fn`s) and pass the kernel its tensors in HBM",
    ),
    _rule(
        "0107",
        "{construct} cannot be compiled as written: {reason}",
        "an argument, operand or value of the wrong kind that the other rules let through: a fn called with the "
        "wrong number or kinds of arguments, a tensor where an integer is needed, an integer division by zero, a "
        "view or pass without the arguments it takes, a pass over an HBM tensor, a DMA run shorter than a byte; "
        "and 0.5.0's `dm::at_addr`, which its vocabulary accepts and its lowerer cannot place",
        "EEE",
        "give each construct the arguments and operands its reference lists (place tensors with layouts, not at "
        "raw addresses)",
    ),
    _rule(
        "0110",
        "{stage} cannot turn {src} into {dst}",
        "unsupported decode/cast pair; a cast before any contract or vector stage only widens, one after only narrows",
        "EEE",
        "widen right after the fetch; narrow after a contract or vector stage (0.7.0: `.widen`/`.narrow`)",
    ),
    _rule(
        "0120",
        f"{{stage}} cannot follow {{prev}}: the Tensor Unit order is {STAGE_ORDER}",
        "stage order; to_trf/to_vrf may only follow fetch/decode/widen/switch/collect",
        "EEE",
    ),
    _rule(
        "0201",
        "{dim} mapping {m} has {n} positions, expected {expected}",
        "cluster or slice positions other than the chip's, more lanes than a slice's, rep/at inside elem/time/packet, "
        "a term padded to fewer positions than it has",
        "EEE",
    ),
    _rule(
        "0204",
        "digits of {axis} in {a} and {b} have no common refinement",
        "incompatible decompositions, a digit used twice",
        "EEE",
    ),
    _rule(
        "0205",
        "{axis} is not fully covered by {m}: digit {digit} missing",
        "static coverage hole in a layout or stream, or a device tensor read where no earlier op wrote it",
        "WEE",
    ),
    _rule(
        "0206",
        "{tensor} is read by {op} before anything writes it: its contents are undefined",
        "a device tensor (`dm::empty()`) read before any write to it (one written in part and then read where "
        "nothing wrote it is E0205)",
        "NNN",
        "initialise it (`dm::zeros()`, a DMA or a pass) if its values matter; a timing probe may leave it",
    ),
    _rule("0207", "tile {digit}[{lo}..{hi}) exceeds extent {n}", "tile/roll outside the digit", "EEE"),
    _rule(
        "0301",
        "DM use of slice {s} peaks at {bytes} B (> {limit} B usable) at {op}",
        "liveness-based peak per slice > usable DM",
        "EEE",
        "reduce per-slice buffers, lower the pipeline depth, or spread rows over more slices",
    ),
    _rule(
        "0302",
        "TRF use {bytes} B per {slice_or_lane} exceeds {limit} B",
        "> 65,536 B per slice or > 8,192 B per lane, each halved per buffer when the TRF is double-buffered",
        "EEE",
    ),
    _rule("0303", "VRF live set {bytes} B exceeds 8,192 B at {op}", "live VRF tensors of a slice at any pass", "EEE"),
    _rule("0310", "sequencer of {op} needs {n} loop entries after merging (max 8)", "stream loop nest too deep", "EEE"),
    _rule("0312", "fetch packet of {bytes} B is not contiguous or not a multiple of 8 B", "fetch packet rule", "EEE"),
    _rule("0320", "DMA packet {bytes} B exceeds 4,096 B", "explicit packet = too large", "EEE"),
    _rule("0321", "HBM<->DM transfer needs 8-byte aligned offsets and packets ({detail})", "alignment", "EEE"),
    _rule(
        "0322", "{n} packets of {op} end in partial 256-byte HBM units (read-modify-write)", "partial HBM writes", "-WW"
    ),
    _rule("0323", "engine list {list} is empty, repeats or leaves 0..{last}", "engines argument", "EEE"),
    _rule(
        "0324",
        "a DMA copies bytes: it cannot turn {src} into {dst}",
        "source and destination of a DMA of different dtypes",
        "EEE",
        "convert in a Tensor-Unit pass (a cast, widen, narrow or decode), then move the converted tensor",
    ),
    _rule(
        "0325",
        "a DMA moves data between HBM and DM: it cannot copy {src} to {dst}",
        "a DMA from HBM to HBM, or from or into a register file (TRF and VRF are loaded by Tensor-Unit passes)",
        "EEE",
        "stage the data in DM (HBM -> DM -> HBM); load a register file with a pass ending in `to_trf()` or `to_vrf()`",
    ),
    _rule("0401", "contraction uses {n} lanes (max 8)", "lanes", "EEE"),
    _rule("0402", "contraction stream packet is {bytes} B (max 64 B)", "outer packet size", "EEE"),
    _rule(
        "0403",
        "contraction does not accept a {s} stream with a {t} TRF operand",
        "allowed pairs: same-type bf16/i8/f8e4m3 (all); f8e4m3 x bf16 (0.6.0+); f4e2m1 x bf16 (0.7.0+)",
        "EEE",
    ),
    _rule(
        "0404",
        "{TRF or VRF} operand {x} does not hold digit {d} where the stream needs it",
        "TRF cluster/slice mapping incompatible with the stream's, or reduced digit absent; a VRF holding a tile's "
        "extent of a digit (`A % 8 = 4`) read by a stream over more of it",
        "EEE",
        "place the operand's digits where the stream has them and hold every value it reads, or stream only a tile "
        "of the operand's extent",
    ),
    _rule("0405", "{stage} is not available in the sub context", "contract/switch in sub", "EEE"),
    _rule(
        "0410",
        "committing a {src} stream into a {dst} tensor without a cast",
        "dtype mismatch at commit; 0.5.0 compiles and reinterprets bits",
        "WEE",
    ),
    _rule("0411", "vector engine needs f32/i32 input, stream is {dtype}", "missing widening before .vector", "EEE"),
    _rule(
        "0412",
        "vector chain has {n} operations (max 6)",
        "total ops of the (at most two) vector chains of a pass, one before and one after reduce_slices",
        "EEE",
    ),
    _rule("0413", "commit writes {bytes} valid bytes per flit; must be 8, 16, 24 or 32", "commit-adapter trim", "EEE"),
    _rule(
        "0420", "switch cannot move data between clusters ({digit} is a cluster digit)", "cross-cluster switch", "EEE"
    ),
    _rule(
        "0430", "reduce_slices group {g} must be the innermost live slice digits of {layout}", "reducer shape", "EEE"
    ),
    _rule(
        "0501",
        "'{name}' is used before it is defined",
        "def-use (of a name, or an `op(stash)` where no `stash()` saved a value since the pass's last reduction), or "
        "a layout that spreads itself or a type that names itself (a dependency cycle)",
        "EEE",
    ),
    _rule(
        "0502",
        "'{name}' is already bound, as {earlier}: Ferrite has no shadowing, so give the new binding another name",
        "a parameter, let, assignment or loop variable that reuses a name where it is visible (a parameter, an "
        "axis, layout, type or fn, a dtype or keyword, a let or loop variable in scope), a let that repeats "
        "another let of its kernel or fn, or an axis, layout, type, fn or kernel declared twice; sibling loops "
        "may reuse a loop variable",
        "EEE",
        "rename the new binding (`let out_d` rather than a second `out`); write into an existing tensor with "
        "`dma_into` or `commit_into` instead of rebinding it",
    ),
    _rule(
        "0520",
        "{pass} hits DM bank {b} {n} times in a row while {dma} may write cluster {c} (limit 63)",
        "bank-run rule: 0.5.0 faults at run time, 0.6.0 serialises (note), 0.7.0 rejects",
        "-NE",
    ),
    _rule(
        "0702",
        "'#[pipeline(depth = N)]' is deprecated in toolchain {version}; {replacement}",
        "deprecated buffering attribute",
        "--W",
    ),
    _rule(
        "0710",
        "{tensor} still carries digit {d} of reduced axis {axis}; reduce it before {use}",
        "partial tensor stored to HBM or combined with a tensor lacking that digit",
        "--E",
    ),
    _rule("0801", "output {param} is not fully written: {missing}", "static coverage of &mut outputs", "-WE"),
)

BY_NUMBER: dict[str, Rule] = {rule.number: rule for rule in RULES}


def lookup(code: str) -> Rule | None:
    """The rule for 'E0301', 'W0205', 'N0520' or '0301'."""
    digits = code[1:] if code[:1].upper() in ("E", "W", "N") else code
    return BY_NUMBER.get(digits)


def emit(number: str, version: str, message: str, span: object = None) -> list[Diagnostic]:
    """A diagnostic of rule `number` at the severity `version` gives it; none where it is unchecked."""
    code = BY_NUMBER[number].code(version)
    if code is None:
        return []
    return [Diagnostic(code=code, severity=SEVERITY_NAMES[code[0]], message=message, span=span)]  # type: ignore[arg-type]
