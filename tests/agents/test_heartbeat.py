"""A run's heartbeat keeps its claims while one step outlasts a lease (two optimize runs on a busy
host: the first measured the FFN baseline past its 120-s lease, the second took the baseline over
and the first crashed with ClaimLost). Another run takes a design only once the heartbeat has
stopped and the lease has run out."""

from __future__ import annotations

import time

from chiplore.agents.heartbeat import Heartbeat
from chiplore.agents.lease import Lease
from chiplore.agents.loop import claim
from chiplore.core.ids import content_sha
from chiplore.kg.models import Activity, DesignNode, Kernel, KernelVersion
from chiplore.kg.repo.designs import add_design, get_design, register_kernel
from chiplore.kg.repo.knowledge import RUNNING, record_activity
from chiplore.kg.store import GraphStore

KERNEL = "slow_kernel"


def _held_root(graph: GraphStore, lease: Lease) -> DesignNode:
    register_kernel(graph, Kernel(name=KERNEL, target="simrngd", weight_bytes=1024, bound_cycles=8.0))
    activity = record_activity(graph, Activity(id="heartbeat-test", role="runner", policy="builtin"))
    source = "// the baseline"
    node = DesignNode(id="heartbeat-root", kernel=KERNEL, role="baseline", policy="official", depth=0,
                      status="queued", owner=lease.owner, lease_until=lease.until())  # fmt: skip
    add_design(graph, node, version=KernelVersion(sha=content_sha(source), kernel=KERNEL, source=source,
                                                  toolchain="0.6.0"), parent=None, activity=activity)  # fmt: skip
    return node


def test_a_claim_outlives_its_lease_while_the_heartbeat_runs_and_is_free_once_it_stops(graph: GraphStore) -> None:
    mine, other = Lease(seconds=2.0), Lease()
    node = _held_root(graph, mine)
    run = record_activity(graph, Activity(id="optimize-heartbeat", role="runner", policy="builtin", outcome=RUNNING,
                                          lease_until=mine.until()))  # fmt: skip
    with Heartbeat(graph, mine, [KERNEL], activity=run.id) as heartbeat:
        time.sleep(5.0)  # two and a half leases: renewed every half second
        held = get_design(graph, node.id)
        assert held is not None and not claim(graph, held, other)
        assert heartbeat.beat() == 1
        renewed = graph.read("MATCH (a:Activity {id: $id}) RETURN a.lease_until AS until", {"id": run.id})
        assert renewed[0]["until"] > run.lease_until  # the run's own lease too: another machine sees it live
    time.sleep(2.5)  # the last renewal has run out
    free = get_design(graph, node.id)
    assert free is not None and claim(graph, free, other)
    taken = get_design(graph, node.id)
    assert taken is not None and taken.owner == other.owner
