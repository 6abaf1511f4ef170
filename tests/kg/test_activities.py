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
    assert live.owner == f"{socket.gethostname()}:{os.getpid()}"  # named when it starts
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
