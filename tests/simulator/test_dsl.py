"""Ferrite parser and printer: round trips, canonical form, and E0101 for text that is not Ferrite."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from chiplore.simulator.bench import microbenchmarks
from chiplore.simulator.diagnostics import render
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.parser import (
    MAX_NESTING_DEPTH,
    MAX_SOURCE_BYTES,
    FerriteSyntaxError,
    _parse_reducing,
    _parse_tree,
    parse,
)
from chiplore.simulator.dsl.printer import print_program
from tests.simulator.programs import SHORT, all_programs, baseline_path, label, program_path
from tests.simulator.strategies import programs

SHIPPED = all_programs()
# Microbenchmark templates become programs once a sweep point fills in their `$VARIABLES`.
PROBES = [(f"{t.id}-{i}", t.instantiate(point, "0.6.0")) for t in microbenchmarks() for i, point in enumerate(t.points)]


def test_every_kernel_ships() -> None:
    for short in SHORT:
        assert {baseline_path(short), program_path(f"{short}_opt")} <= set(SHIPPED)


@pytest.mark.parametrize("text", [p.read_text() for p in SHIPPED] + [t for _, t in PROBES],
                         ids=[label(p) for p in SHIPPED] + [n for n, _ in PROBES])  # fmt: skip
def test_shipped_program_round_trips(text: str) -> None:
    program = parse(text)
    printed = print_program(program)
    assert parse(printed) == program
    assert print_program(parse(printed)) == printed, "printing is a fixed point"
    # every shipped program targets the harness default, except bug-zoo ones that need an older toolchain
    assert program.toolchain in ("0.5.0", "0.6.0") and len(program.kernels) == 1


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_generated_ir_round_trips(program: ir.Program) -> None:
    text = print_program(program)
    assert parse(text) == program
    assert print_program(parse(text)) == text


def test_spans_point_into_the_source() -> None:
    source = "axes! { H = 8 }\nkernel k(x: &hbm<bf16>[H]) {\n    let y = x.dma(engines = [0]);\n}\n"
    program = parse(source)
    let = program.kernels[0].body.stmts[0]
    assert isinstance(let, ir.Let)
    assert let.span is not None and (let.span.line, let.span.column) == (3, 5)
    assert isinstance(let.value, ir.Method) and let.value.args[0].name == "engines"


def test_precedence_survives_printing() -> None:
    program = parse("kernel k() { let a = (1 - (2 - 3)) * -(4 + 5) % 6; }")
    text = print_program(program)
    assert "1 - (2 - 3)" in text and "-(4 + 5)" in text
    assert parse(text) == program


@pytest.mark.parametrize(
    ("source", "position", "expected", "found"),
    [
        ("kernel k( {", "1:11", "')' or a name", "'{'"),
        ("axes! { H = }", "1:13", "'(' or an integer", "'}'"),
        ("kernel k() {\n    let x = 1\n}", "3:1", "';'", "'}'"),
        ("kernel k() { let x = $; }", "1:22", "'('", "'$'"),
        ("kernel k() {", "1:13", "'#[', '(', '-', 'for', 'let', '}'", "end of input"),
        ("kernel k() {\n", "2:1", "'#['", "end of input"),
    ],
)
def test_syntax_errors_say_where_what_was_expected_and_what_was_found(
    source: str, position: str, expected: str, found: str
) -> None:
    with pytest.raises(FerriteSyntaxError) as caught:
        parse(source)
    diagnostic = caught.value.diagnostic
    assert diagnostic.code == "E0101" and diagnostic.severity == "error"
    assert diagnostic.message.startswith(f"syntax error at {position}: expected {expected}")
    assert diagnostic.message.endswith(f"found {found}")


def test_rendered_diagnostic_has_a_caret_under_the_span() -> None:
    source = "kernel k() {\n    let x = 1 +;\n}\n"
    with pytest.raises(FerriteSyntaxError) as caught:
        parse(source)
    rendered = render(caught.value.diagnostic, source, "bad.fe").splitlines()
    assert rendered[0].startswith("error[E0101]: syntax error at 2:16")
    assert rendered[1] == "  --> bad.fe:2:16"
    assert rendered[3] == "2 |     let x = 1 +;"
    assert rendered[4] == "  |                " + "^"


def test_oversized_input_is_refused_before_parsing() -> None:
    source = "// " + "x" * MAX_SOURCE_BYTES
    with pytest.raises(FerriteSyntaxError, match="at most 10,485,760 bytes"):
        parse(source)


def _read(reader: object, text: str) -> tuple[str, object]:
    try:
        return "ir", reader(text).model_dump()  # type: ignore[operator]
    except FerriteSyntaxError as error:
        return "refused", error.diagnostic.model_dump()


def _broken(text: str) -> list[str]:
    return [text[: len(text) // 2], text.replace(";", "", 1), text.replace("(", "((", 3),
            text.replace("= 8", "= 99999999999999999999999", 1), text.replace("let", "let let", 1)]  # fmt: skip


@pytest.mark.parametrize("text", [p.read_text() for p in SHIPPED[::3]] + [t for _, t in PROBES[::5]],
                         ids=[label(p) for p in SHIPPED[::3]] + [n for n, _ in PROBES[::5]])  # fmt: skip
def test_the_reducing_reader_builds_what_the_reference_reader_builds(text: str) -> None:
    """`parse` builds the IR while Lark reduces and leaves every text it cannot take (a limit, a syntax
    error, a refusal of the IR builder) to the reference reader: both give the same IR, spans included,
    or the same diagnostic."""
    assert _read(parse, text) == _read(_parse_tree, text)
    assert _parse_reducing(text).model_dump() == _parse_tree(text).model_dump()
    for broken in _broken(text):
        assert _read(parse, broken) == _read(_parse_tree, broken)


def test_the_reducing_reader_refuses_nothing_itself() -> None:
    """Past the nesting limit it stops and the reference reader gives E0105 where it always has."""
    deep = "kernel k() { let a = " + "-" * (MAX_NESTING_DEPTH + 5) + "1; }"
    with pytest.raises(Exception) as raised:
        _parse_reducing(deep)
    assert not isinstance(raised.value, FerriteSyntaxError)
    assert _read(parse, deep) == _read(_parse_tree, deep)
    assert _read(parse, deep)[0] == "refused"
