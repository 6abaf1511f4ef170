"""Which endpoint the LLM roles call and with which key, and what its failures say: OPENAI_BASE_URL in
the environment is another endpoint, which gets OPENAI_API_KEY only when the user names that variable
for it; an endpoint that refuses the credentials says so (not that it did not answer)."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from click.testing import CliRunner
from tenacity import RetryCallState, Retrying

from chiplore.agents.llm.config import ENDPOINT_VARIABLES, OPENAI_ENDPOINT, LLMConfig
from chiplore.agents.llm.endpoint import BACKOFF, _asked_or_backoff
from chiplore.cli import main
from chiplore.core.errors import ConfigError
from tests.llm_server import ScriptedOpenAI, Turn

O_PROJ = "sliding_attention_output"
PROVIDER_KEY = "sk-provider-0123456789abcdef"


def _init(tmp_path: Path) -> dict[str, str]:
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}
    assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0
    return env


@pytest.mark.unit
@pytest.mark.parametrize("variable", ENDPOINT_VARIABLES)
def test_openai_base_url_is_another_endpoint_that_the_providers_key_does_not_reach(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hosted = LLMConfig(model="openai:gpt-5")
    assert hosted.endpoint_for_client() == OPENAI_ENDPOINT and hosted.api_key() == PROVIDER_KEY
    monkeypatch.setenv(variable, "http://127.0.0.1:9/v1")  # OPENAI_BASE_URL, or the older OPENAI_API_BASE
    redirected = LLMConfig(model="openai:gpt-5")
    assert redirected.endpoint_for_client() == "http://127.0.0.1:9/v1"
    assert redirected.key_variable() is None and redirected.api_key() == "not-needed"
    named = LLMConfig(model="openai:gpt-5", api_key_env="OPENAI_API_KEY")  # the user sends it there on purpose
    assert named.api_key() == PROVIDER_KEY
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"gets its key from \$MY_KEY \(--api-key-env\), which is not set"):
        LLMConfig(model="openai:m", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY").api_key()


@pytest.mark.unit
def test_every_setting_can_come_from_the_environment_and_the_command_line_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CHIPLORE_LLM_PROMPT_TOKENS", "3000")
    monkeypatch.setenv("CHIPLORE_LLM_WITHHOLD", '["docs", "rules"]')
    monkeypatch.setenv("CHIPLORE_LLM_TIMEOUT_S", "600")
    config = LLMConfig(model="openai:m", timeout_s=5.0)
    assert (config.prompt_tokens, config.withhold, config.timeout_s) == (3000, ("docs", "rules"), 5.0)


def test_openai_base_url_in_the_environment_gets_the_calls_but_not_the_providers_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _init(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    with ScriptedOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        server.script(Turn(echo_auth=True))
        result = CliRunner().invoke(main, ["optimize", O_PROJ, "--budget", "30", "--architect", "llm", "--model",
                                           "openai:any"], env=env)  # fmt: skip
    assert server.authorizations, "the calls went elsewhere"
    assert all(PROVIDER_KEY not in header for header in server.authorizations)
    assert PROVIDER_KEY not in result.output


def test_refused_credentials_are_reported_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _init(tmp_path)
    monkeypatch.setenv("MY_ENDPOINT_KEY", "an-expired-key-0042")
    with ScriptedOpenAI(status=401) as server:
        result = CliRunner().invoke(main, ["optimize", O_PROJ, "--budget", "30", "--architect", "llm", "--model",
                                           "openai:any", "--base-url", server.base_url, "--api-key-env",
                                           "MY_ENDPOINT_KEY"], env=env)  # fmt: skip
    assert result.exit_code == 1, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert "refused the credentials (HTTP 401: invalid api key)" in last and "$MY_ENDPOINT_KEY" in last, last
    assert "did not answer" not in last and "Traceback" not in result.output
    # without a key named for it, the hint says why none was sent
    with ScriptedOpenAI(status=401) as server:
        result = CliRunner().invoke(main, ["optimize", O_PROJ, "--budget", "30", "--architect", "llm", "--model",
                                           "openai:any", "--base-url", server.base_url], env=env)  # fmt: skip
    assert "a custom endpoint gets one only from the variable --api-key-env names" in result.stderr


@pytest.mark.unit
@pytest.mark.parametrize(("asked", "waited"), [("3", 3.0), ("600", 60.0), ("soon", None), (None, None)])
def test_a_retry_waits_what_the_endpoint_asked_for(asked: str | None, waited: float | None) -> None:
    """A user's 429 asked for 3 s (Retry-After) and got 0.2, 0.4 and 0.8 s before the run ended."""
    headers = {"retry-after": asked} if asked is not None else {}
    error = openai.RateLimitError("slow down", body=None, response=httpx.Response(
        429, headers=headers, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")))  # fmt: skip
    state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
    state.set_exception((type(error), error, None))
    assert _asked_or_backoff(state) == (waited if waited is not None else BACKOFF(state))


@pytest.mark.unit
@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1/v1", "http://127.0.0.1:99999/v1", "http:///v1"])
def test_a_base_url_that_is_no_http_address_is_refused_before_anything_runs(url: str) -> None:
    """Found after the baseline's device time, as "Connection error.", before."""
    with pytest.raises(ValueError, match="not an http"):
        LLMConfig(model="openai:m", base_url=url)


def test_learn_with_the_llm_librarian_on_docs_the_graph_holds_says_it_read_none(tmp_path: Path) -> None:
    """A user's `learn --policy llm` after a builtin learn made no call and said nothing of it."""
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data"),
           "CHIPLORE_TARGET": "tests.toy:from_settings"}  # learnt in seconds  # fmt: skip
    assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0
    assert CliRunner().invoke(main, ["learn"], env=env).exit_code == 0
    with ScriptedOpenAI() as server:
        result = CliRunner().invoke(main, ["learn", "--policy", "llm", "--model", "openai:any", "--base-url",
                                           server.base_url], env=env)  # fmt: skip
        assert not server.requests
    assert result.exit_code == 0, result.output
    assert "the llm librarian read no page: the graph holds these" in " ".join(result.stdout.split())
