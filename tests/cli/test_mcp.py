"""`chiplore mcp` driven by the official MCP SDK's client over stdio, as an MCP client (an IDE, a
model's tool host) would: the tools it lists, a read (a WITH-led one too), a write refused in words,
a runaway stopped at the server's timeout with the server still answering; on both stores."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from chiplore.cli import main
from chiplore.mcp_server import WRITE_REFUSED

pytestmark = pytest.mark.server

TIMEOUT_S = 2.0
# Past any timeout with little memory: rows Neo4j stops; a string FalkorDB grows quadratically, which
# the embedded store ends by restarting its server (FalkorDB cannot interrupt one expression).
RUNAWAY = {"neo4j": "UNWIND range(1, 1000000000) AS x WITH x WHERE x < 0 RETURN count(*) AS n",
           "embedded": "RETURN reduce(s = '', x IN range(1, 2000000) | s + 'aaaaaaaaaa') AS s"}  # fmt: skip
TOOLS = {"cypher", "named_query", "list_queries", "status", "design_tree", "best_program", "parameter_keys"}


@pytest.fixture(params=["embedded", "neo4j"])
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    env: dict[str, str] = request.getfixturevalue(f"{request.param}_env")
    result = CliRunner().invoke(main, ["init"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return env


def answer(result: Any) -> tuple[bool, Any]:
    """A tool call's error flag and its value: the structured result, else the text chiplore wrote."""
    if result.structured_content is not None and not result.is_error:
        content = result.structured_content
        return False, content.get("result", content)
    text = "".join(getattr(part, "text", "") for part in result.content)
    return bool(result.is_error), re.sub(r"^Error executing tool \w+: ", "", text)  # the SDK's framing


async def session_calls(env: dict[str, str]) -> dict[str, Any]:
    args = ["-m", "chiplore.cli", "mcp", "--timeout", str(TIMEOUT_S)]
    server = StdioServerParameters(command=sys.executable, args=args, env={**os.environ, **env})
    seen: dict[str, Any] = {}
    with open(os.devnull, "w") as errors:
        async with stdio_client(server, errlog=errors) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            seen["tools"] = {tool.name for tool in (await session.list_tools()).tools}
            seen["with"] = answer(await session.call_tool("cypher", {"query": "WITH 1 AS x RETURN x, 'a' AS y"}))
            seen["params"] = answer(await session.call_tool("cypher", {"query": "RETURN $v AS v", "params": {"v": 7}}))
            seen["write"] = answer(await session.call_tool("cypher", {"query": "CREATE (:Hostile {k: 1})"}))
            seen["no_rows"] = answer(await session.call_tool("cypher", {"query": "RETURN 1 AS x", "max_rows": 0}))
            started = time.monotonic()
            seen["runaway"] = answer(await session.call_tool("cypher", {"query": RUNAWAY[env["CHIPLORE_STORE"]]}))
            seen["runaway_s"] = time.monotonic() - started
            after = "MATCH (h:Hostile) RETURN count(h) AS n"
            seen["after"] = answer(await session.call_tool("cypher", {"query": after}))
            seen["queries"] = answer(await session.call_tool("list_queries"))
            seen["status"] = answer(await session.call_tool("status"))
            seen["unknown"] = answer(await session.call_tool("design_tree", {"kernel": "no_such_kernel"}))
            bad_args = await session.call_tool("cypher", {"query": 5, "max_rows": "many"})
            seen["bad_args"] = answer(bad_args)
            seen["bad_args_text"] = "".join(getattr(part, "text", "") for part in bad_args.content)
            seen["too_many"] = answer(await session.call_tool("cypher", {"query": "RETURN 1 AS x", "max_rows": 5000}))
            seen["misnamed"] = answer(await session.call_tool("named_query", {"name": "stale-facts", "parameters": {}}))
            not_finite = await session.call_tool("cypher", {"query": "RETURN 1.0/0.0 AS inf"})
            seen["inf"] = (answer(not_finite), json.loads(not_finite.content[0].text))  # structured and text alike
    return seen


def test_an_mcp_client_reads_the_graph_and_cannot_write_or_hold_the_server(env: dict[str, str]) -> None:
    seen = asyncio.run(asyncio.wait_for(session_calls(env), timeout=300))
    assert seen["tools"] == TOOLS
    assert seen["with"] == (False, {"columns": ["x", "y"], "rows": [{"x": 1, "y": "a"}], "truncated": False,
                                    "cut_reason": None})  # fmt: skip
    assert seen["params"][1]["rows"] == [{"v": 7}]
    assert seen["write"] == (True, WRITE_REFUSED)
    assert seen["no_rows"] == (True, "refused: max_rows is 0; ask for 1 to 1000")  # the CLI refuses it too
    failed, message = seen["runaway"]
    assert failed and message.startswith("failed: ") and "\n" not in message and "--timeout" in message, message
    assert "CHIPLORE_QUERY_TIMEOUT_S" not in message  # the CLI's setting: this server's limit is its --timeout
    assert "CALL {" not in message  # the user's query, never chiplore's wrapper
    assert seen["runaway_s"] < TIMEOUT_S + 10.0
    assert seen["after"] == (False, {"columns": ["n"], "rows": [{"n": 0}], "truncated": False, "cut_reason": None})
    failed, queries = seen["queries"]
    assert not failed and {"accepted-changes"} <= {q["name"] for q in queries}, queries
    assert seen["status"][0] is False and isinstance(seen["status"][1], list)
    failed, message = seen["unknown"]
    assert failed and "no_such_kernel" in message and "Traceback" not in message, message
    assert seen["bad_args"] == (True, "refused: cypher: query: Input should be a valid string (got 5); "
                                      "max_rows: Input should be a valid integer, unable to parse string as an "
                                      "integer (got 'many')")  # fmt: skip
    assert seen["misnamed"] == (True, "refused: named_query: no argument 'parameters' (it takes name, params)")
    # framed as the SDK frames a tool's other errors (they came bare), and no cap lowered without a word
    assert seen["bad_args_text"].startswith("Error executing tool cypher: refused: cypher: query:")
    assert seen["too_many"] == (True, "refused: max_rows is 5000; ask for 1 to 1000")
    (failed, structured), text = seen["inf"]
    assert not failed and structured["rows"] == [{"inf": None}] and text["rows"] == [{"inf": None}]
    json.dumps(seen, default=str)  # every answer is plain data


def test_a_line_that_is_no_json_rpc_message_gets_json_rpc_s_error_and_the_server_goes_on(
    embedded_env: dict[str, str],
) -> None:
    """A client that writes a broken line hears why instead of waiting for an answer that never
    comes; the lines after it are served (the transport, not the store, is the subject)."""
    assert CliRunner().invoke(main, ["init"], env=embedded_env).exit_code == 0
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "this is not json", "[1, 2]", {"jsonrpc": "2.0", "id": 7, "method": 5},
        {"jsonrpc": "2.0", "id": 0, "result": 5},  # a broken response: never answered (the client's id 0 is its own)
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "cypher", "arguments": {"query": "RETURN 1 AS x"}}},
    ]  # fmt: skip
    server = subprocess.Popen([sys.executable, "-m", "chiplore.cli", "mcp"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **embedded_env})  # fmt: skip
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:  # stdin stays open until the answers are in, as a client's does (EOF ends the session)
        server.stdin.write("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline() or "null") for _ in range(5)]
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    errors = server.stderr.read()
    assert [a["id"] for a in answers] == [1, None, None, 7, 2], answers
    assert [a.get("error", {}).get("code") for a in answers] == [None, -32700, -32600, -32600, None]
    assert "Traceback" not in errors, errors
    assert answers[-1]["result"]["structuredContent"]["rows"] == [{"x": 1}]
