"""The vendor docs (docs/simrngd.md §2.6): each version's pages state, misstate, blur or omit each hidden
parameter exactly as the fact table says; no page, changelog or diagnostic leaks a true value the
table marks wrong or omitted; every code example compiles (or fails with the code it shows); the
shipped pages are the rendered ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chiplore.simulator._truth import ChipTruth, load_truth
from chiplore.simulator.docs.facts import FACTS, VERSIONS
from chiplore.simulator.target import SimRNGD
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.docs import PAGES, chip_values, render_docs
from chiplore.simulator.toolchain.rule_examples import example
from chiplore.simulator.toolchain.rules import RULES
from tests.simulator.programs import all_programs

SHIPPED = Path(__file__).resolve().parents[2] / "simulator" / "docs"
CODE = re.compile(r"```rust([^\n]*)\n(.*?)```", re.S)


def default_chip(version: str) -> ChipTruth:
    return load_truth(version, path="")


def corpus(version: str) -> str:
    return "\n".join(render_docs(version, default_chip(version)).values())


def diagnostics(version: str) -> str:
    """Every message the compiler prints for the docs' rule examples and the shipped kernels."""
    sources = [s for rule in RULES if rule.code(version) for s in example(rule.number, version)]
    sources += [path.read_text() for path in all_programs()]
    return "\n".join(d.message + " " + " ".join(d.notes) for s in sources for d in check(s, version).diagnostics)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("fact_id", sorted(FACTS))
def test_each_fact_reads_as_the_table_says(fact_id: str, version: str) -> None:
    fact, text = FACTS[fact_id], corpus(version)
    true = fact.true.format(**chip_values(default_chip(version)))
    state = fact.state(version)
    if state == "S":
        assert true in text
    elif state == "O":
        assert true not in text
    else:  # W or ~: the version's own words, and never the true statement
        assert state.split(":", 1)[1] in text
        assert true not in text


@pytest.mark.parametrize("version", VERSIONS)
def test_no_page_changelog_or_diagnostic_leaks_a_value_the_docs_get_wrong_or_omit(version: str) -> None:
    values = chip_values(default_chip(version))
    pages, messages = corpus(version), diagnostics(version)
    for fact in FACTS.values():
        if fact.state(version)[0] not in "WO":
            continue
        for leak in fact.leaks:
            pattern = re.compile(leak.format(**values))
            assert not pattern.search(pages), (fact.id, pattern.pattern)
            if not fact.compiler_states:  # capacity limits are the compiler's to quote
                assert not pattern.search(messages), (fact.id, pattern.pattern)


def test_the_wrong_facts_are_wrong_for_the_default_chip() -> None:
    """A W text must not happen to be true: each names a number the chip does not have."""
    for fact in FACTS.values():
        for version in VERSIONS:
            state = fact.state(version)
            if state.startswith("W:") and fact.leaks:
                values = chip_values(default_chip(version))
                assert not any(re.search(leak.format(**values), state) for leak in fact.leaks), fact.id


@pytest.mark.parametrize("version", VERSIONS)
def test_every_code_example_compiles_or_fails_as_shown(version: str) -> None:
    examples = [(name, m.group(1), m.group(2)) for name, text in render_docs(version).items()
                for m in CODE.finditer(text)]  # fmt: skip
    assert len(examples) >= 10
    for name, info, code in examples:
        assert f'#![toolchain = "{version}"]' in code, name
        found = check(code, version)
        expected = re.search(r"diagnostic\((\w+)\)", info)
        if expected:
            assert expected.group(1) in [d.code for d in found.diagnostics], (name, expected.group(1))
        else:
            assert found.ok, (name, [(d.code, d.message) for d in found.diagnostics])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_diagnostics_page_covers_every_code_of_its_version(version: str) -> None:
    page = render_docs(version)["diagnostics.md"]
    for rule in RULES:
        code = rule.code(version)
        if code is not None:
            assert f"## {code} " in page, code
        else:
            assert not re.search(rf"## \w{rule.number} ", page), rule.number


@pytest.mark.parametrize("version", VERSIONS)
def test_the_shipped_pages_are_the_rendered_ones(version: str) -> None:
    """`python -m chiplore.simulator.toolchain.docs` refreshes simulator/docs/<version>/ after a template change."""
    rendered = render_docs(version, default_chip(version))
    assert set(rendered) == {*PAGES, "CHANGES.md"}
    for name, text in rendered.items():
        assert (SHIPPED / version / name).read_text() == text, name


def test_another_chip_gets_docs_with_its_own_values() -> None:
    other = default_chip("0.6.0").model_copy(update={"bank_run_limit": 32, "hbm_unit": 128})
    text = "\n".join(render_docs("0.6.0", other).values())
    assert "one DM bank 32 times in a row" in text and "128-byte transaction units" in text


def test_the_target_serves_every_page_and_the_changelog() -> None:
    pages = SimRNGD().docs("0.7.0")
    assert {p.path for p in pages} == {*PAGES, "CHANGES.md"}
    changes = next(p for p in pages if p.path == "CHANGES.md")
    assert "widen" in changes.text and changes.title == "Changes in 0.7.0"
    with pytest.raises(ValueError, match="unknown toolchain"):
        SimRNGD().docs("9.9.9")
