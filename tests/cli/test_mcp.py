"""`chiplore mcp` driven by the official MCP SDK's client over stdio, as an MCP client (an IDE, a
model's tool host) would: the tools it lists, a read (a WITH-led one too), a write refused in words,
a runaway stopped at the server's timeout with the server still answering; on both stores."""

from __future__ import annotations

import asyncio
import json
import os
import re
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
    json.dumps(seen, default=str)  # every answer is plain data
