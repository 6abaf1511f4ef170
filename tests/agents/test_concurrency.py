"""Two `chiplore optimize` processes on one data dir: they share the work and the budget, and the
graph stays whole (one design per program, every run linked, BEST accepted, the ledger the sum of
its runs, nothing measured twice, no decided design still held)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chiplore.agents.proposers import BuiltinArchitect
from chiplore.agents.proposers.search import SearchBudget
from chiplore.agents.schedule import Roles
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import Activity, DeviceRun
from chiplore.kg.repo.integrity import violations
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.repo.runs import record_device_runs
from chiplore.kg.store import GraphStore
from chiplore.session import Session
from chiplore.simulator.target import SimRNGD
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


class _BesideAnotherRun:
    """The builtin architect, and another run on the graph that, as the first kernel is designed, has
    spent past that kernel's share and part of the second kernel's."""

    role, name = "architect", "builtin"

    def __init__(self, store: GraphStore, spent: dict[str, float]) -> None:
        predictions = int(QUICK_SEARCH["CHIPLORE_SEARCH_PREDICTIONS"])  # a short search: pricing is not the subject
        self.store, self.spent, self.inner = store, spent, BuiltinArchitect(SearchBudget(predictions=predictions))

    def propose(self, view: Any, count: int) -> list[Any]:
        if self.spent:
            other = record_activity(self.store, Activity(id="optimize-beside", role="runner", policy="builtin"))
            self.store.write("MERGE (:KernelVersion {sha: 'another-runs-program'})")
            record_device_runs(self.store, [
                (DeviceRun(id=f"beside-{kernel}", kernel=kernel, job_id=f"beside-{kernel}", cycles=[1.0],
                           median_cycles=1.0, status="ok", device_s=seconds, toolchain="0.6.0"),
                 "another-runs-program") for kernel, seconds in self.spent.items()], activity=other)  # fmt: skip
            self.spent = {}
        return self.inner.propose(view, count)

    def why_empty(self, view: Any) -> str:
        return self.inner.why_empty(view)


def test_what_another_run_spends_meanwhile_counts_against_each_kernels_share(tmp_path: Path) -> None:
    """Two optimize runs on one graph, three kernels, --budget 240 each: 326 device-s were spent. A
    kernel's budget ran on top of the ledger as *the kernel* began (another run's time meanwhile read as
    an earlier run's), and a kernel gave the next its share less only its own spending. Both now count
    the other run's: the ledger as the run began, and what the ledger says the kernel took."""
    qkv, budget = "sliding_project_qkv", 30.0  # 15 s a kernel
    with EmbeddedStore(tmp_path / "data") as store:
        session = Session(store, SimRNGD(seed=3))
        session.prepare()
        session.learn()
        other = {qkv: 20.0, O_PROJ: 10.0}  # past QKV's share; two thirds of O's
        architect = _BesideAnotherRun(store, dict(other))
        summary = session.optimize([qkv, O_PROJ], roles=Roles(architect=architect), budget_s=budget)  # type: ignore[arg-type]
        assert summary.kernels == [qkv, O_PROJ]
        mine = store.read("MATCH (r:DeviceRun {kernel: $k})-[:CREATED_BY]->(a:Activity) "
                          "WHERE a.id <> 'optimize-beside' RETURN sum(r.device_s) AS s",
                          {"k": O_PROJ})[0]  # fmt: skip
        assert violations(store) == []
        held = store.read("MATCH (d:DesignNode) WHERE d.owner <> '' RETURN d.id AS id, d.status AS status")
    assert held == []  # a finished run holds nothing, not even designs it claimed and never reached
    # O's share is 15 s, 10 of them spent by the other run: this run's own part is what is left (a job is
    # stopped at the budget's end); it was 29.7 s: 15 + what QKV's share had "left" of this run's own part
    assert mine["s"] <= budget / 2 - other[O_PROJ] + 0.5, (mine, summary.stopped)
