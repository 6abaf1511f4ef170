"""Secrets stay secret: the provider's key never goes to a custom endpoint, and a key a careless
server echoes back is in no output, no log and no graph property."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.cli import main
from chiplore.core.secrets import redact
from chiplore.kg.embedded_store import EmbeddedStore
from tests.llm_server import ScriptedOpenAI, Turn

O_PROJ = "sliding_attention_output"
PROVIDER_KEY = "sk-provider-0123456789abcdef"
OWN_KEY = "local-endpoint-secret-42"


def _graph_text(data_dir: Path) -> str:
    """Every property of every node, and the store's files on disk, as one text to search."""
    with EmbeddedStore(data_dir) as store:
        rows = store.read("MATCH (n) RETURN properties(n) AS p")
    files = "".join(
        p.read_text(errors="replace") for p in data_dir.rglob("*") if p.is_file() and p.stat().st_size < 5e7
    )
    return repr(rows) + files


def test_the_providers_key_is_not_sent_to_a_custom_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            ) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0
    with ScriptedOpenAI() as server:
        server.script(Turn(echo_auth=True))
        args = ["optimize", O_PROJ, "--budget", "30", "--architect", "llm", "--model", "openai:any",
                "--base-url", server.base_url]  # fmt: skip
        result = CliRunner().invoke(main, args, env=env)
    assert server.authorizations and all(PROVIDER_KEY not in a for a in server.authorizations)
    assert PROVIDER_KEY not in result.output
    assert PROVIDER_KEY not in _graph_text(tmp_path / "data")


def test_an_echoed_key_is_redacted_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ENDPOINT_KEY", OWN_KEY)
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0
    with ScriptedOpenAI() as server:
        server.script(Turn(echo_auth=True))
        result = CliRunner().invoke(main, ["optimize", O_PROJ, "--budget", "30", "--architect", "llm",
                                           "--model", "openai:any", "--base-url", server.base_url,
                                           "--api-key-env", "MY_ENDPOINT_KEY"], env=env)  # fmt: skip
    assert any(OWN_KEY in a for a in server.authorizations)  # the endpoint it belongs to gets it
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and "***" in last, result.stderr
    assert OWN_KEY not in result.output and "Traceback" not in result.output
    assert OWN_KEY not in _graph_text(tmp_path / "data")


def test_redaction_masks_known_values_bearer_tokens_and_uri_passwords() -> None:
    text = "Bearer abcdefgh12345678 at bolt://neo4j:hunter2@db:7687 with sk-ABCDEFGHIJKLMNOP and s3cr3t!"
    masked = redact(text, ["s3cr3t!"])
    for secret in ("abcdefgh12345678", "hunter2", "sk-ABCDEFGHIJKLMNOP", "s3cr3t!"):
        assert secret not in masked
    assert "bolt://neo4j:***@db:7687" in masked
