"""The LLM policy of the architect and the refiner: a chat model on any OpenAI-compatible endpoint,
answering with a pydantic Proposal in the best structured output the endpoint supports
(`output.py`): with function calling, a LangChain agent (create_agent) with the graph tools that
answers by calling the Proposal tool; in a JSON mode, one JSON object per answer; otherwise a fenced
program with prose around it. Without function calling there are no tools: the prompt carries the
knowledge, and the policy compiles each answer and sends the diagnostics back itself.

A malformed answer (no Proposal, or one that does not validate) and an illegal program (the
compiler's errors) go back to the model with the diagnostic, up to `attempts` times; then the
proposal is returned with its error and the loop records a failed design with the reason. A request
the endpoint refuses (a prompt past its context) fails that proposal the same way. A timed out or
failing endpoint is retried with backoff; one that never answers raises LLMUnavailable, one that
refuses the credentials LLMAuthFailed: one-line errors. Every model call is an Activity with its
tokens, latency and cost estimate.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain.chat_models import init_chat_model
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import LLMResult
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, Field

from chiplore.agents.llm import endpoint, output
from chiplore.agents.llm.config import LLMConfig, OutputMode
from chiplore.agents.llm.endpoint import LLMAuthFailed, LLMRefused, LLMUnavailable
from chiplore.agents.llm.output import (
    Malformed,
    fenced_program,
    instructions,
    json_answer,
    reported,
    text_of,
    unfenced,
)
from chiplore.agents.llm.prompt import role_prompt, template
from chiplore.agents.llm.tools import graph_tools
from chiplore.agents.proposers import DesignProposal, KernelView, Role
from chiplore.core.clock import utc_now
from chiplore.core.target import Target
from chiplore.kg.models import Activity
from chiplore.kg.repo.knowledge import existing_fact_ids, record_activity
from chiplore.kg.store import GraphStore, without_nul

__all__ = ["LLMAuthFailed", "LLMPolicy", "LLMRefused", "LLMUnavailable", "Proposal", "TokenBudget", "template"]

FACT_ID = re.compile(r"\b(?:Measurement|LegalityRule|Claim|LanguageEntry):[0-9a-f]{8,}\b")
FENCED_ANSWER = """Answer with the whole program in one fenced block: a line of three backticks, the program
from its first line to its last, a line of three backticks. After the block, one line
`Change: <what it changes against the best design, in a few words>`, then your rationale (which
measurements and rules decided it, with their values and fact ids)."""


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
        self.sent: dict[UUID, int] = {}  # each call's prompt, in characters (its tokens where none are reported)
        self.ids: list[str] = []

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
                            **kwargs: Any) -> None:  # fmt: skip
        self.started[run_id] = (time.perf_counter(), utc_now())
        self.sent[run_id] = sum(len(text_of(m)) for batch in messages for m in batch)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        if not any(response.generations):  # `choices: []`: the client fails on it next
            self.sent.pop(run_id, None)
            self._record(run_id, "error: the answer held no choices", 0, 0)
            return
        usage: dict[str, Any] = {}
        for generation in (g for gens in response.generations for g in gens):
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or usage
        prompt, completion = reported(usage.get("input_tokens")), reported(usage.get("output_tokens"))
        outcome = "ok"
        if prompt is None or completion is None:  # the endpoint reported none, or nonsense: the budget still counts
            said = sum(len(g.text) for gens in response.generations for g in gens)
            prompt, completion = self.sent.pop(run_id, 0) // 4, said // 4
            outcome = "ok (usage not reported: tokens estimated from the text, 4 characters a token)"
        self.sent.pop(run_id, None)
        self.budget.used += prompt + completion
        self._record(run_id, outcome, prompt, completion)

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
    """The configured model through LangChain (retries are ours, so each failed call is recorded). The
    endpoint is always named, so the client follows no endpoint of its own from the environment."""
    kwargs: dict[str, Any] = {"temperature": config.temperature, "timeout": config.timeout_s, "max_retries": 0,
                              "api_key": config.api_key()}  # fmt: skip
    url = config.endpoint_for_client()
    if url:
        kwargs["base_url"] = url
    if config.max_tokens:
        kwargs["max_tokens"] = config.max_tokens
    if config.seed is not None:
        kwargs["seed"] = config.seed
    return init_chat_model(config.model, **kwargs)


def run_agent(agent: Any, messages: Sequence[Any], calls: Calls, config: LLMConfig) -> dict[str, Any]:
    """One agent run, retried with backoff while the endpoint times out or fails (`endpoint.call`)."""
    run_config = {"callbacks": [calls], "recursion_limit": 2 * config.max_steps}
    return endpoint.call(lambda: agent.invoke({"messages": list(messages)}, config=run_config), config)


def ask(model: Any, messages: Sequence[Any], calls: Calls, config: LLMConfig) -> AIMessage:
    """One model call without tools, retried as `run_agent` is."""
    answer = endpoint.call(lambda: model.invoke(list(messages), config={"callbacks": [calls]}), config)
    return answer if isinstance(answer, AIMessage) else AIMessage(content=text_of(answer))


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
        self._mode: OutputMode | None = None

    @property
    def mode(self) -> OutputMode:
        """How the endpoint answers with structure (discovered on first use, once per model)."""
        if self._mode is None:
            self._mode = output.output_mode(self.model, self.config, self.store)
        return self._mode

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
        mode = self.mode
        system = template("system").format(role=self.role, target=self.target.name, language=self.pack.language,
                                           version=view.version)  # fmt: skip
        messages: list[Any] = [HumanMessage(role_prompt(self.role, view, self.store, self.target, self.config))]
        if mode == "tools":
            tools = graph_tools(self.store, self.target, view.version, view.kernel, on_refusal=self._refused,
                                withheld=self.config.withhold)  # fmt: skip
            agent = create_agent(self.model, tools=tools, system_prompt=system,
                                 response_format=ToolStrategy(Proposal))  # fmt: skip
        else:
            system = _without_tools(system) + "\n\n" + instructions(mode, Proposal, FENCED_ANSWER)
            messages.insert(0, SystemMessage(system))
            runnable = output.structured(self.model, mode, Proposal)
        answer: Proposal | None = None
        problem = ""
        for _ in range(self.config.attempts):
            try:
                if mode == "tools":
                    answer, messages, problem = self._agent_turn(agent, messages, calls)
                else:
                    answer, messages, problem = self._plain_turn(runnable, mode, messages, calls)
            except LLMRefused as error:  # the same request would be refused again
                problem = f"the endpoint refused the request: {error}"
                answer = None
                break
            if answer is None:
                continue
            errors = [d for d in self.target.check(answer.source, view.version).diagnostics if d.is_error]
            if not errors:
                return self._proposal(answer, calls.ids)
            problem = "illegal program: " + "; ".join(f"{d.code}: {d.message}" for d in errors[:3])
            messages.append(HumanMessage(f"The compiler refuses it:\n{problem}\nFix the program and answer again."))
        # the record keeps what the model last said: its program, or its prose when it wrote none
        said = without_nul(answer.source if answer else _last_words(messages))
        return DesignProposal(role=self.role, policy=self.name, source=said,
                              rationale=without_nul(answer.rationale) if answer else "",
                              change=without_nul(answer.change) if answer else "",
                              error=f"{problem} (after {self.config.attempts} attempts)",
                              activities=tuple(calls.ids))  # fmt: skip

    def _agent_turn(self, agent: Any, messages: list[Any], calls: Calls) -> tuple[Proposal | None, list[Any], str]:
        """One agent run: it ends with a Proposal, or without one (the model is told how to answer)."""
        try:
            state = run_agent(agent, messages, calls, self.config)
        except GraphRecursionError:
            problem = f"no answer within {self.config.max_steps} steps"
            return None, [*messages, HumanMessage(f"{problem}: answer now with the Proposal tool.")], problem
        messages = list(state["messages"])
        answer = state.get("structured_response")
        if answer is None:
            again = HumanMessage("Answer by calling the Proposal tool with the whole program.")
            return None, [*messages, again], "malformed answer: no Proposal"
        return answer.model_copy(update={"source": unfenced(answer.source)}), messages, ""

    def _plain_turn(self, runnable: Any, mode: OutputMode, messages: list[Any],
                    calls: Calls) -> tuple[Proposal | None, list[Any], str]:  # fmt: skip
        """One model call in a JSON or the fenced mode, and its answer parsed."""
        said = ask(runnable, messages, calls, self.config)
        messages = [*messages, _as_kept(said)]
        try:
            answer = _parse(text_of(said), mode)
        except Malformed as error:
            problem = f"malformed answer: {error}"
            again = instructions(mode, Proposal, FENCED_ANSWER)
            return None, [*messages, HumanMessage(f"That answer is malformed: {error}.\n{again}")], problem
        return answer, messages, ""

    def _refused(self, what: str) -> None:
        """A write the model tried through a tool: recorded, as the loop records every failure."""
        record_activity(self.store, Activity(id=f"tool-{uuid.uuid4().hex[:16]}", role=self.role, policy="llm-tool",
                                             ended_at=utc_now(), outcome=what[:300]))  # fmt: skip

    def _proposal(self, answer: Proposal, activities: list[str]) -> DesignProposal:
        known = existing_fact_ids(self.store, list(answer.consulted))  # ids the model made up are dropped
        # a NUL the model wrote is stored as U+FFFD: the design's id is its program's hash as stored
        return DesignProposal(role=self.role, policy=self.name, source=without_nul(answer.source),
                              rationale=without_nul(answer.rationale), change=without_nul(answer.change),
                              consulted=tuple(known), activities=tuple(activities))  # fmt: skip

    def _prompt(self, view: KernelView) -> str:
        return role_prompt(self.role, view, self.store, self.target, self.config)


ECHO_CHARS = 65_536  # of an answer sent back with the next request: a program that long is already huge


def _as_kept(said: AIMessage) -> AIMessage:
    """The answer as the conversation keeps it: a huge one (8 MB from a user's endpoint) was sent back
    whole with every retry, doubling each request."""
    text = text_of(said)
    if len(text) <= ECHO_CHARS:
        return said
    return AIMessage(
        content=f"{text[:ECHO_CHARS]}\n[... {len(text) - ECHO_CHARS:,} more characters of this answer cut]"
    )


def _parse(text: str, mode: OutputMode) -> Proposal:
    """A Proposal from an answer in a JSON mode or the fenced one."""
    if mode != "fenced":
        answer = json_answer(text, Proposal, strict=False)
        if not answer.source.strip():
            raise Malformed("the source is empty")
        return answer.model_copy(update={"source": unfenced(answer.source)})
    source, prose = fenced_program(text)
    change = re.search(r"(?im)^\W*change\W*:\s*(.+)$", prose)
    return Proposal(source=source, rationale=prose[:4000], change=change.group(1).strip()[:200] if change else
                    "(no change line)", consulted=sorted(set(FACT_ID.findall(prose))))  # fmt: skip


def _without_tools(system: str) -> str:
    """The system prompt for a model without tools: the paragraphs about the tools go."""
    paragraphs = system.split("\n\n")
    return "\n\n".join(p for p in paragraphs if not re.search(r"\btools?\b", p)).strip()


def _last_words(messages: Sequence[Any]) -> str:
    """The model's last text in a conversation (what a malformed answer said instead of a Proposal)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and isinstance(message.content, str) and message.content.strip():
            return message.content
    return ""
