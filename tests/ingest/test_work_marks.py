"""Learning a graph's facts and moving them to another toolchain are one process's work at a time (and
an upgrade waits for the optimize runs under way, which wait for it in turn): two
`learn`s at once on one graph measured every probe twice and left two current measurements of each
parameter. A second process is refused in one line before it records anything; a killed process's mark
is taken over by the next."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.schedule import OptimizeConfig
from chiplore.agents.upgrade import UpgradeRefused, upgrade
from chiplore.core.errors import ConfigError
from chiplore.ingest.learn import learn
from chiplore.kg.graph_file import SCHEMA_STATE
from chiplore.kg.models import Activity
from chiplore.kg.processes import this_process
from chiplore.kg.repo.knowledge import RUNNING, record_activity
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import active_toolchain, register_target
from chiplore.kg.repo.work_marks import FACTS_MARK, WorkUnderWay, holder, one_at_a_time
from chiplore.kg.store import GraphStore
from tests.toy import ToyChip
from tests.toy.versions import DEFAULT_VERSION, VERSIONS


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this machine, standing in for another chiplore at work on the graph."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def toy_graph(graph: GraphStore) -> GraphStore:
    chip = ToyChip()
    register_target(graph, chip.name, chip.toolchains(), chip.default_toolchain())
    return graph


def _mark_held_by(graph: GraphStore, pid: int, work: str) -> None:
    graph.write(f"MERGE (m:{SCHEMA_STATE} {{name: $name}}) SET m.owner = $owner, m.work = $work, "
                "m.started_at = '2026-12-07T10:00:00+00:00'",
                {"name": FACTS_MARK, "owner": f"{socket.gethostname()}:{pid}", "work": work})  # fmt: skip


def test_a_learn_while_another_process_learns_is_refused_and_records_nothing(
    toy_graph: GraphStore, other_process: subprocess.Popen[bytes]
) -> None:
    graph = toy_graph
    _mark_held_by(graph, other_process.pid, f"learn {DEFAULT_VERSION}")
    before = count_by_label(graph)
    with pytest.raises(WorkUnderWay) as refused:
        learn(graph, ToyChip(), DEFAULT_VERSION)
    message = str(refused.value)
    assert (
        "\n" not in message
        and f"learn {DEFAULT_VERSION}, process {socket.gethostname()}:{other_process.pid}" in message
    )
    assert count_by_label(graph) == before  # nothing recorded, not even an activity
    other_process.kill()  # killed: its mark is taken over, and dropped when this learn ends
    other_process.wait()
    summary = learn(graph, ToyChip(), DEFAULT_VERSION)
    assert summary.measured_params > 0 and holder(graph, FACTS_MARK) is None


@pytest.mark.parametrize("store", ["embedded"], indirect=True)  # the mark's statements: the first test's, both stores
def test_an_upgrade_while_a_learn_runs_is_refused_and_a_learn_inside_ones_own_work_runs(
    toy_graph: GraphStore, other_process: subprocess.Popen[bytes]
) -> None:
    graph, chip = toy_graph, ToyChip()
    learn(graph, chip, DEFAULT_VERSION)
    newer = [v for v in VERSIONS if v != DEFAULT_VERSION][-1]
    _mark_held_by(graph, other_process.pid, f"learn {DEFAULT_VERSION}")
    with pytest.raises(WorkUnderWay, match="already at work on this graph's facts"):
        upgrade(graph, chip, newer)
    graph.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) DELETE m", {"name": FACTS_MARK})
    with one_at_a_time(graph, FACTS_MARK, "an outer piece of work"):
        assert holder(graph, FACTS_MARK) == this_process()
        learn(graph, chip, DEFAULT_VERSION)  # this process's own work: not refused, and the mark stays
        assert holder(graph, FACTS_MARK) == this_process()
    assert holder(graph, FACTS_MARK) is None
    assert upgrade(graph, chip, newer).to_version == newer


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_an_upgrade_beside_a_live_optimize_is_refused_and_an_optimize_beside_an_upgrade_too(
    toy_graph: GraphStore, other_process: subprocess.Popen[bytes]
) -> None:
    """An upgrade beside a live optimize let the optimize measure a kernel's 1.0 baseline after the graph
    had moved to 2.0, which status then reported as 2.0's, and no command could re-validate it."""
    graph, chip = toy_graph, ToyChip()
    learn(graph, chip, DEFAULT_VERSION)
    newer = [v for v in VERSIONS if v != DEFAULT_VERSION][-1]
    live = f"{socket.gethostname()}:{other_process.pid}"
    record_activity(graph, Activity(id="optimize-elsewhere", role="runner", policy="builtin", outcome=RUNNING,
                                    owner=live))  # fmt: skip
    with pytest.raises(UpgradeRefused, match=f"an optimize is under way on this graph \\(process {live} "):
        upgrade(graph, chip, newer)
    assert active_toolchain(graph, chip.name) == DEFAULT_VERSION and holder(graph, FACTS_MARK) is None

    graph.write("MATCH (a:Activity {id: 'optimize-elsewhere'}) SET a.outcome = 'ok'")  # that run ended
    _mark_held_by(graph, other_process.pid, f"toolchain upgrade {newer}")  # and an upgrade runs now
    with pytest.raises(ConfigError, match=f"a toolchain upgrade {newer} is under way on this graph"):
        optimize(OptimizeContext(graph, chip, DEFAULT_VERSION))
    stopped = graph.read("MATCH (a:Activity) WHERE a.id STARTS WITH 'optimize-' AND a.id <> 'optimize-elsewhere' "
                         "RETURN a.outcome AS outcome")  # fmt: skip
    assert [r["outcome"].startswith(f"stopped: a toolchain upgrade {newer} is under way") for r in stopped] == [True]
    assert graph.read("MATCH (r:DeviceRun) WHERE r.kernel = 'gemv' RETURN count(r) AS n") == [{"n": 0}]

    _mark_held_by(graph, other_process.pid, f"learn {DEFAULT_VERSION}")  # a learn beside it is no reason to wait
    assert optimize(OptimizeContext(graph, chip, DEFAULT_VERSION), OptimizeConfig(patience=1)).kernels == ["gemv"]
