"""Learning a graph's facts and moving them to another toolchain are one process's work at a time (and
an upgrade waits for the optimize runs under way, which wait for it in turn): two
`learn`s at once on one graph measured every probe twice and left two current measurements of each
parameter. A second process is refused in one line before it records anything; a killed process's mark
is taken over by the next."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.schedule import OptimizeConfig
from chiplore.agents.upgrade import UpgradeRefused, upgrade
from chiplore.core.errors import ConfigError
from chiplore.ingest.learn import learn
from chiplore.kg.graph_file import SCHEMA_STATE
from chiplore.kg.models import Activity
from chiplore.kg.neo4j_store import Neo4jStore
from chiplore.kg.repo.knowledge import RUNNING, record_activity
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import active_toolchain, register_target
from chiplore.kg.repo.work_marks import (
    FACTS_MARK,
    WorkUnderWay,
    claim_work,
    holder,
    mark_owner,
    one_at_a_time,
    work_under_way,
)
from chiplore.kg.schema import ensure_schema
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
                "m.started_at = '2026-12-07T10:00:00+00:00', m.lease_until = '2999-01-01T00:00:00Z'",
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
    with pytest.raises(WorkUnderWay, match="another process is at work on this graph's facts"):
        upgrade(graph, chip, newer)
    graph.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) DELETE m", {"name": FACTS_MARK})
    with one_at_a_time(graph, FACTS_MARK, "an outer piece of work"):
        assert holder(graph, FACTS_MARK) == mark_owner()
        learn(graph, chip, DEFAULT_VERSION)  # this process's own work: not refused, and the mark stays
        assert holder(graph, FACTS_MARK) == mark_owner()
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
    ran = graph.read("MATCH (a:Activity) WHERE a.id STARTS WITH 'optimize-' AND a.id <> 'optimize-elsewhere' "
                     "AND NOT a.outcome STARTS WITH 'stopped' RETURN a.lease_until AS until")  # fmt: skip
    assert len(ran) == 1 and ran[0]["until"], ran  # the run leased its activity: another machine sees it by that


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_another_machines_optimize_holds_an_upgrade_off_while_its_lease_holds(toy_graph: GraphStore) -> None:
    """Another machine's optimize was seen only while it held a design: at its start, or while its roles
    proposed, an upgrade went ahead beside it. Its activity's lease (renewed by its heartbeat) says it runs;
    a killed one's lapses and no longer holds the upgrade off."""
    graph, chip = toy_graph, ToyChip()
    learn(graph, chip, DEFAULT_VERSION)
    newer = [v for v in VERSIONS if v != DEFAULT_VERSION][-1]
    remote = "another-host:4242"
    record_activity(graph, Activity(id="optimize-remote", role="runner", policy="builtin", outcome=RUNNING,
                                    owner=remote, lease_until="2999-01-01T00:00:00Z"))  # fmt: skip
    assert graph.read("MATCH (d:DesignNode) WHERE d.owner <> '' RETURN count(d) AS n") == [{"n": 0}]  # none held
    with pytest.raises(UpgradeRefused, match=f"an optimize is under way on this graph \\(process {remote} "):
        upgrade(graph, chip, newer)
    graph.write("MATCH (a:Activity {id: 'optimize-remote'}) SET a.lease_until = '2000-01-01T00:00:00Z'")  # killed
    upgrade(graph, chip, newer)
    assert active_toolchain(graph, chip.name) == newer


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_a_mark_whose_lease_lapsed_is_taken_over_and_one_of_this_pid_before_a_restart_is_not_ours(
    toy_graph: GraphStore,
) -> None:
    """Another machine's process that was killed held its mark for good (nothing here can tell it is gone):
    the mark now lapses with its lease. A container restarted with the same host and pid took the dead
    process's mark for its own, ran unmarked and never dropped it: a mark is this process's only if this
    process took it."""
    graph, remote, restarted = toy_graph, "another-host:4242:0badc0de", f"{socket.gethostname()}:{os.getpid()}:0badc0de"
    for owner, until, refused in ((remote, "2999-01-01T00:00:00Z", True), (remote, "2000-01-01T00:00:00Z", False),
                                  (restarted, "2000-01-01T00:00:00Z", False)):  # fmt: skip
        graph.write(f"MERGE (m:{SCHEMA_STATE} {{name: $name}}) SET m.owner = $owner, m.work = 'learn 1.0', "
                    "m.started_at = '2026-12-07T10:00:00Z', m.lease_until = $until",
                    {"name": FACTS_MARK, "owner": owner, "until": until})  # fmt: skip
        if refused:
            with pytest.raises(WorkUnderWay, match="another-host:4242:0badc0de"):
                learn(graph, ToyChip(), DEFAULT_VERSION)
            continue
        with one_at_a_time(graph, FACTS_MARK, "learn 1.0"):
            assert holder(graph, FACTS_MARK) == mark_owner() != owner
        assert holder(graph, FACTS_MARK) is None


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_a_mark_with_no_lease_of_another_machine_lapses_and_one_of_a_live_process_here_holds(
    toy_graph: GraphStore, other_process: subprocess.Popen[bytes]
) -> None:
    """A mark an older chiplore wrote has no lease: another machine's blocked the graph for good (nothing
    here can tell its process is gone). A live process of this machine holds its mark whatever its lease
    says (a heartbeat that stalled is no death)."""
    graph, local = toy_graph, f"{socket.gethostname()}:{other_process.pid}"
    graph.write(f"CREATE (:{SCHEMA_STATE} {{name: $name, owner: 'another-host:4242', work: 'learn 1.0', "
                "started_at: '2026-12-07T10:00:00Z'})", {"name": FACTS_MARK})  # fmt: skip
    assert work_under_way(graph, FACTS_MARK) is None
    graph.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) SET m.owner = $owner, "
                "m.lease_until = '2000-01-01T00:00:00Z'", {"name": FACTS_MARK, "owner": local})  # fmt: skip
    with pytest.raises(WorkUnderWay, match=f"process {local}"):
        learn(graph, ToyChip(), DEFAULT_VERSION)


class _Captured(Exception):
    pass


class _TakeOverStatement:
    """A store whose mark is a dead process's: claim_work's second statement (the take-over) is caught."""

    def write(self, query: str, params: dict[str, object] | None = None) -> list[dict[str, object]]:
        if query.startswith("MERGE"):
            return [{"owner": "deadhost:1:x", "work": "learn", "at": "t", "until": "2000-01-01T00:00:00Z"}]
        raise _Captured(query, params)


def test_two_processes_taking_over_one_dead_mark_on_neo4j_are_ordered(neo4j_store: Neo4jStore) -> None:
    """Two learns after a killed one: both took its mark over on Neo4j (the owner was read before the
    node's lock was taken). The second now waits for the first's transaction and finds the mark held."""
    graph = neo4j_store
    ensure_schema(graph)
    graph.write(f"CREATE (:{SCHEMA_STATE} {{name: $name, owner: 'deadhost:1:x', work: 'learn', "
                "lease_until: '2000-01-01T00:00:00Z'})", {"name": FACTS_MARK})  # fmt: skip
    with pytest.raises(_Captured) as captured:
        claim_work(_TakeOverStatement(), FACTS_MARK, "learn 1.0")  # type: ignore[arg-type]
    query, params = captured.value.args
    first_owner = "another-host:7:first"
    got: dict[str, object] = {}
    with graph._driver.session(database=graph.database) as session, session.begin_transaction() as first:
        assert first.run(query, {**params, "me": first_owner}).single()["n"] == 1
        second = threading.Thread(target=lambda: got.update(held=claim_work(graph, FACTS_MARK, "learn 1.0")))
        second.start()
        time.sleep(1.0)
        assert "held" not in got  # waiting on the lock the first holds
        first.commit()
    second.join(timeout=30)
    assert got["held"] is not None and got["held"][0] == first_owner  # type: ignore[index]
    assert holder(graph, FACTS_MARK) == first_owner
