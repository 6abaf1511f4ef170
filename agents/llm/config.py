"""How a role's model is reached: LangChain's `provider:model` name, an optional OpenAI-compatible
endpoint (vLLM, llama.cpp, Ollama), the key from the environment only, the run's token budget, and
what a small model needs (a prompt that fits its context, a cap on each answer).

A key goes only to the endpoint it belongs to: the provider's own variable (OPENAI_API_KEY) is sent
to the provider's own endpoint, never to another; any other endpoint gets a key only from a variable
the user names for it (`api_key_env`). Another endpoint is `base_url`, or, when that is not given,
OPENAI_BASE_URL (or OPENAI_API_BASE) in the environment: the OpenAI client would follow those on its
own, so chiplore names the endpoint itself on every call and applies the same rule to them.

Every field can also be set in the environment as CHIPLORE_LLM_<FIELD> (CHIPLORE_LLM_PROMPT_TOKENS=3000);
what a command line passes wins."""

from __future__ import annotations

import hashlib
import os
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from chiplore.core.errors import ConfigError
from chiplore.core.secrets import redact, redact_uri, secrets_from_environment

DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"
OPENAI_ENDPOINT = "https://api.openai.com/v1"
ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_BASE")  # what the OpenAI client and LangChain follow

# The kinds of knowledge a prompt carries, each of which a run may withhold (the benchmark's ablation).
KnowledgeKind = Literal["summary", "rules", "measurements", "docs"]
KNOWLEDGE_KINDS: tuple[KnowledgeKind, ...] = ("summary", "rules", "measurements", "docs")

# How a model answers with structure, best first: function calling, JSON mode with the answer's
# schema, any JSON object, a fenced block of code in prose.
OutputMode = Literal["tools", "json_schema", "json_object", "fenced"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("tools", "json_schema", "json_object", "fenced")


class LLMConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHIPLORE_LLM_", extra="forbid", frozen=True)

    model: str = "openai:gpt-5-mini"
    base_url: str | None = None  # any OpenAI-compatible server
    api_key_env: str | None = None  # the variable holding the key (default: OPENAI_API_KEY, for OpenAI itself)
    temperature: float = Field(0.2, ge=0, le=2)
    seed: int | None = None  # sampling seed, for endpoints that take one (the benchmark's runs)
    timeout_s: float = Field(120.0, gt=0)  # one model call
    retries: int = Field(3, ge=0)  # a timed-out or failed call, with backoff, before the endpoint is given up
    attempts: int = Field(3, ge=1)  # a malformed or illegal answer goes back to the model this many times
    max_steps: int = Field(16, ge=2)  # model calls and tool calls of one proposal
    token_budget: int = Field(400_000, ge=0)  # prompt + completion tokens of the run; 0: unlimited
    summary_tokens: int = Field(6_000, ge=0)  # the language summary's share of each prompt; 0: unlimited
    # the most a role's prompt may take, in approximate tokens (characters / 4), so that it fits a small
    # model's context: the knowledge is cut to fit, the least first; 0: unlimited
    prompt_tokens: int = Field(0, ge=0)
    max_tokens: int = Field(0, ge=0)  # the most one answer may take; 0: the endpoint's own limit
    # structured output: "auto" discovers what the endpoint supports, once per model and endpoint
    output: Literal["auto", "tools", "json_schema", "json_object", "fenced"] = "auto"
    withhold: tuple[KnowledgeKind, ...] = ()  # knowledge left out of the prompts and the tools (ablations)
    usd_per_mtok_in: float = Field(0.0, ge=0)  # prices for the cost estimate (USD per million tokens)
    usd_per_mtok_out: float = Field(0.0, ge=0)

    @field_validator("base_url")
    @classmethod
    def _an_http_address(cls, url: str | None) -> str | None:
        """Refused before anything runs: "not a url", ftp://..., port 99999 were found only after the
        baseline's device time, as "Connection error."."""
        if url is None:
            return None
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise ValueError("not an http(s) address with a host (and a port from 1 to 65535), such as "
                             "http://127.0.0.1:8000/v1")  # fmt: skip
        return url

    def endpoint(self) -> str | None:
        """The endpoint other than the provider's own that the calls go to, if any."""
        if self.base_url:
            return self.base_url
        return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)

    def endpoint_for_client(self) -> str | None:
        """The base URL every call names: the custom endpoint, or OpenAI's own for an OpenAI model
        (so that an OPENAI_BASE_URL set later, or read by the client itself, changes nothing)."""
        if self.endpoint():
            return self.endpoint()
        return OPENAI_ENDPOINT if self.provider() == "openai" else None

    def provider(self) -> str:
        return self.model.split(":", 1)[0] if ":" in self.model else "openai"

    def where(self) -> str:
        """The endpoint as messages name it (a password in it masked)."""
        endpoint = self.endpoint()
        return redact_uri(endpoint) if endpoint else self.model

    def key_variable(self) -> str | None:
        """Which variable's key this endpoint gets: the one named, else the provider's for its own endpoint."""
        if self.api_key_env:
            return self.api_key_env
        return None if self.endpoint() else DEFAULT_KEY_VARIABLE

    def api_key(self) -> str:
        variable = self.key_variable()
        key = os.environ.get(variable) if variable else None
        if key:
            return key
        if self.endpoint() and not self.api_key_env:  # a local server usually wants none
            return "not-needed"
        if self.endpoint():  # --api-key-env named a variable that is not set
            raise ConfigError(f"the endpoint at {self.where()} gets its key from ${variable} (--api-key-env), which "
                              "is not set")  # fmt: skip
        raise ConfigError(f"the LLM policy needs an API key in ${variable} (or --base-url for a local server)")

    def key_hint(self) -> str:
        """What to check when the endpoint refuses the credentials."""
        if self.api_key_env:
            return f"check the key in ${self.api_key_env}"
        if self.endpoint():
            return ("this endpoint got no key: a custom endpoint gets one only from the variable --api-key-env "
                    f"names ({DEFAULT_KEY_VARIABLE} goes only to OpenAI itself)")  # fmt: skip
        return f"check the key in ${DEFAULT_KEY_VARIABLE}"

    def identity(self) -> str:
        """The model and its endpoint, as a short stable hash (what a discovery is recorded under)."""
        return hashlib.sha256(f"{self.model}|{self.endpoint_for_client() or ''}".encode()).hexdigest()[:16]

    def redact(self, text: str) -> str:
        """`text` without this configuration's key (or any other known secret) in it."""
        return redact(text, secrets_from_environment([self.api_key_env] if self.api_key_env else []))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.usd_per_mtok_in + completion_tokens * self.usd_per_mtok_out) / 1e6
