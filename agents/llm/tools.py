"""The tools an LLM role may call: read the graph (read-only Cypher, the named queries, the docs),
ask the compiler and the host executor, and see BEST. Every answer is text the model can act on; a
refused query, a failed query or a store that stopped answering comes back as a message, never as an
exception (a run does not end because the model wrote a bad query). The model's Cypher goes through
GraphStore.read_untrusted: checked by the backend's planner, read-only, with a timeout and caps.

Knowledge a run withholds (the benchmark's ablation) stays out of the tools too: the docs search is
gone without the docs, and a query (Cypher or named) that names a label of a withheld kind is
refused with a message. (A query that reaches such nodes without naming their label still reads
them: the ablation withholds what the prompt and the tools offer, not the graph.)"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from typing import Any

from langchain_core.tools import BaseTool, tool

from chiplore import queries as named_queries
from chiplore.agents.llm.config import KnowledgeKind
from chiplore.agents.llm.prompt import LABELS
from chiplore.core.errors import ChiploreError, WriteRefused
from chiplore.core.target import Target
from chiplore.kg.guard import QueryRefused, UntrustedLimits
from chiplore.kg.repo.designs import best_of, source_of
from chiplore.kg.repo.docs import search_chunks
from chiplore.kg.store import GraphStore

ROW_CAP = 50
QUERY_TIMEOUT_S = 10.0
DOC_HITS = 8
# What one model-written query may return: the rows the model sees, and bytes enough for them.
MODEL_LIMITS = UntrustedLimits(max_rows=ROW_CAP, max_bytes=64_000, timeout_s=QUERY_TIMEOUT_S)


def _rows(rows: list[dict[str, Any]]) -> str:
    shown = rows[:ROW_CAP]
    text = json.dumps(shown, default=str)
    return text + (
        f"\n({len(rows) - ROW_CAP} more rows not shown: add LIMIT or aggregate)" if len(rows) > ROW_CAP else ""
    )


def withheld_label(text: str, withheld: Collection[KnowledgeKind]) -> str:
    """The first label of a withheld kind that a query names ("" when none)."""
    for kind in withheld:
        for label in LABELS[kind]:
            if re.search(rf":\s*`?{label}\b", text):
                return label
    return ""


def graph_tools(store: GraphStore, target: Target, version: str, kernel: str,
                on_refusal: Callable[[str], None] = lambda what: None,
                withheld: Collection[KnowledgeKind] = ()) -> list[BaseTool]:  # fmt: skip
    """The tools; `on_refusal` hears of every write the model attempted (the policy records it);
    `withheld`: the kinds of knowledge this run leaves out. The tools' descriptions name the language
    as the target's pack does."""
    language = target.pack().language

    @tool
    def cypher(query: str) -> str:
        """Run a read-only Cypher query on chiplore's knowledge graph (Measurement, LegalityRule, Claim,
        DocChunk, DesignNode, KernelVersion, DeviceRun, Comparison ...). At most 50 rows come back."""
        label = withheld_label(query, withheld)
        if label:
            return f"refused: {label} is withheld in this run"
        try:
            result = store.read_untrusted(query, limits=MODEL_LIMITS)
        except WriteRefused:
            on_refusal(f"cypher refused a write: {query}")
            return "refused: this tool is read-only; the graph is written by the loop, not by you. Read, then answer."
        except QueryRefused as error:
            on_refusal(f"cypher refused: {error}: {query}")
            return f"refused: {error}"
        except ChiploreError as error:
            return f"query failed: {error}"
        text = json.dumps(result.rows, default=str)
        return text + (f"\n({result.cut_reason})" if result.truncated else "")

    @tool
    def named_query(name: str, params: dict[str, str] | None = None) -> str:
        """Run one of chiplore's named queries (e.g. rules-in-force with toolchain, measurements-of with
        param, best-lineage with kernel, contradicted-claims, dsl-summary with toolchain and construct: a
        construct's checked entry with its shortest compiled example); an unknown name lists the known ones."""
        known = named_queries.load_all()
        if name not in known:
            return f"unknown query {name!r}; known: {', '.join(sorted(known))}"
        label = withheld_label(known[name].text, withheld)
        if label:
            return f"refused: {name} reads {label}, which is withheld in this run"
        try:
            return _rows(named_queries.run(store, name, params or {}))
        except ChiploreError as error:
            return f"query failed: {error}"

    @tool
    def search_docs(words: str) -> str:
        """Search the vendor docs of this toolchain version for paragraphs that contain every word."""
        terms = [w.lower() for w in words.split() if w.strip()]
        if not terms:
            return "give one or more words"
        try:
            rows = search_chunks(store, version, terms, DOC_HITS)
        except ChiploreError as error:
            return f"search failed: {error}"
        return _rows(rows) if rows else "no paragraph contains all of those words"

    @tool
    def check(source: str) -> str:
        """Compile a program under this toolchain version: its coded diagnostics (free)."""
        result = target.check(source, version)
        if not result.diagnostics:
            return "compiles cleanly"
        return "\n".join(f"{d.severity}[{d.code}]: {d.message}" for d in result.diagnostics)

    check.description = f"Compile a {language} program under toolchain {version}: its coded diagnostics (free)."

    @tool
    def host_test(source: str) -> str:
        """Run a program on the host with the smoke fixtures (free, slow): does it compute the right thing?"""
        result = target.host_test(source, kernel, version)
        if not result.compiled:
            return "does not compile:\n" + "\n".join(f"[{d.code}] {d.message}" for d in result.diagnostics)
        if result.correctness is None:
            return f"not executed: {result.message}"
        return ("correct: " if result.correctness.passed else "incorrect: ") + result.correctness.message

    @tool
    def best_design() -> str:
        """The kernel's current BEST: its source, its measured cycles, and the change that made it."""
        try:
            best = best_of(store, kernel)
            if best is None:
                return "no BEST yet"
            return json.dumps({"design": best.id, "cycles": best.measured_cycles, "change": best.change,
                               "source": source_of(store, best.id)})  # fmt: skip
        except ChiploreError as error:
            return f"failed: {error}"

    tools = [cypher, named_query, search_docs, check, host_test, best_design]
    return [t for t in tools if not (t is search_docs and "docs" in withheld)]
