"""`chiplore learn --policy llm` and `chiplore optimize --policy llm` on a real (tiny) model, on both
stores: nothing crashes, the structured output the endpoint supports is discovered and recorded,
every answer the loop cannot use is a recorded failure with its reason, and the loop goes on to its
own stop. Small budgets: a few model calls per command (SmolLM2-135M writes no working Ferrite; what
it is worth is benchmarks/llm_policy.py's to measure, not this test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.cli import main
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.store import GraphStore
from tests.conftest import Neo4jServer, wipe_neo4j

MODEL = "openai:smollm2-135m-instruct"
KERNEL = "sliding_attention_output"
# What a small model on two cores affords: a short prompt (SmolLM2 has 8k tokens of context and its
# tokenizer takes about two characters a token on this text), short answers, slow calls.
LLM_ENV = {"CHIPLORE_LLM_PROMPT_TOKENS": "700", "CHIPLORE_LLM_MAX_TOKENS": "128", "CHIPLORE_LLM_TIMEOUT_S": "1800",
           "CHIPLORE_LLM_RETRIES": "1", "CHIPLORE_LLM_ATTEMPTS": "1", "CHIPLORE_LLM_SEED": "0"}  # fmt: skip
FAILURES = ("malformed answer", "illegal program", "the endpoint refused the request", "no answer within")


def _env(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    env = {**LLM_ENV, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    if backend == "neo4j":
        server: Neo4jServer = request.getfixturevalue("neo4j_server")
        store = server.store()
        wipe_neo4j(store)
        store.close()
        env |= server.env()
    return env


def _graph(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> GraphStore:
    if backend == "neo4j":
        server: Neo4jServer = request.getfixturevalue("neo4j_server")
        return server.store()
    return EmbeddedStore(tmp_path / "data")


@pytest.mark.parametrize("backend", ["embedded", "neo4j"])
def test_learn_and_optimize_go_end_to_end_on_a_real_model(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, local_llm: str
) -> None:
    env = _env(backend, tmp_path, request)
    runner = CliRunner()
    llm = ["--policy", "llm", "--model", MODEL, "--base-url", local_llm]
    assert runner.invoke(main, ["init"], env=env).exit_code == 0
    learnt = runner.invoke(main, ["learn", *llm, "--budget", "120", "--token-budget", "1500", "--json"], env=env)
    assert learnt.exit_code == 0, learnt.output
    optimized = runner.invoke(main, ["optimize", KERNEL, *llm, "--budget", "200", "--patience", "1",
                                     "--token-budget", "2000", "--json"], env=env)  # fmt: skip
    assert optimized.exit_code == 0, optimized.output
    assert "Traceback" not in learnt.output + optimized.output
    stopped = json.loads(optimized.stdout)
    with _graph(backend, tmp_path, request) as graph:
        modes = graph.read("MATCH (a:Activity {policy: 'llm-output'}) RETURN a.outcome AS o, a.model AS m")
        calls = graph.read("MATCH (a:Activity {policy: 'llm'}) WHERE a.model IS NOT NULL "
                           "RETURN a.role AS role, a.outcome AS outcome, a.prompt_tokens AS p")  # fmt: skip
        designs = graph.read("MATCH (d:DesignNode {kernel: $k, policy: 'llm'}) RETURN d.status AS s, d.reason AS r",
                             {"k": KERNEL})  # fmt: skip
        pages = graph.read("MATCH (a:Activity {policy: 'llm-answer'}) RETURN a.outcome AS o")
    # the endpoint's structured output was discovered once, and said how
    assert len(modes) == 1 and modes[0]["m"] == MODEL and modes[0]["o"].startswith("structured output: "), modes
    # the librarian and the proposers called the model, and each call is recorded with its outcome
    roles = {row["role"] for row in calls}
    assert "librarian" in roles and roles & {"architect", "refiner"}, calls
    assert all(row["outcome"] == "ok" or row["outcome"].startswith("error: ") for row in calls)
    # every page the model could not answer for is recorded with why
    assert all(row["o"].startswith(("malformed answer", "the endpoint refused")) for row in pages)
    # every LLM design is in the tree; each one the loop could not use says why
    assert designs, "the LLM roles proposed nothing"
    for row in designs:
        if row["s"] == "failed":
            assert row["r"] and row["r"].startswith(FAILURES), row
    assert KERNEL in json.dumps(stopped)
