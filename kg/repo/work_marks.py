"""Work on a whole graph that one process does at a time (learning its facts, moving them to another
toolchain): a mark node names the process doing it; another live process is refused, and the mark a
killed one left is taken over. Designs have their own, finer claims (agents/lease.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from chiplore.core.clock import utc_now
from chiplore.core.errors import ConfigError
from chiplore.kg.graph_file import SCHEMA_STATE
from chiplore.kg.processes import owner_runs, this_process
from chiplore.kg.repo.designs import working_owners
from chiplore.kg.store import GraphStore

FACTS_MARK = "facts-under-way"  # learn and toolchain upgrade: both measure and re-check the graph's facts
UPGRADE_WORK = "toolchain upgrade"  # the work an upgrade names on the mark (`toolchain upgrade VERSION`)


class WorkUnderWay(ConfigError):
    """Another live process holds the mark of this work on the graph."""


def claim_work(store: GraphStore, mark: str, work: str) -> tuple[str, str, str] | None:
    """Hold `mark` for this process, doing `work` (a word for a person); None when it is held now, else
    the live process that holds it: (owner, its work, since when)."""
    me, now = this_process(), utc_now()
    params = {"name": mark, "me": me, "now": now, "work": work}
    rows = store.write(f"MERGE (m:{SCHEMA_STATE} {{name: $name}}) ON CREATE SET m.owner = $me, m.started_at = $now, "
                       "m.work = $work RETURN m.owner AS owner, m.work AS work, m.started_at AS at",
                       params)  # fmt: skip
    owner = str(rows[0]["owner"] or "") if rows else me
    if owner == me:
        return None
    if owner and owner_runs(owner):
        return owner, str(rows[0]["work"] or ""), str(rows[0]["at"] or "")
    # a killed process's mark: taken over only if nobody took it first (compare and set)
    taken = store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) WHERE coalesce(m.owner, '') = $old "
                        "SET m.owner = $me, m.started_at = $now, m.work = $work RETURN count(m) AS n",
                        {**params, "old": owner})  # fmt: skip
    if taken and int(taken[0]["n"]):
        return None
    return claim_work(store, mark, work)  # someone else took it a moment ago: ask who


def release_work(store: GraphStore, mark: str) -> None:
    """Drop this process's mark (another's is left alone)."""
    store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name, owner: $me}}) DELETE m", {"name": mark, "me": this_process()})


def work_under_way(store: GraphStore, mark: str) -> tuple[str, str, str] | None:
    """The live process of another than this one that holds `mark`: (owner, its work, since when)."""
    rows = store.read(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) RETURN m.owner AS owner, m.work AS work, "
                      "m.started_at AS at", {"name": mark})  # fmt: skip
    if not rows or not rows[0]["owner"]:
        return None
    owner = str(rows[0]["owner"])
    if owner == this_process() or not owner_runs(owner):
        return None
    return owner, str(rows[0]["work"] or ""), str(rows[0]["at"] or "")


def live_optimize_runs(store: GraphStore) -> list[str]:
    """The `optimize` runs under way on the graph, other than this process's: a running optimize activity
    whose process runs on this machine, or one of another machine's that holds a design under a lease
    (nothing here can tell whether another machine's process still runs). Each as `process (since ...)`."""
    rows = store.read("MATCH (a:Activity {outcome: 'running'}) WHERE a.id STARTS WITH 'optimize-' AND "
                      "a.owner IS NOT NULL RETURN a.owner AS owner, a.started_at AS at ORDER BY at")  # fmt: skip
    leased = {owner.rsplit(":", 1)[0] for owner in working_owners(store)}  # a design's owner is host:pid:tag
    here, me = socket.gethostname(), this_process()
    live = []
    for row in rows:
        owner = str(row["owner"])
        local = owner.partition(":")[0] == here
        if owner != me and ((local and owner_runs(owner)) or (not local and owner in leased)):
            live.append(f"{owner} (since {row['at']})")
    return live


def holder(store: GraphStore, mark: str) -> str | None:
    """The process that holds `mark` (None: nobody)."""
    rows = store.read(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) RETURN m.owner AS owner", {"name": mark})
    return str(rows[0]["owner"]) if rows and rows[0]["owner"] else None


@contextmanager
def one_at_a_time(store: GraphStore, mark: str, work: str) -> Iterator[None]:
    """Do `work` holding `mark` (WorkUnderWay, in one line, while another live process holds it); the
    mark is dropped however the work ends, except by a kill, whose mark the next process takes over.
    Work this process already holds the mark for (a learn inside an upgrade) runs under that one."""
    if holder(store, mark) == this_process():
        yield
        return
    held = claim_work(store, mark, work)
    if held is not None:
        owner, theirs, since = held
        raise WorkUnderWay(f"another process is already at work on this graph's facts ({theirs or 'work'}, process "
                           f"{owner}, since {since}): let it finish, then run this again; what it recorded is not "
                           "measured twice")  # fmt: skip
    try:
        yield
    finally:
        release_work(store, mark)
