"""One call to a model endpoint, and what its failures mean for the run.

A call that times out, cannot connect, or meets a 429 or a 5xx is retried with backoff; past the
retries the endpoint did not answer (LLMUnavailable), which ends the run with one line. An endpoint
that refuses the credentials (401, 403) says so (LLMAuthFailed), and one without the model or the
route (404) too: neither improves by asking again. An endpoint that refuses one request (400, 413,
422: a prompt past the context, a parameter it does not take) refused that request only
(LLMRefused): the caller records it as a failure and the run goes on."""

from __future__ import annotations

import sysconfig
from collections.abc import Callable
from typing import TypeVar

import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from chiplore.agents.llm.config import LLMConfig
from chiplore.core.errors import ChiploreError

T = TypeVar("T")
REFUSED_STATUSES = frozenset({400, 413, 422})


class LLMUnavailable(ChiploreError):
    """The model endpoint did not answer (closed port, dead server, timeouts past the retries)."""


class LLMAuthFailed(LLMUnavailable):
    """The endpoint refused the credentials (HTTP 401 or 403)."""


class LLMRefused(ChiploreError):
    """The endpoint refused one request (HTTP 400, 413 or 422); others may pass."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def transient(error: BaseException) -> bool:
    """Whether asking again may help: a connection that failed or timed out, a 429 or a 5xx."""
    if isinstance(error, openai.APIConnectionError):  # refused, reset, timed out
        return True
    return isinstance(error, openai.APIStatusError) and (error.status_code >= 500 or error.status_code == 429)


def call(fn: Callable[[], T], config: LLMConfig, *, retry_status: bool = True) -> T:
    """`fn()` (one request to the endpoint, or one agent run), retried while the endpoint fails in a
    way that may pass, its failures turned into chiplore's errors. With `retry_status` off, only a
    failed connection is retried and every status but 401, 403 and 404 is a refusal (a probe of what
    the endpoint supports: a 500 there means it does not)."""
    retry = transient if retry_status else (lambda error: isinstance(error, openai.APIConnectionError))
    retrying = Retrying(retry=retry_if_exception(retry), stop=stop_after_attempt(config.retries + 1),
                        wait=_asked_or_backoff, reraise=True)  # fmt: skip
    try:
        for attempt in retrying:
            with attempt:
                return fn()
    except openai.APIStatusError as error:
        raise _status_error(error, config, retry_status) from None
    except openai.APIConnectionError as error:
        raise LLMUnavailable(
            config.redact(f"the model at {config.where()} did not answer: {type(error).__name__}: {error}")
        ) from None
    except (ValueError, TypeError, LookupError, AttributeError) as error:
        if not _reading_the_answer(error):
            raise
        # an HTTP 200 that is no chat completion (an empty body, an HTML page, no choices, a stream
        # nobody asked for, bytes that are no UTF-8): that request failed, as a refused one does
        said = config.redact(" ".join(f"{type(error).__name__}: {error}".split()))[:300]
        raise LLMRefused(f"the model at {config.where()} answered with no chat completion ({said})", 200) from None
    raise AssertionError("unreachable")


BACKOFF = wait_exponential(multiplier=0.2, max=5.0)
RETRY_AFTER_MAX_S = 60.0  # the most a 429's or 503's Retry-After is waited


def _asked_or_backoff(state: RetryCallState) -> float:
    """The wait the endpoint asked for (Retry-After, in seconds, on a 429 or a 503), else the backoff: a
    user's 429 asked for 3 s and got 0.2, 0.4 and 0.8 s, then the run ended."""
    error = state.outcome.exception() if state.outcome is not None else None
    if isinstance(error, openai.APIStatusError):
        asked = error.response.headers.get("retry-after", "")
        try:
            seconds = float(asked)
        except ValueError:
            seconds = -1.0
        if seconds >= 0:
            return min(seconds, RETRY_AFTER_MAX_S)
    return BACKOFF(state)


ANSWER_READERS = ("openai", "langchain_openai", "langchain_core", "httpx", "httpx2")  # read an endpoint's answer
_STDLIB = sysconfig.get_paths()["stdlib"]


def _reading_the_answer(error: BaseException) -> bool:
    """Whether an error was raised while the client read the endpoint's answer: the innermost frame
    outside the standard library (`json`, `codecs` raise for the client) is one of its packages', not
    chiplore's own code inside the call."""
    frame, last = error.__traceback__, ""
    while frame is not None:
        path = frame.tb_frame.f_code.co_filename.replace("\\", "/")
        if not path.startswith(_STDLIB) or "/site-packages/" in path:
            last = path
        frame = frame.tb_next
    return any(f"/{package}/" in last for package in ANSWER_READERS)


def _status_error(error: openai.APIStatusError, config: LLMConfig, retry_status: bool) -> ChiploreError:
    status, said = error.status_code, config.redact(_message(error))
    where = config.where()
    if status in (401, 403):
        return LLMAuthFailed(f"the model at {where} refused the credentials (HTTP {status}: {said}); "
                             f"{config.key_hint()}")  # fmt: skip
    if status == 404:
        return LLMUnavailable(f"the endpoint at {where} has no model {config.model!r} or no chat completions "
                              f"route (HTTP 404: {said}); check --model and --base-url (an OpenAI-compatible "
                              "one usually ends in /v1)")  # fmt: skip
    if status in REFUSED_STATUSES or not retry_status:
        return LLMRefused(f"HTTP {status}: {said}", status)
    return LLMUnavailable(f"the model at {where} did not answer: HTTP {status}: {said}")


def _message(error: openai.APIStatusError) -> str:
    """The endpoint's own words, one line of them."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else inner
        if text:
            return " ".join(str(text).split())[:300]
    return " ".join(str(error.message).split())[:300]
