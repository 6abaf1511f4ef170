"""The LLM policy of the architect and the refiner: a LangChain agent (create_agent) on any
OpenAI-compatible chat model, with the graph tools, answering with a pydantic Proposal.

A malformed answer (no Proposal, or one that does not validate) and an illegal program (the
compiler's errors) go back to the model with the diagnostic, up to `attempts` times; then the
proposal is returned with its error and the loop records a failed design with the reason. A timed
out or failing endpoint is retried with backoff; one that never answers raises LLMUnavailable, a
one-line error. Every model call is an Activity with its tokens, latency and cost estimate.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from importlib import resources
from typing import Any
from uuid import UUID

import openai
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain.chat_models import init_chat_model
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, Field
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from chiplore import queries as named_queries
from chiplore.agents.knowledge import Knowledge
from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.llm.kernel import best_stats, kernel_reference
from chiplore.agents.llm.language import language_summary
from chiplore.agents.llm.tools import graph_tools
from chiplore.agents.proposers import DesignProposal, KernelView, Role
from chiplore.core.clock import utc_now
from chiplore.core.errors import ChiploreError
from chiplore.core.target import Target
from chiplore.kg.models import Activity
from chiplore.kg.repo.designs import best_of, recent_failures, source_of
from chiplore.kg.repo.docs import claims_with_verdicts
from chiplore.kg.repo.knowledge import existing_fact_ids, record_activity
from chiplore.kg.repo.measurements import measurements_under
from chiplore.kg.store import GraphStore


class LLMUnavailable(ChiploreError):
    """The model endpoint did not answer (closed port, dead server, timeouts past the retries)."""


class Proposal(BaseModel):
    """A design: one whole program for the kernel, in the target's language, and why. (The class name
    is the name of the tool the model answers with.)"""

    source: str = Field(description="the whole program, from its first line to its last, as the compiler takes it")
    rationale: str = Field(description="which measurements and rules decided it, with their values")
    change: str = Field(description="what it changes against the best design, in a few words")
    consulted: list[str] = Field(default_factory=list, description="fact ids relied on, e.g. Measurement:<id>")


class TokenBudget:
    """Prompt and completion tokens of the whole run, shared by the roles."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    @property
    def spent(self) -> bool:
        return self.limit > 0 and self.used >= self.limit


class Calls(BaseCallbackHandler):
    """Each model call becomes an Activity (model, tokens, latency, cost, outcome)."""

    def __init__(self, store: GraphStore, role: str, config: LLMConfig, budget: TokenBudget) -> None:
        self.store, self.role, self.config, self.budget = store, role, config, budget
        self.started: dict[UUID, tuple[float, str]] = {}
        self.ids: list[str] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
                            **kwargs: Any) -> None:  # fmt: skip
        self.started[run_id] = (time.perf_counter(), utc_now())

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        usage: dict[str, int] = {}
        for generation in (g for gens in response.generations for g in gens):
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or usage
        prompt, completion = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        self.budget.used += prompt + completion
        self._record(run_id, "ok", prompt, completion)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._record(run_id, self.config.redact(f"error: {type(error).__name__}: {error}")[:300], 0, 0)

    def _record(self, run_id: UUID, outcome: str, prompt: int, completion: int) -> None:
        began, at = self.started.pop(run_id, (time.perf_counter(), utc_now()))
        activity = Activity(
            id=f"llm-{uuid.uuid4().hex[:16]}", role=self.role, policy="llm", model=self.config.model,
            prompt_tokens=prompt, completion_tokens=completion, latency_s=round(time.perf_counter() - began, 3),
            cost_usd=self.config.cost(prompt, completion), started_at=at, ended_at=utc_now(), outcome=outcome,
        )  # fmt: skip
        record_activity(self.store, activity)
        self.ids.append(activity.id)


def chat_model(config: LLMConfig) -> BaseChatModel:
    """The configured model through LangChain (retries are ours, so each failed call is recorded)."""
    kwargs: dict[str, Any] = {"temperature": config.temperature, "timeout": config.timeout_s, "max_retries": 0,
                              "api_key": config.api_key()}  # fmt: skip
    if config.base_url:
        kwargs["base_url"] = config.base_url
    return init_chat_model(config.model, **kwargs)


def run_agent(agent: Any, messages: Sequence[Any], calls: Calls, config: LLMConfig) -> dict[str, Any]:
    """One agent run, retried with backoff while the endpoint times out or fails; LLMUnavailable after."""
    retrying = Retrying(retry=retry_if_exception(_transient), stop=stop_after_attempt(config.retries + 1),
                        wait=wait_exponential(multiplier=0.2, max=5.0), reraise=True)  # fmt: skip
    try:
        for attempt in retrying:
            with attempt:
                run_config = {"callbacks": [calls], "recursion_limit": 2 * config.max_steps}
                return agent.invoke({"messages": list(messages)}, config=run_config)
    except (openai.APIConnectionError, openai.APIStatusError) as error:
        where = config.base_url or config.model
        raise LLMUnavailable(
            config.redact(f"the model at {where} did not answer: {type(error).__name__}: {error}")
        ) from None
    raise AssertionError("unreachable")


def _transient(error: BaseException) -> bool:
    if isinstance(error, openai.APIConnectionError):  # refused, reset, timed out
        return True
    return isinstance(error, openai.APIStatusError) and (error.status_code >= 500 or error.status_code == 429)


class LLMPolicy:
    """An architect or refiner whose proposals a chat model writes (a `Proposer`)."""

    name = "llm"

    def __init__(self, role: Role, config: LLMConfig, store: GraphStore, target: Target,
                 budget: TokenBudget | None = None, model: BaseChatModel | None = None) -> None:  # fmt: skip
        self.role: Role = role
        self.config, self.store, self.target = config, store, target
        self.pack = target.pack()
        self.budget = budget or TokenBudget(config.token_budget)
        self.model = model or chat_model(config)

    def why_empty(self, view: KernelView) -> str:
        """Why `propose` returned nothing (the loop's stop reason)."""
        return f"the token budget of {self.budget.limit:,} is spent" if self.budget.spent else ""

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        out = []
        for _ in range(count):
            if self.budget.spent:
                break
            out.append(self._one(view))
        return out

    def _one(self, view: KernelView) -> DesignProposal:
        calls = Calls(self.store, self.role, self.config, self.budget)
        tools = graph_tools(self.store, self.target, view.version, view.kernel, on_refusal=self._refused,
                            language=self.pack.language)  # fmt: skip
        system = template("system").format(role=self.role, target=self.target.name, language=self.pack.language,
                                           version=view.version)  # fmt: skip
        agent = create_agent(self.model, tools=tools, system_prompt=system, response_format=ToolStrategy(Proposal))
        messages: list[Any] = [HumanMessage(self._prompt(view))]
        answer: Proposal | None = None
        problem = ""
        for _ in range(self.config.attempts):
            try:
                state = self._invoke(agent, messages, calls)
            except GraphRecursionError:
                problem = f"no answer within {self.config.max_steps} steps"
                messages.append(HumanMessage(f"{problem}: answer now with the Proposal tool."))
                continue
            messages = list(state["messages"])
            answer = state.get("structured_response")
            if answer is None:
                problem = "malformed answer: no Proposal"
                messages.append(HumanMessage("Answer by calling the Proposal tool with the whole program."))
                continue
            errors = [d for d in self.target.check(answer.source, view.version).diagnostics if d.is_error]
            if not errors:
                return self._proposal(answer, calls.ids)
            problem = "illegal program: " + "; ".join(f"{d.code}: {d.message}" for d in errors[:3])
            messages.append(HumanMessage(f"The compiler refuses it:\n{problem}\nFix the program and answer again."))
        # the record keeps what the model last said: its program, or its prose when it wrote none
        said = answer.source if answer else _last_words(messages)
        return DesignProposal(role=self.role, policy=self.name, source=said,
                              rationale=answer.rationale if answer else "", change=answer.change if answer else "",
                              error=f"{problem} (after {self.config.attempts} attempts)",
                              activities=tuple(calls.ids))  # fmt: skip

    def _refused(self, what: str) -> None:
        """A write the model tried through a tool: recorded, as the loop records every failure."""
        record_activity(self.store, Activity(id=f"tool-{uuid.uuid4().hex[:16]}", role=self.role, policy="llm-tool",
                                             ended_at=utc_now(), outcome=what[:300]))  # fmt: skip

    def _invoke(self, agent: Any, messages: Sequence[Any], calls: Calls) -> dict[str, Any]:
        return run_agent(agent, messages, calls, self.config)

    def _proposal(self, answer: Proposal, activities: list[str]) -> DesignProposal:
        known = existing_fact_ids(self.store, list(answer.consulted))  # ids the model made up are dropped
        return DesignProposal(role=self.role, policy=self.name, source=answer.source, rationale=answer.rationale,
                              change=answer.change, consulted=tuple(known), activities=tuple(activities))  # fmt: skip

    def _prompt(self, view: KernelView) -> str:
        """The role's prompt: the kernel as its pack states it, what the graph holds under the version
        (measurements, checked claims, rules, the checked language summary), BEST with its statistics.
        The bound is the measured one only: the kernel's true bound is hidden truth."""
        spec = view.spec
        best = best_of(self.store, view.kernel)
        best_source = source_of(self.store, best.id) if best is not None else ""
        bound = view.knowledge.measured_bound(spec.weight_bytes, self.pack.roof)
        return template(self.role).format(
            kernel=view.kernel, description=spec.description, weight_bytes=spec.weight_bytes,
            bound=f"{bound:,.0f}" if bound else "(the roof is not measured yet)",
            best_cycles=f"{best.measured_cycles:,.0f}" if best and best.measured_cycles else "(none yet)",
            version=view.version, measurements=_measurements(self.store, view.knowledge),
            rules=_rules(view.knowledge), failures=_failures(self.store, view.kernel), baseline=spec.baseline_source,
            best_source=best_source, lineage=_lineage(self.store, view.kernel),
            claims=_claims(self.store, view.version), language=self.pack.language,
            summary=language_summary(self.store, view.version, self.config.summary_tokens),
            reference=kernel_reference(spec), best_stats=best_stats(self.target, best_source, view.version),
        )  # fmt: skip


def _last_words(messages: Sequence[Any]) -> str:
    """The model's last text in a conversation (what a malformed answer said instead of a Proposal)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and isinstance(message.content, str) and message.content.strip():
            return message.content
    return ""


def template(name: str) -> str:
    return (resources.files("chiplore.agents.llm") / "prompts" / f"{name}.md").read_text()


def _measurements(store: GraphStore, knowledge: Knowledge) -> str:
    rows = sorted(measurements_under(store, knowledge.version), key=lambda r: str(r["param"]))
    lines = [f"- {r['param']} = {r['value']:.4g} {r['unit']} [{r['ci_low']:.4g}, {r['ci_high']:.4g}] ({r['fact']})"
             for r in rows]  # fmt: skip
    stale = sorted(knowledge.stale)
    if stale:
        lines.append(f"- not re-checked since the last upgrade (old values): {', '.join(stale)}")
    return "\n".join(lines) or "(nothing measured yet)"


def _rules(knowledge: Knowledge) -> str:
    lines = [f"- {rule.code} {json.dumps(rule.predicate, sort_keys=True)} ({rule.fact})" for rule in knowledge.rules]
    return "\n".join(lines) or "(none learnt)"


def _claims(store: GraphStore, version: str, limit: int = 40) -> str:
    """The docs' checkable claims with the graph's verdict on each (a contradicted one is wrong)."""
    rows = claims_with_verdicts(store, version, limit)
    return "\n".join(f"- [{r['verdict']}] {r['text']} ({r['f']})" for r in rows) or "(no claims)"


def _lineage(store: GraphStore, kernel: str) -> str:
    rows = named_queries.run(store, "best-lineage", {"kernel": kernel})
    return " -> ".join(f"{row['change']} ({row['role']}, {row['policy']})" for row in rows) or "(no BEST yet)"


def _failures(store: GraphStore, kernel: str, limit: int = 6) -> str:
    rows = recent_failures(store, kernel, limit)
    return "\n".join(f"- {r['change']}: {r['reason']}" for r in rows) or "(none)"
