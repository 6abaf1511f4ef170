"""The real-model tier: chiplore's LLM roles against a real model on a local OpenAI-compatible server
(scripts/llm-local: llama.cpp's server with SmolLM2-135M-Instruct, both from PyPI, cached under
~/.cache/chiplore/llm-local). Its tests are marked `llm` and `slow`, and are skipped unless asked for:
`scripts/test -m llm` (or CHIPLORE_TEST_LLM=1). A first run installs the server and the model
(about a minute); each test then takes minutes on two cores (see README). CHIPLORE_TEST_LLM_NAME
names the server instance (default `pytest`), so that concurrent sessions each get their own.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIER = Path(__file__).resolve().parent
TIMEOUT_S = 3600  # a test of this tier makes a few model calls of minutes each on a busy machine


def _asked(config: pytest.Config) -> bool:
    expression = str(config.getoption("markexpr") or "")
    return os.environ.get("CHIPLORE_TEST_LLM") == "1" or ("llm" in expression and "not llm" not in expression)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """This folder's tests are the `llm` tier: marked, and skipped unless asked for."""
    skip = pytest.mark.skip(reason="the real-model tier: run it with -m llm (or CHIPLORE_TEST_LLM=1)")
    for item in items:
        if TIER in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.llm)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.timeout(TIMEOUT_S))
            if not _asked(config):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def local_llm() -> Iterator[str]:
    """The base URL of a local model server, started for the session (installed the first time)."""
    name = os.environ.get("CHIPLORE_TEST_LLM_NAME", "pytest")
    command = [str(ROOT / "scripts" / "llm-local")]
    started = subprocess.run([*command, "start", "--name", name], capture_output=True, text=True, timeout=900)
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([*command, "stop", "--name", name], capture_output=True, timeout=60)
