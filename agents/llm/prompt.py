"""The architect's and the refiner's prompt: the kernel as its pack states it, the knowledge the
graph holds under the version, BEST with its statistics, the recent failures. What changes least
comes first (the kernel and its programs, then the knowledge, then the failures and the numbers), so
that a server that caches prompt prefixes (llama.cpp, vLLM) reuses the most from call to call.

The knowledge comes in four kinds, each a section of the prompt: the checked language summary, the
rules in force, the measurements (with the measured bound they give), and the docs' claims as
checked. A run may withhold any of them (`LLMConfig.withhold`: the benchmark's ablation); a withheld
section says so. A prompt over its budget (`LLMConfig.prompt_tokens`, for a small model's context)
keeps the kernel, BEST and the failures whole and cuts the knowledge: each section gets an equal
share, a section under its share passes the rest on, and a cut section ends with how many lines it
left out."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from chiplore import queries as named_queries
from chiplore.agents.knowledge import Knowledge
from chiplore.agents.llm.config import KnowledgeKind, LLMConfig
from chiplore.agents.llm.kernel import best_stats, kernel_reference
from chiplore.agents.llm.language import language_summary, tokens
from chiplore.agents.proposers import KernelView
from chiplore.core.target import Target
from chiplore.kg.repo.designs import best_of, recent_failures, source_of
from chiplore.kg.repo.docs import claims_with_verdicts
from chiplore.kg.repo.measurements import measurements_under
from chiplore.kg.store import GraphStore

WITHHELD = "(withheld in this run)"
# The graph's labels that hold each kind: a tool that would read them is refused while it is withheld.
LABELS: dict[KnowledgeKind, tuple[str, ...]] = {
    "summary": ("LanguageEntry", "LanguageExample"),
    "rules": ("LegalityRule", "Diagnostic"),
    "measurements": ("Measurement", "HardwareParam"),
    "docs": ("Claim", "DocChunk", "DocPage", "Concept", "Check"),
}
SECTION: dict[str, KnowledgeKind] = {"summary": "summary", "rules": "rules", "measurements": "measurements",
                                     "claims": "docs"}  # fmt: skip
MORE = {
    "measurements": "named_query measurements-of has each",
    "rules": "named_query rules-in-force has them all",
    "claims": "search_docs finds the rest",
}


def template(name: str) -> str:
    return (resources.files("chiplore.agents.llm") / "prompts" / f"{name}.md").read_text()


def role_prompt(role: str, view: KernelView, store: GraphStore, target: Target, config: LLMConfig) -> str:
    """The role's prompt for the kernel of `view`. The bound is the measured one only: the kernel's
    true bound is hidden truth."""
    pack = target.pack()
    spec = view.spec
    withheld = set(config.withhold)
    best = best_of(store, view.kernel)
    best_source = source_of(store, best.id) if best is not None else ""
    bound = None if "measurements" in withheld else view.knowledge.measured_bound(spec.weight_bytes, pack.roof)
    render: dict[str, Callable[[int], str]] = {
        "measurements": lambda share: _measurements(store, view.knowledge, share),
        "rules": lambda share: _rules(view.knowledge, share),
        "claims": lambda share: _claims(store, view.version, share),
        "summary": lambda share: language_summary(store, view.version, _least(share, config.summary_tokens)),
    }
    render = {name: f for name, f in render.items() if SECTION[name] not in withheld}
    fields: dict[str, Any] = dict(
        kernel=view.kernel, description=spec.description, weight_bytes=spec.weight_bytes,
        bound=f"{bound:,.0f}" if bound else ("(withheld in this run)" if "measurements" in withheld
                                             else "(the roof is not measured yet)"),
        best_cycles=f"{best.measured_cycles:,.0f}" if best and best.measured_cycles else "(none yet)",
        version=view.version, failures=_failures(store, view.kernel), baseline=spec.baseline_source,
        best_source=best_source, lineage=_lineage(store, view.kernel), language=pack.language,
        reference=kernel_reference(spec), best_stats=best_stats(target, best_source, view.version),
        **{name: WITHHELD for name in SECTION if name not in render},
    )  # fmt: skip
    text = template(role)
    if not config.prompt_tokens:
        return text.format(**fields, **{name: f(0) for name, f in render.items()})
    fixed = tokens(text.format(**fields, **{name: "" for name in render}))
    return text.format(**fields, **fit(render, max(config.prompt_tokens - fixed, 0)))


def fit(render: dict[str, Callable[[int], str]], budget: int) -> dict[str, str]:
    """Each section within `budget` tokens in all: whole where they fit, else an equal share each,
    the smallest first, a section under its share passing the rest on."""
    whole = {name: f(0) for name, f in render.items()}
    if sum(tokens(text) for text in whole.values()) <= budget:
        return whole
    out: dict[str, str] = {}
    pending = sorted(whole, key=lambda name: tokens(whole[name]))
    left = budget
    while pending:
        name = pending.pop(0)
        share = max(left // (len(pending) + 1), 1)
        out[name] = whole[name] if tokens(whole[name]) <= share else render[name](share)
        left -= tokens(out[name])
    return out


def _least(share: int, cap: int) -> int:
    """The smaller of two token limits, where 0 is none."""
    return min(limit for limit in (share, cap) if limit) if share or cap else 0


def cut(lines: list[str], max_tokens: int, more: str, empty: str) -> str:
    """`lines` within `max_tokens` (0: all of them), the last line saying how many were left out."""
    text = "\n".join(lines)
    if not lines:
        return empty
    if not max_tokens or tokens(text) <= max_tokens:
        return text
    kept = list(lines)
    while kept:
        kept.pop()
        trailer = f"- ({len(lines) - len(kept)} more not shown, to keep within the prompt's share; {more})"
        if tokens("\n".join([*kept, trailer])) <= max_tokens:
            return "\n".join([*kept, trailer])
    return f"- ({len(lines)} not shown, to keep within the prompt's share; {more})"


def _measurements(store: GraphStore, knowledge: Knowledge, share: int = 0) -> str:
    rows = sorted(measurements_under(store, knowledge.version), key=lambda r: str(r["param"]))
    lines = [f"- {r['param']} = {r['value']:.4g} {r['unit']} [{r['ci_low']:.4g}, {r['ci_high']:.4g}] ({r['fact']})"
             for r in rows]  # fmt: skip
    stale = sorted(knowledge.stale)
    if stale:
        lines.insert(0, f"- not re-checked since the last upgrade (old values): {', '.join(stale)}")
    return cut(lines, share, MORE["measurements"], "(nothing measured yet)")


def _rules(knowledge: Knowledge, share: int = 0) -> str:
    lines = [f"- {rule.code} {rule.predicate.json_body()} ({rule.fact})" for rule in knowledge.rules]
    return cut(lines, share, MORE["rules"], "(none learnt)")


def _claims(store: GraphStore, version: str, share: int = 0, limit: int = 40) -> str:
    """The docs' checkable claims with the graph's verdict on each (a contradicted one is wrong)."""
    rows = claims_with_verdicts(store, version, limit)
    return cut([f"- [{r['verdict']}] {r['text']} ({r['f']})" for r in rows], share, MORE["claims"], "(no claims)")


def _lineage(store: GraphStore, kernel: str) -> str:
    rows = named_queries.run(store, "best-lineage", {"kernel": kernel})
    return " -> ".join(f"{row['change']} ({row['role']}, {row['policy']})" for row in rows) or "(no BEST yet)"


def _failures(store: GraphStore, kernel: str, limit: int = 6) -> str:
    rows = recent_failures(store, kernel, limit)
    return "\n".join(f"- {r['change']}: {r['reason']}" for r in rows) or "(none)"
