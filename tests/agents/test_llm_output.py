"""Structured output that degrades with the endpoint, through the production LangChain code against the
scripted loopback server playing endpoints with fewer features: function calling refused or ignored,
JSON mode with a schema refused, no JSON mode at all. What the endpoint supports is discovered once
per model and endpoint and recorded in the graph; every answer a real model could give (JSON around
prose, a fence never closed, a request past the context) is a proposal or a recorded failure."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.llm.language import tokens
from chiplore.agents.llm.librarian import LLMLibrarian, parts
from chiplore.agents.llm.output import Malformed, fenced_program, json_answer, unfenced
from chiplore.agents.llm.policy import LLMPolicy, Proposal
from chiplore.ingest.chunks import chunk_page
from chiplore.ingest.librarian import sentences
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD
from tests.helpers import kernel_view
from tests.llm_server import ScriptedOpenAI, Turn, say

VERSION = "0.6.0"
O_PROJ = "sliding_attention_output"


@pytest.fixture
def ready(embedded_store: EmbeddedStore) -> GraphStore:
    """A graph with SimRNGD registered."""
    ensure_schema(embedded_store)
    target = SimRNGD()
    register_target(embedded_store, target.name, target.toolchains(), target.default_toolchain())
    return embedded_store


def _program() -> str:
    return next(k for k in SimRNGD().kernels() if k.name == O_PROJ).baseline_source


def _propose(store: GraphStore, server: ScriptedOpenAI, **config: Any) -> Any:
    target = SimRNGD()
    llm = LLMConfig(model="openai:scripted-1", base_url=server.base_url, timeout_s=30.0, **config)
    return LLMPolicy("architect", llm, store, target).propose(kernel_view(target, O_PROJ, VERSION), 1)[0]


def _discovered(store: GraphStore) -> list[str]:
    rows = store.read("MATCH (a:Activity {policy: 'llm-output'}) RETURN a.outcome AS o, a.model AS m")
    return [f"{row['m']}: {row['o']}" for row in rows]


def _proposal_json(source: str) -> str:
    return json.dumps({"source": source, "rationale": "r", "change": "whole design", "consulted": []})


def test_an_endpoint_without_tools_or_json_mode_gets_a_fenced_program(ready: GraphStore) -> None:
    program = _program()
    with ScriptedOpenAI(supports=frozenset()) as server:
        server.script(say(f"Here is the kernel:\n```ferrite\n{program}\n```\nChange: the baseline again\nIt streams "
                          "at the rate of Measurement:0123456789abcdef."))  # fmt: skip
        proposal = _propose(ready, server)
        sent = server.requests
    assert proposal.error == "" and proposal.source == program.rstrip("\n")
    assert proposal.change == "the baseline again"
    assert len(sent) == 1 and "tools" not in sent[0] and "response_format" not in sent[0]
    system = next(m["content"] for m in sent[0]["messages"] if m["role"] == "system")
    assert "one fenced block" in system and "Proposal tool" not in system
    assert _discovered(ready) == ["openai:scripted-1: structured output: fenced (tools: refused (HTTP 400: tools "
                                  "not supported); json_schema: refused (HTTP 400: json_schema not supported); "
                                  "json_object: refused (HTTP 400: json_object not supported))"]  # fmt: skip


def test_tools_accepted_but_ignored_fall_back_to_json_with_the_schema(ready: GraphStore) -> None:
    """As llama.cpp serves a model whose chat template has no tools: it answers prose."""
    with ScriptedOpenAI(supports=frozenset({"json_schema", "json_object"}), unsupported="ignore") as server:
        server.script(say(_proposal_json(_program())))
        proposal = _propose(ready, server)
        sent = server.requests
    assert proposal.error == "" and proposal.source == _program()
    assert sent[0]["response_format"]["type"] == "json_schema"
    assert sent[0]["response_format"]["json_schema"]["name"] == "Proposal" and "tools" not in sent[0]
    assert _discovered(ready) == ["openai:scripted-1: structured output: json_schema (tools: no tool call in the "
                                  "answer)"]  # fmt: skip


def test_a_refused_schema_falls_back_to_any_json_object(ready: GraphStore) -> None:
    with ScriptedOpenAI(supports=frozenset({"json_object"})) as server:
        server.script(say("Sure! Here is my design:\n" + _proposal_json(_program()) + "\nHope it helps."))
        proposal = _propose(ready, server)
        sent = server.requests
    assert proposal.error == "" and proposal.source == _program()
    assert sent[0]["response_format"] == {"type": "json_object"}
    assert "structured output: json_object (tools: refused" in _discovered(ready)[0]


def test_the_mode_is_discovered_once_per_model_and_endpoint(ready: GraphStore) -> None:
    with ScriptedOpenAI(supports=frozenset({"json_object"})) as server:
        server.script(say(_proposal_json(_program())), say(_proposal_json(_program())))
        _propose(ready, server)
        probes = len(server.probes)
        # another run on the same graph (another policy) reads what the first recorded
        _propose(ready, server)
        assert len(server.probes) == probes == 3
    assert len(_discovered(ready)) == 1


def test_an_endpoint_failing_for_the_moment_while_probed_is_probed_again_next_run(ready: GraphStore) -> None:
    """A 500 during the probe had downgraded a user's endpoint for good (no tools on any later run)."""
    with ScriptedOpenAI(status=500) as server:
        assert discover_mode(ready, server) == "fenced"
        server.status = 200
        assert discover_mode(ready, server) == "tools"  # probed again: the first verdict was not kept
        assert discover_mode(ready, server) == "tools"
    kept = ready.read("MATCH (a:Activity {policy: 'llm-output'}) WHERE a.ended_at IS NOT NULL RETURN a.outcome AS o")
    assert [row["o"] for row in kept] == ["structured output: tools"]


def discover_mode(store: GraphStore, server: ScriptedOpenAI) -> str:
    llm = LLMConfig(model="openai:scripted-1", base_url=server.base_url, timeout_s=30.0)
    return LLMPolicy("architect", llm, store, SimRNGD()).mode


def test_a_malformed_answer_goes_back_with_the_reason_and_ends_as_a_recorded_failure(ready: GraphStore) -> None:
    with ScriptedOpenAI(supports=frozenset({"json_schema"})) as server:
        server.script(say("I think you should use more engines."), say('{"source": "kernel", "rationale": 3}'),
                      say('{"source": "kernel" "rationale": "r"}'))  # fmt: skip
        proposal = _propose(ready, server)
        sent = [json.dumps(body) for body in server.requests]
    assert proposal.error.startswith("malformed answer: the JSON does not parse")
    assert proposal.error.endswith("(after 3 attempts)")
    assert "That answer is malformed: no JSON object in the answer" in sent[1]
    assert "does not fit Proposal: rationale" in sent[2] or "does not fit Proposal: change" in sent[2]


def test_a_fence_never_closed_still_gives_the_program(ready: GraphStore) -> None:
    with ScriptedOpenAI(supports=frozenset()) as server:
        server.script(say(f"```\n{_program()}"))
        proposal = _propose(ready, server)
    assert proposal.error == "" and proposal.source.strip() == _program().strip()
    assert proposal.change == "(no change line)"


def test_a_request_the_endpoint_refuses_is_a_failed_proposal_not_a_crash(ready: GraphStore) -> None:
    with ScriptedOpenAI(supports=frozenset({"json_schema"})) as server:
        server.script(Turn(status=400, content="the request exceeds the available context size, try increasing it"))
        proposal = _propose(ready, server)
    assert proposal.error.startswith("the endpoint refused the request: HTTP 400: the request exceeds the available")
    calls = ready.read("MATCH (a:Activity {policy: 'llm', role: 'architect'}) RETURN a.outcome AS o")
    assert len(calls) == 1 and "400 - the request exceeds" in calls[0]["o"]


def test_a_configured_mode_asks_nothing(ready: GraphStore) -> None:
    with ScriptedOpenAI() as server:
        server.script(say(f"```\n{_program()}\n```"))
        proposal = _propose(ready, server, output="fenced")
        assert server.probes == [] and proposal.error == ""
    assert _discovered(ready) == []


@pytest.mark.unit
def test_answers_as_real_models_write_them_parse_or_say_why_not() -> None:
    program = "kernel k() {\n  x = 1\n}"
    assert unfenced(f"```ferrite\n{program}\n```") == program  # a fence inside a field meant for the program
    assert unfenced(program) == program
    assert fenced_program(f"Intro.\n~~~~\n{program}\n~~~~\nChange: x") == (program, "Intro.\n\nChange: x")
    assert fenced_program(f"````\n{program}\n```\nstill inside\n````")[0] == f"{program}\n```\nstill inside"
    with pytest.raises(Malformed, match="no fenced program"):
        fenced_program(program)
    with pytest.raises(Malformed, match="empty"):
        fenced_program("```\n\n```")
    fenced_json = f'```json\n{{"source": "{program.splitlines()[0]}", "rationale": "r", "change": "c"}}\n```'
    assert json_answer(fenced_json, Proposal).source == program.splitlines()[0]
    with pytest.raises(Malformed, match="never closed"):
        json_answer('{"source": "kernel k() {', Proposal)
    with pytest.raises(Malformed, match="does not fit Proposal: change: Field required"):
        json_answer('{"source": "s", "rationale": "r"}', Proposal)


def test_the_librarian_answers_in_json_and_a_malformed_page_is_recorded(ready: GraphStore) -> None:
    target = SimRNGD()
    page = next(p for p in target.docs(VERSION) if p.title.startswith("DMA"))
    prose = [chunk for chunk in chunk_page(page.text) if not chunk.code]
    sentence = next(s for s in sentences(prose[0].text) if len(s) > 20)
    claims = {"claims": [{"text": sentence, "paragraph": 0, "kind": "rule", "concept": "dma"}]}
    with ScriptedOpenAI(supports=frozenset({"json_schema"}), unsupported="ignore") as server:
        server.script(say(json.dumps(claims)), say("The page is about DMA."))
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, timeout_s=30.0)
        librarian = LLMLibrarian(config, ready, target.pack().params)
        found = librarian.extract_page(chunk_page(page.text), page.title)
        again = librarian.extract_page(chunk_page(page.text), page.title)
        sent = server.requests
    assert [claim.text for _, claim in found] == [sentence] and again == []
    assert sent[0]["response_format"]["json_schema"]["name"] == "ClaimSet"
    system = next(m["content"] for m in sent[0]["messages"] if m["role"] == "system")
    assert "ClaimSet tool" not in system and '"paragraph": its number' in system
    failed = ready.read("MATCH (a:Activity {policy: 'llm-answer'}) RETURN a.outcome AS o")
    assert [row["o"] for row in failed] == [f"malformed answer for page {page.title!r}: no JSON object in the answer"]


@pytest.mark.unit
def test_a_page_is_split_into_runs_of_paragraphs_within_the_budget() -> None:
    page = next(p for p in SimRNGD().docs(VERSION) if p.title.startswith("Diagnostics"))
    prose = [chunk for chunk in chunk_page(page.text) if not chunk.code]
    runs = parts(prose, 400)
    assert [c for run in runs for c in run] == prose and len(runs) > 3
    assert all(sum(tokens(c.text) + 4 for c in run) <= 400 or len(run) == 1 for run in runs)
    assert parts(prose, 0) == [prose]
