"""Two `chiplore optimize` processes on one data dir: they share the work and the budget, and the
graph stays whole (one design per program, every run linked, BEST accepted, the ledger the sum of
its runs, nothing measured twice, no decided design still held)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.integrity import violations
from tests.helpers import QUICK_SEARCH

pytestmark = pytest.mark.slow  # the fast tier leaves this module out

O_PROJ = "sliding_attention_output"
BUDGET_S = 90.0


def _cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "chiplore.cli", *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def test_two_optimize_runs_on_one_graph_share_the_work_and_corrupt_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data"), **QUICK_SEARCH}
    assert _cli(env, "init").wait(timeout=120) == 0
    learnt = _cli(env, "learn", "--json")
    assert learnt.wait(timeout=300) == 0, learnt.stderr.read() if learnt.stderr else ""
    with EmbeddedStore(tmp_path / "data") as store:
        before = store.read("MATCH (l:DeviceLedger {consumer: $k}) RETURN l.device_s AS s", {"k": O_PROJ})
    assert not before  # nothing spent on the kernel yet
    runs = [_cli(env, "optimize", O_PROJ, "--budget", str(BUDGET_S), "--json") for _ in range(2)]
    outputs = [run.communicate(timeout=900) for run in runs]
    for run, (out, err) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, err
        assert json.loads(out)["kernels"][0]["kernel"] == O_PROJ
    # the run that found the other measuring the baseline waited for it and joined the work
    summaries = [json.loads(out) for out, _ in outputs]
    assert all("measuring the baseline" not in reason for s in summaries for reason in s["stopped"].values())
    assert all(s["proposals"] > 0 for s in summaries), summaries
    with EmbeddedStore(tmp_path / "data") as store:
        assert violations(store) == []
        spent = store.read("MATCH (l:DeviceLedger {consumer: $k}) RETURN l.device_s AS s", {"k": O_PROJ})[0]["s"]
        owners = store.read("MATCH (d:DesignNode {kernel: $k}) WHERE d.status IN ['proposed', 'queued', 'measured'] "
                            "RETURN count(d) AS n", {"k": O_PROJ})  # fmt: skip
    # one budget for both: each may overshoot it by the job that crossed it (a few device-seconds)
    assert spent <= BUDGET_S + 2 * 10.0, spent
    assert owners[0]["n"] <= 2  # at most what each run's last job left measured when the budget stopped it
