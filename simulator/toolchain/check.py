"""check(source, version): parse and apply the legality rules, returning coded diagnostics.

Checking never raises on any input: text that is not Ferrite yields E0101, text past the reader's
limits E0105, a program too large to compile E0104, and an internal failure one E0100 "internal
compiler error" diagnostic, a bug that the fuzz, differential and hostile-program tests hold to zero.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict

from chiplore.core.target import CheckResult
from chiplore.simulator._truth import ChipShape, chip_key, chip_shape
from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import CACHED_SOURCE_BYTES, FerriteSyntaxError, parse
from chiplore.simulator.toolchain.bindings import check_bindings
from chiplore.simulator.toolchain.budget import source_over_budget, steps_over_budget
from chiplore.simulator.toolchain.capacity import check_capacity
from chiplore.simulator.toolchain.coverage import check_reads_written
from chiplore.simulator.toolchain.env import Env, axis_system
from chiplore.simulator.toolchain.harness import check_harness_signature
from chiplore.simulator.toolchain.items import check_declaration_cycles, check_hbm_sizes, check_kernel_items
from chiplore.simulator.toolchain.lower import lower_semantics
from chiplore.simulator.toolchain.lowered_rules import check_lowered
from chiplore.simulator.toolchain.mappings import (
    check_atom_cuts,
    check_dma_coverage,
    check_dma_types,
    check_fetch_digits,
    check_reducer_groups,
    check_trf_operands,
    check_type_digits,
    check_vrf_operands,
)
from chiplore.simulator.toolchain.names import check_names
from chiplore.simulator.toolchain.placement import LoweringError
from chiplore.simulator.toolchain.rules import emit
from chiplore.simulator.toolchain.statics import (
    check_def_use,
    check_digit_operands,
    check_dma_arguments,
    check_mapping_sizes,
    check_outputs_written,
    check_pads,
    check_tile_extents,
)
from chiplore.simulator.toolchain.streams import check_streams
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION, SPECS, spec
from chiplore.simulator.toolchain.vocabulary import check_vocabulary

log = logging.getLogger(__name__)

# Rule numbers this checker implements: every rule of docs/simrngd.md §5.3 (E0100 is not a rule).
RULES_CHECKED = (
    "0101", "0102", "0103", "0104", "0105", "0106", "0107", "0110", "0120", "0201", "0204", "0205", "0206", "0207",
    "0301", "0302", "0303", "0310", "0312", "0320", "0321", "0322", "0323", "0324", "0325", "0401", "0402", "0403",
    "0404", "0405", "0410", "0411", "0412", "0413", "0420", "0430", "0501", "0502", "0520", "0702", "0710", "0801",
)  # fmt: skip


def check(source: str, version: str | None = None) -> CheckResult:
    """Check Ferrite source under `version` (else its `#![toolchain]` header, else the default)."""
    if version is not None:
        spec(version)  # an unknown explicit version is the caller's error
    if len(source) <= CACHED_SOURCE_BYTES:
        return _check_cached(source, version, checked_chip())
    return _check_guarded(source, version)


class VerdictCache:
    """Verdicts by (source digest, version, chip). Checking is pure and a verdict small and frozen: a
    job resubmitted, estimated or executed is checked once per chip (compile-time limits such as
    usable DM come from its truth), and a learn, which checks about 500 probe programs, costs a
    third as much the second time in one process. Keyed by digest, so that thousands of verdicts
    do not keep thousands of sources alive."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._verdicts: OrderedDict[tuple[str, str | None, str | None], CheckResult] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, source: str, version: str | None, chip: str | None) -> CheckResult:
        key = (hashlib.sha256(source.encode()).hexdigest(), version, chip)
        with self._lock:
            if key in self._verdicts:
                self._verdicts.move_to_end(key)
                return self._verdicts[key]
        verdict = _check_guarded(source, version)
        with self._lock:
            self._verdicts[key] = verdict
            if len(self._verdicts) > self.size:
                self._verdicts.popitem(last=False)
        return verdict

    def cache_clear(self) -> None:
        with self._lock:
            self._verdicts.clear()


def checked_chip() -> str | None:
    """Which chip programs are checked against (its truth file; None: the default): verdicts are per chip."""
    return chip_key()


def documented_shape() -> bool:
    """Whether the chip this compiler checks against has the shape its first chip's docs describe (2
    clusters of 256 slices, ...). A program written for that shape is refused on another for its sizes
    (E0201 positions, E0323 engines, E03xx capacities), not for what it computes."""
    return chip_shape() == ChipShape()


_check_cached = VerdictCache(4096)


def _check_guarded(source: str, version: str | None) -> CheckResult:
    try:
        return _check(source, version)
    except Exception as error:  # a compiler must answer with diagnostics, never with a crash
        # One line, whatever the input: the traceback is for a maintainer who turns on debug logging.
        log.debug("internal compiler error", exc_info=True)
        reason = (str(error).splitlines() or [""])[0][:200]
        return CheckResult(
            version=version or DEFAULT_VERSION,
            diagnostics=(
                Diagnostic(
                    code="E0100",
                    severity="error",
                    message=f"internal compiler error; the program could not be checked ({type(error).__name__}: "
                    f"{reason})",
                ),
            ),
        )


def _check(source: str, version: str | None) -> CheckResult:
    over = source_over_budget(source, version or DEFAULT_VERSION)
    if over:
        return CheckResult(rules_checked=RULES_CHECKED, version=version or DEFAULT_VERSION, diagnostics=tuple(over))
    try:
        program = parse(source)
    except FerriteSyntaxError as error:
        return CheckResult(
            rules_checked=RULES_CHECKED, version=version or DEFAULT_VERSION, diagnostics=(error.diagnostic,)
        )
    diagnostics: list[Diagnostic] = []
    chosen = version or program.toolchain or DEFAULT_VERSION
    if chosen not in SPECS:
        header = next((a for a in program.inner_attrs if a.name == "toolchain"), None)
        diagnostics.append(
            Diagnostic(
                code="E0103",
                severity="error",
                message=f"'toolchain = \"{chosen}\"' is not available in this ferc; choose one of {', '.join(SPECS)}",
                span=header.span if header else None,
            )
        )
        chosen = DEFAULT_VERSION
    over = steps_over_budget(program, chosen)
    if over:  # nothing else is checked: the rules would unroll what the budget refuses
        return CheckResult(rules_checked=RULES_CHECKED, version=chosen, diagnostics=tuple(diagnostics + over))
    diagnostics += check_names(program)
    diagnostics += check_bindings(program, chosen)
    env = Env.of_program(program)
    diagnostics += check_kernel_items(program, env, chosen)
    diagnostics += check_hbm_sizes(program, env, chosen)
    diagnostics += check_declaration_cycles(program, chosen)
    diagnostics += check_harness_signature(program)
    diagnostics += check_vocabulary(program, spec(chosen))
    diagnostics += _check_bodies(program, chosen)
    if not any(d.is_error for d in diagnostics):
        diagnostics += _check_lowered(source, chosen)
    return CheckResult(
        rules_checked=RULES_CHECKED, version=chosen, diagnostics=tuple(sorted(diagnostics, key=_position))
    )


def _check_bodies(program: ir.Program, version: str) -> list[Diagnostic]:
    env = Env.of_program(program)
    diagnostics: list[Diagnostic] = []
    for item in program.items:
        if isinstance(item, ir.FnDecl | ir.KernelDecl):
            inner = env.for_body(item.params, item.body)
            diagnostics += check_mapping_sizes(item, inner, version)
            diagnostics += check_digit_operands(item, version)
            diagnostics += check_pads(item, inner, version)
            diagnostics += check_dma_arguments(item, version)
            diagnostics += check_streams(item.body, inner, version)
            diagnostics += check_def_use(item.params, item.body, version)
            diagnostics += check_type_digits(item, inner, version)
            diagnostics += check_atom_cuts(item, inner, version)
            diagnostics += check_fetch_digits(item.body, inner, version)
            diagnostics += check_dma_coverage(item.body, inner, version)
            diagnostics += check_dma_types(item.body, inner, version)
            diagnostics += check_trf_operands(item.body, inner, version)
            diagnostics += check_vrf_operands(item.body, inner, version)
            diagnostics += check_reducer_groups(item.body, inner, version)
            diagnostics += check_capacity(item.body, inner, version)
            diagnostics += check_tile_extents(item.body, env.axes, version)
            if isinstance(item, ir.KernelDecl):
                diagnostics += check_outputs_written(item.params, item.body, version)
        elif isinstance(item, ir.LayoutDecl | ir.TypeDecl):
            diagnostics += check_mapping_sizes(item, env, version)
            diagnostics += check_digit_operands(item, version)
            diagnostics += check_pads(item, env, version)
            diagnostics += check_type_digits(item, env, version)
            diagnostics += check_atom_cuts(item, env, version)
    return diagnostics


def _check_lowered(source: str, version: str) -> list[Diagnostic]:
    try:
        lowered, trace = lower_semantics(source, version)
    except LoweringError as error:
        # What the IR rules let through but cannot be placed is still a compile error, not a crash: the
        # rule it breaks where the lowerer knows one, else E0100.
        if error.rule is not None:
            return emit(error.rule, version, str(error))
        return [Diagnostic(code="E0100", severity="error", message=f"cannot lower the kernel: {error}")]
    return check_lowered(lowered) + check_reads_written(lowered, trace, axis_system(parse(source)))


def _position(diagnostic: Diagnostic) -> tuple[int, int, str]:
    span = diagnostic.span or ir.Span(line=0, column=0, end_line=0, end_column=0)
    return span.line, span.column, diagnostic.code
