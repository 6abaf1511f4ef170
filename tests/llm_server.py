"""A loopback HTTP server that speaks the OpenAI chat-completions API with scripted answers: what the
LLM-path tests point chiplore's production LangChain code at (no network, no mock of our own code).

Each request takes the next scripted turn: a plain answer, tool calls, an HTTP error, or a delay
longer than the client's timeout. Every request body is kept, so a test can see what the model was
sent (the tool results fed back, the prompts).

It plays an endpoint with the features of a real one: `supports` says which structured outputs it
honours (function calling, JSON mode with a schema, any JSON object); a request asking for another
is refused with HTTP 400 (`unsupported="refuse"`, as vLLM or a proxy does) or served as if it had
not asked (`unsupported="ignore"`, as llama.cpp serves tools to a model whose chat template has
none). The policy's probes of those features (`chiplore.agents.llm.output`) are answered as that
endpoint would, outside the script: they take no turn, are kept apart (`probes`) and report no
tokens, so the scripted turns and token budgets of a test stay as they were. `status` answers every
request with that HTTP status (401: an endpoint that wants another key).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from chiplore.agents.llm.output import PROBE_MARK

FEATURES = frozenset({"tools", "json_schema", "json_object"})


@dataclass(frozen=True)
class Turn:
    content: str | None = None
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # (tool name, arguments)
    status: int = 200
    delay_s: float = 0.0
    prompt_tokens: int = 120
    completion_tokens: int = 40
    echo_auth: bool = False  # answer 401 quoting the request's Authorization header (a careless server)
    raw: bytes | None = None  # an HTTP 200 with this body as it is (no chat completion: an endpoint gone wrong)
    usage: Any = "counted"  # the answer's usage: its tokens ("counted"), left out (None), or this value


def say(content: str) -> Turn:
    return Turn(content=content)


def call(name: str, /, **arguments: Any) -> Turn:  # a tool may take an argument called `name`
    return Turn(tool_calls=((name, arguments),))


@dataclass
class ScriptedOpenAI:
    turns: list[Turn] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)  # each request's Authorization header
    model: str = "scripted-1"
    supports: frozenset[str] = FEATURES  # the structured outputs the endpoint honours
    unsupported: Literal["refuse", "ignore"] = "refuse"  # a request for another: HTTP 400, or served as plain
    status: int = 200  # every request answered with this status when not 200
    probes: list[dict[str, Any]] = field(default_factory=list)  # the feature probes, answered outside the script

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, *turns: Turn) -> None:
        with self._lock:
            self.turns.extend(turns)

    def _next(self, body: dict[str, Any]) -> Turn:
        with self._lock:
            self.requests.append(body)
            if not self.turns:
                return Turn(content="(the script has no more answers)", status=500)
            return self.turns.pop(0)

    def _probe(self, body: dict[str, Any], asked: set[str]) -> Turn:
        """A probe answered as the endpoint would: a call of its tool, the JSON asked for, or prose."""
        if "tools" in asked and "tools" in self.supports:
            name = body["tools"][0]["function"]["name"]
            return Turn(tool_calls=((name, {"word": "ready"}),), prompt_tokens=0, completion_tokens=0)
        if asked & self.supports:
            return Turn(content='{"word": "ready"}', prompt_tokens=0, completion_tokens=0)
        return Turn(content="Ready! How can I help you today?", prompt_tokens=0, completion_tokens=0)

    def _answer(self, turn: Turn) -> dict[str, Any]:
        with self._lock:
            self._count += 1
            count = self._count
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{count}_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
                for i, (name, arguments) in enumerate(turn.tool_calls)
            ]  # fmt: skip
        answer = {
            "id": f"chatcmpl-{count}", "object": "chat.completion", "created": int(time.time()), "model": self.model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": {"prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens,
                      "total_tokens": turn.prompt_tokens + turn.completion_tokens},
        }  # fmt: skip
        if turn.usage is None:
            del answer["usage"]
        elif turn.usage != "counted":
            answer["usage"] = turn.usage
        return answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                outer.authorizations.append(self.headers.get("authorization", ""))
                if outer.status != 200:
                    outer.requests.append(body)
                    self._send(outer.status, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                    return
                asked = requested_features(body)
                if is_probe(body):
                    with outer._lock:
                        outer.probes.append(body)
                if asked - outer.supports and outer.unsupported == "refuse":
                    what = ", ".join(sorted(asked - outer.supports))
                    self._send(400, {"error": {"message": f"{what} not supported", "type": "invalid_request_error"}})
                    return
                if is_probe(body):
                    self._send(200, outer._answer(outer._probe(body, asked)))
                    return
                turn = outer._next(body)
                if turn.echo_auth:
                    message = f"invalid credentials: {self.headers.get('authorization', '')}"
                    self._send(401, {"error": {"message": message, "type": "invalid_request_error"}})
                    return
                if turn.delay_s:
                    time.sleep(turn.delay_s)
                if turn.status != 200:
                    self._send(
                        turn.status, {"error": {"message": turn.content or "scripted failure", "type": "server"}}
                    )
                    return
                self._send(200, turn.raw if turn.raw is not None else outer._answer(turn))

            def _send(self, status: int, payload: dict[str, Any] | bytes) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        return Handler


def requested_features(body: dict[str, Any]) -> set[str]:
    """The structured outputs a chat-completions request asks for."""
    asked = {"tools"} if body.get("tools") else set()
    kind = (body.get("response_format") or {}).get("type")
    return asked | ({kind} if kind in FEATURES else set())


def is_probe(body: dict[str, Any]) -> bool:
    return any(PROBE_MARK in str(m.get("content") or "") for m in body.get("messages", []) if m["role"] == "system")
