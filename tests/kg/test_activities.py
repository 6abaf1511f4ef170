"""A run's Activity reads `running` only while its process runs: one whose process died without a word
(kill -9, or its store went away before the run could record its end: a user's optimize stayed
`running` for good after Neo4j stopped under it) is marked by the next run that opens the graph."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import Activity
from chiplore.kg.processes import owner_runs, this_machine, this_process
from chiplore.kg.repo.knowledge import ORPHANED, RUNNING, close_orphaned_activities, record_activity
from chiplore.kg.schema import ensure_schema

pytestmark = pytest.mark.server


def test_a_running_activity_whose_process_is_gone_is_marked_and_a_live_one_is_not(
    embedded_store: EmbeddedStore,
) -> None:
    ensure_schema(embedded_store)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # a process that ran here and has ended
    record_activity(embedded_store, Activity(id="optimize-dead", role="runner", policy="builtin", outcome=RUNNING,
                                             owner=f"{socket.gethostname()}:{dead_pid}"))  # fmt: skip
    live = record_activity(embedded_store, Activity(id="optimize-live", role="runner", policy="builtin",
                                                    outcome=RUNNING))  # fmt: skip
    assert live.owner == this_process() == f"{this_machine()}:{os.getpid()}"  # named when it starts
    record_activity(embedded_store, Activity(id="optimize-elsewhere", role="runner", policy="builtin", outcome=RUNNING,
                                             owner="another-host:12"))  # fmt: skip
    assert close_orphaned_activities(embedded_store) == 1
    rows = embedded_store.read("MATCH (a:Activity) RETURN a.id AS id, a.outcome AS outcome, a.ended_at AS ended "
                               "ORDER BY id")  # fmt: skip
    assert rows == [
        {"id": "optimize-dead", "outcome": ORPHANED, "ended": None},  # when it ended is not known
        {"id": "optimize-elsewhere", "outcome": RUNNING, "ended": None},  # nothing here can tell
        {"id": "optimize-live", "outcome": RUNNING, "ended": None},
    ]
    assert close_orphaned_activities(embedded_store) == 0


def test_an_owner_in_another_pid_namespace_of_the_same_host_name_is_not_judged_by_its_pid() -> None:
    """Two containers may share a host name while each counts its own PIDs: a dead PID here says
    nothing of a run in the other, which must not be marked interrupted (nor its designs taken)."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    host = socket.gethostname()
    if this_machine() == host:
        pytest.skip("this kernel does not tell the PID namespace")
    assert not owner_runs(f"{this_machine()}:{dead_pid}:t")  # this namespace: judged by the PID
    assert owner_runs(f"{this_machine()}:{os.getpid()}:t")
    assert owner_runs(f"{host}@1:{dead_pid}:t")  # another namespace of this host name: nothing to tell
    assert not owner_runs(f"{host}:{dead_pid}")  # an older chiplore's owner: judged by its host name alone


def test_an_activity_recorded_again_keeps_when_it_first_began(embedded_store: EmbeddedStore) -> None:
    """A rerun of an upgrade its budget left open records the upgrade's activity again: it replaced the
    start, so what the first run created read as made before its activity began."""
    ensure_schema(embedded_store)
    record_activity(embedded_store, Activity(id="upgrade-x", role="upgrade", policy="builtin", outcome=RUNNING,
                                             started_at="2026-12-07T07:13:40Z"))  # fmt: skip
    record_activity(embedded_store, Activity(id="upgrade-x", role="upgrade", policy="builtin", outcome=RUNNING,
                                             started_at="2026-12-07T07:14:37Z"))  # fmt: skip
    rows = embedded_store.read("MATCH (a:Activity {id: 'upgrade-x'}) RETURN a.started_at AS at")
    assert rows == [{"at": "2026-12-07T07:13:40Z"}]
