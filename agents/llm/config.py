"""How a role's model is reached: LangChain's `provider:model` name, an optional OpenAI-compatible
base URL (vLLM, llama.cpp, Ollama), the key from the environment only, and the run's token budget.

A key goes only to the endpoint it belongs to: the provider's own variable (OPENAI_API_KEY) is sent
to the provider, never to a custom base URL; a custom endpoint gets a key only from a variable the
user names for it (`api_key_env`)."""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from chiplore.core.errors import ConfigError
from chiplore.core.secrets import redact, secrets_from_environment

DEFAULT_KEY_VARIABLE = "OPENAI_API_KEY"


class LLMConfig(BaseModel):
    model: str = "openai:gpt-5-mini"
    base_url: str | None = None  # any OpenAI-compatible server
    api_key_env: str | None = None  # the variable holding the key (default: OPENAI_API_KEY, for OpenAI itself)
    temperature: float = Field(0.2, ge=0, le=2)
    timeout_s: float = Field(120.0, gt=0)  # one model call
    retries: int = Field(3, ge=0)  # a timed-out or failed call, with backoff, before the endpoint is given up
    attempts: int = Field(3, ge=1)  # a malformed or illegal answer goes back to the model this many times
    max_steps: int = Field(16, ge=2)  # model calls and tool calls of one proposal
    token_budget: int = Field(400_000, ge=0)  # prompt + completion tokens of the run; 0: unlimited
    summary_tokens: int = Field(6_000, ge=0)  # the language summary's share of each prompt; 0: unlimited
    usd_per_mtok_in: float = 0.0  # prices for the cost estimate (USD per million tokens)
    usd_per_mtok_out: float = 0.0

    def key_variable(self) -> str | None:
        """Which variable's key this endpoint gets: the one named, else the provider's for its own endpoint."""
        if self.api_key_env:
            return self.api_key_env
        return None if self.base_url else DEFAULT_KEY_VARIABLE

    def api_key(self) -> str:
        variable = self.key_variable()
        key = os.environ.get(variable) if variable else None
        if key:
            return key
        if self.base_url and not self.api_key_env:  # a local server usually wants none
            return "not-needed"
        raise ConfigError(f"the LLM policy needs an API key in ${variable} (or --base-url for a local server)")

    def redact(self, text: str) -> str:
        """`text` without this configuration's key (or any other known secret) in it."""
        return redact(text, secrets_from_environment([self.api_key_env] if self.api_key_env else []))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.usd_per_mtok_in + completion_tokens * self.usd_per_mtok_out) / 1e6
