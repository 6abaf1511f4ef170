"""What the LLM roles' prompts say of the language and the kernel, for any target: the checked DSL
summary within its token share (the warnings always, meanings cut before entries, entries left out
named), a kernel as its pack states it (or, with no op graph, as its baseline), BEST's statistics,
and tools that name the target's own language. The toy chip (another language) shows none of it is
SimRNGD's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.llm.kernel import best_stats, kernel_reference, render_stats
from chiplore.agents.llm.language import render_summary, tokens
from chiplore.agents.llm.prompt import cut, fit, role_prompt
from chiplore.agents.llm.tools import graph_tools
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.simulator.target import SimRNGD
from tests.helpers import kernel_view
from tests.toy import ToyChip

VERSION = "0.6.0"


def row(name: str, verdict: str = "confirmed", availability: str = "available", instead: str = "", why: str = "",
        meaning: str = "") -> dict[str, Any]:  # fmt: skip
    """An entry as the dsl-summary query returns it (the fields the prompt reads)."""
    return {"construct": name, "kind": "stage", "syntax": f".{name}(D)", "verdict": verdict,
            "availability": availability, "instead": instead, "why": why, "meaning": meaning}  # fmt: skip


WARNINGS = [
    row("lut", "unverified", "unavailable", instead="use '.decode(D)'"),
    row("switch", "contradicted", why="E0420: switch cannot move data between clusters"),
    row("pipeline", availability="deprecated", instead="use 'buffers: N'"),
]
CONFIRMED = [row(f"stage{i:02d}", meaning=f"what stage {i} does, at some length " * 8) for i in range(40)]


def test_each_entry_carries_its_verdict_and_what_to_write_instead() -> None:
    text = render_summary([*CONFIRMED[:2], *WARNINGS], VERSION, 0)
    lines = text.splitlines()
    assert lines[:3] == [
        "- lut (stage) `.lut(D)` [UNAVAILABLE under 0.6.0; write instead: use '.decode(D)']",
        "- switch (stage) `.switch(D)` [CONTRADICTED: E0420: switch cannot move data between clusters]",
        "- pipeline (stage) `.pipeline(D)` [confirmed] [DEPRECATED; write instead: use 'buffers: N']",
    ]  # the warnings first
    assert lines[3].startswith("- stage00 (stage) `.stage00(D)` [confirmed] what stage 0 does")
    assert lines[3].endswith("…") and len(lines) == 5


def test_the_summary_keeps_within_its_share_cutting_meanings_then_entries() -> None:
    rows = [*CONFIRMED, *WARNINGS]
    whole = render_summary(rows, VERSION, 0)
    assert tokens(whole) > 2000
    lean = render_summary(rows, VERSION, 900)  # room for every line without meanings
    assert tokens(lean) <= 900 and "what stage" not in lean and all(f"- {r['construct']} (" in lean for r in rows)
    tight = render_summary(rows, VERSION, 300)
    assert tokens(tight) <= 300 and all(f"- {r['construct']} (" in tight for r in WARNINGS)
    shown = [r["construct"] for r in CONFIRMED if f"- {r['construct']} (" in tight]
    missing = [r["construct"] for r in CONFIRMED if r["construct"] not in shown]
    assert shown and missing and tight.splitlines()[-1].startswith("- (not shown")
    assert all(name in tight.splitlines()[-1] for name in missing)
    assert "named_query dsl-summary" in tight.splitlines()[-1]


def test_no_summary_in_the_graph_is_said_so() -> None:
    assert render_summary([], VERSION, 500) == (
        "(no checked summary of the language under 0.6.0 in the graph: `learn` builds it)"
    )


def test_a_kernel_is_shown_as_its_pack_states_it_and_never_with_its_true_bound() -> None:
    target = SimRNGD()
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    text = kernel_reference(spec)
    assert "- o_weight_scale: " in text and "Axes: " in text and "<= 0.05 + 0.01 |expected|" in text
    assert "- y = matvec(input=x, weight=o_weight, scale=o_weight_scale, scale_kind=row" in text
    assert "- store(input=r, to=residual)" in text
    assert "- matvec: y[n] = sum_k W[n, k] x[k]" in text and "- add: element-wise on two values" in text
    assert f"{spec.bound_cycles:,.0f}" not in text and f"{spec.bound_cycles:g}" not in text
    stats = render_stats(target.analyze(spec.baseline_source, VERSION))
    assert stats.startswith("Totals: dma.bytes ") and "\nPeaks: " in stats and "\nOps by kind: " in stats
    assert best_stats(target, "", VERSION) == "(no BEST yet)"
    broken = best_stats(target, spec.baseline_source.replace("kernel ", "kernal ", 1), VERSION)
    assert broken.startswith("(it does not compile under 0.6.0: E")


def test_another_chips_kernel_and_language_are_its_own(tmp_path: Any) -> None:
    chip = ToyChip()
    spec = chip.kernels()[0]
    text = kernel_reference(spec)
    assert spec.ops is None  # a kernel that is no pack: what it computes is its baseline's
    assert text.splitlines()[0] == "gemv: y = w @ x: a 256x256 f32 matrix times a vector"
    assert "- y: out y 256 (mut, f32, rows=256)" in text and text.endswith(
        "as the official baseline does (the kernel declares no op graph)."
    )
    assert render_stats(chip.analyze(spec.baseline_source, chip.default_toolchain())).startswith("Totals: ")
    with EmbeddedStore(tmp_path / "data") as store:
        tools = {t.name: t for t in graph_tools(store, chip, chip.default_toolchain(), spec.name)}
    assert tools["check"].description.startswith("Compile a Toyl program under toolchain ")


def _lines(name: str, n: int) -> Callable[[int], str]:
    """A section of `n` lines, cut to a share as the prompt's sections are."""
    return lambda share: cut([f"- {name} line {i} with a few more words" for i in range(n)], share, "ask", "(none)")


def test_a_prompt_over_its_budget_keeps_small_sections_whole_and_cuts_the_large() -> None:
    render = {"small": _lines("small", 2), "large": _lines("large", 200), "medium": _lines("medium", 30)}
    whole = fit(render, 100_000)
    assert whole == {name: f(0) for name, f in render.items()}
    fitted = fit(render, 600)
    assert fitted["small"] == render["small"](0)  # under its share: whole, and the rest passes on
    assert sum(tokens(text) for text in fitted.values()) <= 600
    assert fitted["large"].splitlines()[-1].startswith("- (") and "more not shown" in fitted["large"]
    assert tokens(fitted["large"]) > tokens(fitted["medium"]) or fitted["medium"] == render["medium"](0)


def test_a_withheld_kind_leaves_the_prompt_and_the_tools(tmp_path: Any) -> None:
    target = SimRNGD()
    with EmbeddedStore(tmp_path / "data") as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), VERSION)
        view = kernel_view(target, "sliding_attention_output", VERSION)
        config = LLMConfig(model="openai:m", base_url="http://127.0.0.1:9/v1", withhold=("rules", "docs"))
        prompt = role_prompt("architect", view, store, target, config)
        tools = {t.name: t for t in graph_tools(store, target, VERSION, view.kernel, withheld=config.withhold)}
        refused = str(tools["cypher"].invoke({"query": "MATCH (r:LegalityRule) RETURN r.code"}))
        named = str(tools["named_query"].invoke({"name": "rules-in-force", "params": {"toolchain": VERSION}}))
        allowed = str(tools["cypher"].invoke({"query": "MATCH (m:Measurement) RETURN count(m) AS n"}))
    assert "Rules in force (the compiler refuses what breaks them):\n(withheld in this run)" in prompt
    assert "as checked against the measurements and the compiler:\n(withheld in this run)" in prompt
    assert "(withheld in this run)" not in prompt.split("Rules in force")[0].split("What the docs claim")[0]
    assert "search_docs" not in tools
    assert refused == "refused: LegalityRule is withheld in this run"
    assert named.startswith("refused: rules-in-force reads LegalityRule")
    assert allowed.startswith("[")
