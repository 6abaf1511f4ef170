"""Structured output that degrades with the endpoint: function calling, then JSON mode with the
answer's schema, then any JSON object, then a fenced block of code in prose, whichever the endpoint
supports. Servers differ: some refuse tools or `response_format` with an HTTP error, some accept
them and ignore them (a small model's chat template without tools answers prose), some break on a
schema (HTTP 500).

What an endpoint supports is discovered once per model and endpoint, with one short probe call per
rung from the top until one works, and recorded in the graph as an Activity (policy `llm-output`,
role `probe`) whose outcome states the mode and why each better one failed; its id names the model,
the endpoint and the mode, so a later run on the graph asks no more. The answers of every mode are
parsed here, tolerating what real models write: a program wrapped in a fence inside a JSON field, a
fence that is never closed, prose around a JSON object."""

from __future__ import annotations

import json
import re
import time
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from chiplore.agents.llm import endpoint
from chiplore.agents.llm.config import OUTPUT_MODES, LLMConfig, OutputMode
from chiplore.core.clock import utc_now
from chiplore.kg.models import Activity
from chiplore.kg.repo.knowledge import activity_ended, record_activity
from chiplore.kg.store import GraphStore

M = TypeVar("M", bound=BaseModel)
PROBE_MARK = "chiplore output probe"  # in the probe's system message (the scripted test server knows it)
PROBE_TOKENS = 64
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*$", re.MULTILINE)


class Malformed(ValueError):
    """An answer that does not parse as the mode asked (the reason is what the model is told)."""


class Echo(BaseModel):
    """Echo one word back."""

    word: str


def activity_id(config: LLMConfig, mode: OutputMode) -> str:
    return f"llm-output-{config.identity()}-{mode}"


def output_mode(model: BaseChatModel, config: LLMConfig, store: GraphStore) -> OutputMode:
    """The mode this model answers in: the configured one, or the one the graph records for it, or
    discovered now (and recorded)."""
    if config.output != "auto":
        return config.output
    recorded = next((mode for mode in OUTPUT_MODES if activity_ended(store, activity_id(config, mode))), None)
    return recorded or discover(model, config, store)


def discover(model: BaseChatModel, config: LLMConfig, store: GraphStore) -> OutputMode:
    """Probe the rungs from the top; record the first that works, and why each above it did not."""
    began, at = time.perf_counter(), utc_now()
    why_not: list[str] = []
    usage = [0, 0]
    mode: OutputMode = "fenced"
    passing = False  # a rung refused with a 5xx or a 429: the endpoint's trouble of the moment, not a verdict
    for rung in OUTPUT_MODES[:-1]:
        reason, transient = _probe(model, config, rung, usage)
        if not reason:
            mode = rung
            break
        passing = passing or transient
        why_not.append(f"{rung}: {reason}")
    outcome = f"structured output: {mode}" + (f" ({'; '.join(why_not)})" if why_not else "")
    if passing:  # this run uses it; the next probes again (a user's endpoint lost its tools for good to one 500)
        outcome = f"{outcome}; not kept: the endpoint failed for the moment, the next run probes again"
    record_activity(store, Activity(
        id=activity_id(config, mode), role="probe", policy="llm-output", model=config.model,
        prompt_tokens=usage[0], completion_tokens=usage[1], latency_s=round(time.perf_counter() - began, 3),
        cost_usd=config.cost(usage[0], usage[1]), started_at=at, ended_at=None if passing else utc_now(),
        outcome=outcome[:500],
    ))  # fmt: skip
    return mode


def _probe(model: BaseChatModel, config: LLMConfig, mode: OutputMode, usage: list[int]) -> tuple[str, bool]:
    """Why the endpoint does not answer in `mode` ("" when it does), and whether that may pass (a 5xx or
    a 429)."""
    system = SystemMessage(f"{PROBE_MARK}: answer exactly as asked.")
    if mode == "tools":
        runnable: Runnable[Any, Any] = model.bind_tools([Echo], tool_choice="any").bind(max_tokens=PROBE_TOKENS)
        ask = HumanMessage("Call the Echo tool with the word ready.")
    else:
        runnable = structured(model, mode, Echo).bind(max_tokens=PROBE_TOKENS)
        ask = HumanMessage('Answer with the JSON object {"word": "ready"} and nothing else.')
    try:
        answer = endpoint.call(lambda: runnable.invoke([system, ask]), config, retry_status=False)
    except endpoint.LLMRefused as error:
        return f"refused ({error})", error.status >= 500 or error.status == 429
    tokens = getattr(answer, "usage_metadata", None) or {}
    usage[0] += reported(tokens.get("input_tokens")) or 0
    usage[1] += reported(tokens.get("output_tokens")) or 0
    if mode == "tools":
        calls = getattr(answer, "tool_calls", None) or []
        if not calls:
            return "no tool call in the answer", False
        return "" if calls[0]["name"] == "Echo" and isinstance(calls[0]["args"].get("word"), str) else (
            f"a call of {calls[0]['name']} with {json.dumps(calls[0]['args'])[:80]}"
        ), False  # fmt: skip
    try:
        json_answer(text_of(answer), Echo, strict=mode == "json_schema")
    except Malformed as error:
        return str(error), False
    return "", False


def structured(model: BaseChatModel, mode: OutputMode, schema: type[BaseModel]) -> Runnable[Any, AIMessage]:
    """The model bound to answer in a JSON mode (sent as the request's own `response_format`, so that
    the client neither rewrites it nor parses the answer itself), or as it is for plain text."""
    if mode == "json_schema":
        spec = {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}
        return model.bind(extra_body={"response_format": {"type": "json_schema", "json_schema": spec}})
    if mode == "json_object":
        return model.bind(extra_body={"response_format": {"type": "json_object"}})
    return model


def reported(value: Any) -> int | None:
    """A token count an endpoint reported, or None when it is no count (missing, text, negative)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def text_of(message: Any) -> str:
    """An answer's text, whatever shape its content has."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part if isinstance(part, str) else str(part.get("text", "")) for part in content)
    return str(content or "")


def instructions(mode: OutputMode, schema: type[BaseModel], fenced: str = "") -> str:
    """How to answer in `mode` (the tools mode needs none: the tool's schema says it). `fenced`: what
    a fenced answer holds, for a schema that is a program with prose about it; without it a fenced
    answer is the JSON object in a fence."""
    fields = "\n".join(f'- "{name}": {field.description or field.annotation}'
                       for name, field in schema.model_fields.items())  # fmt: skip
    if mode == "tools":
        return ""
    if mode == "fenced" and fenced:
        return fenced
    where = "in one ```json fenced block" if mode == "fenced" else "and nothing else"
    return f"Answer with one JSON object {where}, with these fields:\n{fields}"


def json_answer(text: str, schema: type[M], *, strict: bool = False) -> M:
    """The JSON object in `text` (around it may be prose or a fence), validated as `schema`."""
    body = text.strip()
    if not strict:
        fenced = _fenced(body)
        body = fenced[0] if fenced else body
    start, end = body.find("{"), body.rfind("}")
    if start < 0:
        raise Malformed("no JSON object in the answer")
    if end < start:
        raise Malformed("the JSON object is never closed (an answer cut short by its token limit?)")
    try:
        data = json.loads(body[start : end + 1])
    except json.JSONDecodeError as error:
        raise Malformed(f"the JSON does not parse: {error.msg} at character {error.pos}") from None
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the object"
        raise Malformed(f"the JSON does not fit {schema.__name__}: {where}: {first['msg']}") from None


def _fenced(text: str) -> tuple[str, str] | None:
    """The first fenced block of `text` and the text around it; a fence never closed runs to the end
    (a model that stopped or forgot). None when there is no fence."""
    opening = FENCE.search(text)
    if opening is None:
        return None
    marker = opening.group(1)
    closing = next((m for m in FENCE.finditer(text, opening.end())
                    if m.group(1)[0] == marker[0] and len(m.group(1)) >= len(marker)
                    and not text[m.start() : m.end()].strip().lstrip(marker[0]).strip()), None)  # fmt: skip
    inside = text[opening.end() + 1 : closing.start() if closing else len(text)]
    around = text[: opening.start()] + (text[closing.end() :] if closing else "")
    return inside.rstrip("\n"), around.strip()


def fenced_program(text: str) -> tuple[str, str]:
    """The program of a fenced answer, and the prose around it."""
    found = _fenced(text)
    if found is None:
        raise Malformed("no fenced program in the answer (put the whole program between ``` lines)")
    if not found[0].strip():
        raise Malformed("the fenced block is empty")
    return found


def unfenced(source: str) -> str:
    """A program without the fence a model put around it inside a field meant for the program alone."""
    if FENCE.match(source.lstrip("\n")):
        found = _fenced(source.lstrip("\n"))
        if found and found[0].strip():
            return found[0]
    return source
