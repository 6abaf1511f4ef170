"""The LLM policy, through the production LangChain code, against a loopback server of our own that
speaks the OpenAI chat-completions API (tool calls included) with scripted answers: a good program,
a malformed answer, an illegal program, a tool call that tries to write, an endpoint timeout; and a
closed port. No test uses the network."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore import queries
from chiplore.agents.knowledge import read_knowledge
from chiplore.agents.llm.config import LLMConfig
from chiplore.agents.llm.librarian import LLMLibrarian
from chiplore.agents.llm.policy import LLMPolicy, TokenBudget
from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.proposers import BuiltinArchitect
from chiplore.agents.schedule import OptimizeConfig, Roles
from chiplore.cli import main
from chiplore.ingest.chunks import chunk_page
from chiplore.ingest.docs import ingest_docs
from chiplore.ingest.learn import learn
from chiplore.ingest.librarian import BuiltinLibrarian
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD
from tests.helpers import kernel_view
from tests.llm_server import ScriptedOpenAI, Turn, call, say

VERSION = "0.6.0"
O_PROJ = "sliding_attention_output"


def good_program(store: GraphStore) -> str:
    """A program that beats the baseline by far: what a capable model would write (the builtin
    architect's first design, so the test does not hinge on a hand-written kernel)."""
    target = SimRNGD()
    view = kernel_view(target, O_PROJ, VERSION, read_knowledge(store, VERSION, target.pack().capabilities))
    return BuiltinArchitect().propose(view, 1)[0].source


@pytest.mark.slow
def test_an_llm_round_goes_from_proposal_to_acceptance_and_records_every_failure(embedded_graph: GraphStore) -> None:
    graph = embedded_graph  # the LLM path; tests/kg/test_llm_cypher_tool.py holds its Cypher tool on both stores
    target = SimRNGD(seed=5)
    learn(graph, target, VERSION)
    good = good_program(graph)
    illegal = good.replace(".decode(", ".lut(").replace(".contract(", ".lut(bf16).contract(")
    fact = graph.read("MATCH (m:Measurement) RETURN m.fact_id AS f ORDER BY f LIMIT 1")[0]["f"]
    with ScriptedOpenAI() as server:
        server.script(
            # 1: the endpoint times out once; then a write attempt, a compile check, and a good program
            Turn(content="slow", delay_s=3.0),
            call("cypher", query="MATCH (k:Kernel) SET k.name = 'pwned' RETURN k"),
            call("check", source=good),
            call("Proposal", source=good, rationale="eight engines per cluster stream at the port's rate",
                 change="whole design", consulted=[fact, "Measurement:made-up"]),
            # 2: three malformed answers (prose instead of a Proposal)
            say("You should use more DMA engines."), say("Really, more engines."), say("I cannot write Ferrite."),
            # 3: three illegal programs
            *[call("Proposal", source=illegal, rationale="r", change="lut") for _ in range(3)],
        )  # fmt: skip
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, timeout_s=1.0, retries=2)
        architect = LLMPolicy("architect", config, graph, target, TokenBudget(config.token_budget))
        roles = Roles(architect=architect, refiner=LLMPolicy("refiner", config, graph, target, architect.budget))
        summary = optimize(
            OptimizeContext(graph, target, VERSION), OptimizeConfig(kernels=(O_PROJ,), patience=2), roles
        )
        sent = [json.dumps(body) for body in server.requests]
    assert summary.accepted == 1 and summary.proposals == 3
    # the prompt states what the graph holds: measurements with intervals, checked claims, rules
    assert all(needle in sent[0] for needle in ("Measurement:", "[confirmed]", "[CONTRADICTED]", "LegalityRule:"))
    # ... and the checked summary of the language: every construct under the version, each with its verdict
    prompt = next(m["content"] for m in server.requests[0]["messages"] if m["role"] == "user")
    entries = queries.run(graph, "dsl-summary", {"toolchain": VERSION})
    assert len(entries) > 60 and "The Ferrite constructs under 0.6.0, as chiplore checked them" in prompt
    assert all(f"- {row['construct']} ({row['kind']}) `{row['syntax']}` [" in prompt for row in entries)
    assert "- decode (stage) `.decode(D)` [confirmed]" in prompt
    assert "- lut (stage) `.lut(D)` [UNAVAILABLE under 0.6.0; write instead: use '.decode(D)']" in prompt
    switch = next(line for line in prompt.splitlines() if line.startswith("- switch (stage)"))
    assert "[CONTRADICTED: " in switch and "E0420" in switch  # with the compiler's evidence
    assert "Totals: dma.bytes" in prompt and "What it computes" in prompt  # BEST's statistics, the reference
    designs = {row["change"]: row for row in graph.read(
        "MATCH (d:DesignNode {kernel: $k, policy: 'llm'}) RETURN d.change AS change, d.status AS status, "
        "d.reason AS reason, d.id AS id", {"k": O_PROJ})}  # fmt: skip
    assert designs["whole design"]["status"] == "accepted"
    assert graph.read("MATCH (:Kernel {name: $k})-[:BEST]->(d) RETURN d.id AS id", {"k": O_PROJ})[0]["id"] == \
        designs["whole design"]["id"]  # fmt: skip
    failed = sorted(row["reason"] for row in designs.values() if row["status"] == "failed")
    assert len(failed) == 2 and "illegal program: E0" in failed[0] and "malformed answer" in failed[1]
    said = graph.read(  # a malformed answer is kept as what the model said
        "MATCH (d:DesignNode {kernel: $k, policy: 'llm', status: 'failed'})-[:HAS_VERSION]->(v:KernelVersion) "
        "WHERE d.reason STARTS WITH 'malformed' RETURN v.source AS s",
        {"k": O_PROJ},
    )
    assert [row["s"] for row in said] == ["I cannot write Ferrite."]
    # the write was refused, and the model was told so
    assert not graph.read("MATCH (k:Kernel {name: 'pwned'}) RETURN k.name AS n")
    refused = graph.read("MATCH (a:Activity {policy: 'llm-tool'}) RETURN a.outcome AS o")
    assert len(refused) == 1 and "refused a write" in refused[0]["o"]
    assert any("refused: this tool is read-only" in body for body in sent)
    assert any("The compiler refuses it" in body for body in sent)  # the diagnostics went back to the model
    consulted = graph.read(
        "MATCH (:DesignNode {id: $id})-[:CONSULTED]->(f:Fact) RETURN f.fact_id AS f",
        {"id": designs["whole design"]["id"]},
    )
    assert [row["f"] for row in consulted] == [fact]  # a made-up id links nothing
    calls = graph.read(
        "MATCH (a:Activity {policy: 'llm'}) WHERE a.model IS NOT NULL "
        "RETURN a.role AS role, a.outcome AS outcome, a.prompt_tokens AS p, "
        "a.completion_tokens AS c, a.model AS model ORDER BY a.started_at"
    )
    assert len(calls) == 10 and sum(row["outcome"] == "ok" for row in calls) == 9  # one timed out
    assert "Timeout" in next(row["outcome"] for row in calls if row["outcome"] != "ok")
    usage = {row["role"]: row for row in queries.run(graph, "llm-usage")}
    assert usage["architect"]["calls"] == 10 and usage["architect"]["prompt_tokens"] == 9 * 120
    per_change = queries.run(graph, "llm-cost-per-accepted-change")
    assert [row["design"] for row in per_change] == [designs["whole design"]["id"]]
    assert per_change[0]["prompt_tokens"] == 3 * 120  # the three calls behind the accepted design


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_closed_port_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    runner = CliRunner()
    assert runner.invoke(main, ["init"], env=env).exit_code == 0
    result = runner.invoke(main, ["optimize", O_PROJ, "--policy", "llm", "--model", "openai:any",
                                  "--base-url", f"http://127.0.0.1:{_closed_port()}/v1"], env=env)  # fmt: skip
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 1 and lines[-1].startswith("error:") and "did not answer" in lines[-1], result.stderr
    assert "Traceback" not in result.output
    with EmbeddedStore(tmp_path / "data") as store:  # the run's record says how it ended, and with what policy
        [run] = store.read("MATCH (a:Activity {role: 'runner'}) WHERE a.id STARTS WITH 'optimize-' "
                           "RETURN a.policy AS policy, a.outcome AS outcome")  # fmt: skip
    assert run["policy"] == "llm" and run["outcome"].startswith("stopped: LLMUnavailable: the model at"), run


def test_no_api_key_for_a_hosted_model_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    initialised = CliRunner().invoke(main, ["init"], env=env)
    assert initialised.exit_code == 0, initialised.output
    result = CliRunner().invoke(main, ["optimize", O_PROJ, "--policy", "llm", "--model", "openai:gpt-5"], env=env)
    assert result.exit_code == 1 and "OPENAI_API_KEY" in result.stderr


@pytest.mark.slow
def test_the_llm_librarian_cites_its_paragraphs_and_uncited_claims_are_dropped(embedded_store: GraphStore) -> None:
    """One model call per page; what the model states must be in the paragraph it cites."""
    ensure_schema(embedded_store)
    target = SimRNGD(seed=0)
    register_target(embedded_store, target.name, target.toolchains(), target.default_toolchain())
    builtin = BuiltinLibrarian(target.pack().doc_patterns)
    turns, expected = [], 0
    for page in target.docs(VERSION):
        prose = [chunk for chunk in chunk_page(page.text) if not chunk.code]
        claims = [{"text": claim.text, "paragraph": i, "kind": claim.kind, "concept": claim.concept,
                   "param": claim.param, "value": claim.value, "unit": claim.unit}
                  for i, chunk in enumerate(prose) for claim in builtin.extract(chunk, page.title)]  # fmt: skip
        expected += len(claims)
        if not turns and prose:  # a made-up claim on the first page, and a real one cited to the wrong paragraph
            claims.append({"text": "The chip runs at 9 GHz.", "paragraph": 0, "kind": "quantity",
                           "concept": "chip", "param": "chip.clock_hz", "value": 9e9, "unit": "Hz"})  # fmt: skip
        turns.append(call("ClaimSet", claims=claims) if prose else say("nothing to claim"))
    with ScriptedOpenAI() as server:
        server.script(*[t for t in turns if t.tool_calls])
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, timeout_s=5.0)
        librarian = LLMLibrarian(config, embedded_store, target.pack().params)
        summary = ingest_docs(embedded_store, target, VERSION, librarian)
        assert len(server.requests) == sum(1 for t in turns if t.tool_calls)  # one call per page with prose
    assert librarian.rejected == ["The chip runs at 9 GHz."]
    # the claims written: a sentence of a paragraph two pages share is one claim (extracted twice)
    written = embedded_store.read("MATCH (c:Claim) RETURN count(c) AS n")[0]["n"]
    assert summary.claims == written > 20 and expected - 2 <= written <= expected
    assert not embedded_store.read("MATCH (c:Claim) WHERE c.text CONTAINS '9 GHz' RETURN c.id AS id")
    calls = embedded_store.read(
        "MATCH (a:Activity {role: 'librarian', policy: 'llm'}) WHERE a.model IS NOT NULL RETURN count(a) AS n"
    )
    assert calls[0]["n"] == len(server.requests)


NO_COMPLETION = [
    b"",  # an empty body
    b"<html><body>502 Bad Gateway</body></html>",  # a proxy's page
    json.dumps({"id": "x", "object": "chat.completion", "model": "m"}).encode(),  # no choices
    json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": []}).encode(),
    b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n',  # a stream nobody asked for
    b"\xff\xfe\xfa not utf-8",
]


@pytest.mark.parametrize("body", NO_COMPLETION, ids=["empty", "html", "no-choices", "empty-choices", "sse", "bytes"])
def test_an_answer_that_is_no_chat_completion_fails_the_design_and_the_run_goes_on(body: bytes) -> None:
    """A user's endpoint answered HTTP 200 with these: each printed ~160 lines of traceback and ended
    the run. Each is now that request's failure (a failed design, recorded), as a refused request is."""
    target = SimRNGD()
    with ScriptedOpenAI(supports=frozenset()) as server, EmbeddedStore(Path(tempfile.mkdtemp())) as store:
        server.script(Turn(raw=body))
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, output="fenced", retries=0)
        [proposal] = LLMPolicy("architect", config, store, target).propose(kernel_view(target, O_PROJ, VERSION), 1)
        calls = store.read("MATCH (a:Activity {policy: 'llm'}) RETURN a.outcome AS outcome")
    assert proposal.error and "answered with no chat completion" in proposal.error, proposal.error
    assert calls and all(row["outcome"].startswith("error:") for row in calls), calls


def test_usage_an_endpoint_misreports_is_estimated_from_the_text_and_recorded() -> None:
    """Negative tokens were recorded as they came (llm-usage showed -15,000 tokens and a negative cost);
    no usage at all counted 0, so --token-budget never stopped such an endpoint."""
    target = SimRNGD()
    with ScriptedOpenAI(supports=frozenset()) as server, EmbeddedStore(Path(tempfile.mkdtemp())) as store:
        server.script(Turn(content="no program here", usage={"prompt_tokens": -15000, "completion_tokens": -3,
                                                            "total_tokens": -15003}),
                      Turn(content="still none", usage=None))  # fmt: skip
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, output="fenced", retries=0, attempts=2)
        policy = LLMPolicy("architect", config, store, target)
        policy.propose(kernel_view(target, O_PROJ, VERSION), 1)
        calls = store.read("MATCH (a:Activity {policy: 'llm'}) RETURN a.prompt_tokens AS p, "
                           "a.completion_tokens AS c, a.outcome AS outcome")  # fmt: skip
    assert len(calls) == 2 and all(row["p"] > 100 and row["c"] >= 2 for row in calls), calls
    assert all("usage not reported" in row["outcome"] for row in calls)
    assert policy.budget.used == sum(row["p"] + row["c"] for row in calls)


def test_a_huge_answer_is_not_sent_back_whole_with_the_next_request() -> None:
    """A user's endpoint answered 8 MB; each retry sent it back, 16.8 MB, then 33.6 MB, twelve times."""
    target = SimRNGD()
    with ScriptedOpenAI(supports=frozenset()) as server, EmbeddedStore(Path(tempfile.mkdtemp())) as store:
        server.script(say("x" * 2_000_000), say("still no program"))
        config = LLMConfig(model="openai:scripted-1", base_url=server.base_url, output="fenced", retries=0, attempts=2)
        LLMPolicy("architect", config, store, target).propose(kernel_view(target, O_PROJ, VERSION), 1)
        second = json.dumps(server.requests[1])
    assert (
        len(second) < len(json.dumps(server.requests[0])) + 100_000 and "more characters of this answer cut" in second
    )
