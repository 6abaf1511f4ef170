"""Work on a whole graph that one process does at a time (learning its facts, moving them to another
toolchain): a mark node names the process doing it and holds a lease its heartbeat renews; another
process is refused while the owner runs and its lease holds, and takes over the mark of one that was
killed (at once on this machine; once its lease lapses, from another). Designs have their own, finer
claims (agents/lease.py)."""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from chiplore.core.clock import to_iso, utc_now
from chiplore.core.errors import ConfigError, StoreError
from chiplore.kg.graph_file import SCHEMA_STATE
from chiplore.kg.processes import owner_runs, this_process
from chiplore.kg.repo.designs import working_owners
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)

FACTS_MARK = "facts-under-way"  # learn and toolchain upgrade: both measure and re-check the graph's facts
UPGRADE_WORK = "toolchain upgrade"  # the work an upgrade names on the mark (`toolchain upgrade VERSION`)
MARK_LEASE_S = 120.0  # a killed process of another machine holds a mark this long after its last heartbeat
_TOKEN = uuid.uuid4().hex[:8]  # this process among the ones that had its host and pid (a restarted container)
_held: dict[tuple[int, str], int] = {}  # (store, mark) this process holds, and how many frames work under it
_held_lock = threading.Lock()


class WorkUnderWay(ConfigError):
    """Another live process holds the mark of this work on the graph."""


def mark_owner() -> str:
    """This process as a mark's owner: `host:pid:token` (owner_runs reads the host and the pid)."""
    return f"{this_process()}:{_TOKEN}"


def _lease_end(seconds: float = MARK_LEASE_S) -> str:
    return to_iso(datetime.now(UTC) + timedelta(seconds=seconds))


def mark_live(owner: str, lease_until: str) -> bool:
    """Whether a mark's owner may still be at work: on this machine, whether its process runs (a stalled
    heartbeat is no death); on another, whether its lease holds (none on a mark an older chiplore wrote:
    nothing here can tell, and a mark that never lapses would block the graph for good)."""
    if not owner:
        return False
    if owner.partition(":")[0] == socket.gethostname():
        # this pid under another token, or none: a process before a restart (a container's pids start again)
        if owner == this_process() or owner.startswith(f"{this_process()}:"):
            return owner == mark_owner()
        return owner_runs(owner)
    return lease_until >= to_iso(datetime.now(UTC))


def claim_work(store: GraphStore, mark: str, work: str) -> tuple[str, str, str] | None:
    """Hold `mark` for this process, doing `work` (a word for a person); None when it is held now, else
    the live process that holds it: (owner, its work, since when)."""
    me, now = mark_owner(), utc_now()
    params = {"name": mark, "me": me, "now": now, "work": work, "until": _lease_end()}
    rows = store.write(f"MERGE (m:{SCHEMA_STATE} {{name: $name}}) ON CREATE SET m.owner = $me, m.started_at = $now, "
                       "m.work = $work, m.lease_until = $until RETURN m.owner AS owner, m.work AS work, "
                       "m.started_at AS at, m.lease_until AS until", params)  # fmt: skip
    owner = str(rows[0]["owner"] or "") if rows else me
    if owner == me:
        return None
    if mark_live(owner, str(rows[0]["until"] or "")):
        return owner, str(rows[0]["work"] or ""), str(rows[0]["at"] or "")
    # a killed process's mark: taken over only if nobody took it first (compare and set, under the node's
    # write lock, taken before the owner is read: two processes taking over one mark are ordered)
    taken = store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) SET m.mark_lock = true SET m.mark_lock = null "
                        "WITH m WHERE coalesce(m.owner, '') = $old SET m.owner = $me, m.started_at = $now, "
                        "m.work = $work, m.lease_until = $until RETURN count(m) AS n",
                        {**params, "old": owner})  # fmt: skip
    if taken and int(taken[0]["n"]):
        return None
    return claim_work(store, mark, work)  # someone else took it a moment ago: ask who


def release_work(store: GraphStore, mark: str) -> None:
    """Drop this process's mark (another's is left alone)."""
    store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name, owner: $me}}) DELETE m", {"name": mark, "me": mark_owner()})


def work_under_way(store: GraphStore, mark: str) -> tuple[str, str, str] | None:
    """The live process of another than this one that holds `mark`: (owner, its work, since when)."""
    rows = store.read(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) RETURN m.owner AS owner, m.work AS work, "
                      "m.started_at AS at, m.lease_until AS until", {"name": mark})  # fmt: skip
    if not rows or not rows[0]["owner"]:
        return None
    owner = str(rows[0]["owner"])
    if owner == mark_owner() or not mark_live(owner, str(rows[0]["until"] or "")):
        return None
    return owner, str(rows[0]["work"] or ""), str(rows[0]["at"] or "")


def live_optimize_runs(store: GraphStore) -> list[str]:
    """The `optimize` runs under way on the graph, other than this process's: a running optimize activity
    whose process runs on this machine, or one of another machine's whose lease holds (nothing here can
    tell whether another machine's process still runs: its heartbeat renews the lease, which lapses
    a lease's length after a kill). Each as `process (since ...)`."""
    rows = store.read("MATCH (a:Activity {outcome: 'running'}) WHERE a.id STARTS WITH 'optimize-' AND "
                      "a.owner IS NOT NULL RETURN a.owner AS owner, a.started_at AS at, a.lease_until AS until "
                      "ORDER BY at")  # fmt: skip
    leased = {owner.rsplit(":", 1)[0] for owner in working_owners(store)}  # a design's owner is host:pid:tag
    live = []
    for row in rows:
        owner = str(row["owner"])
        if owner == this_process():
            continue
        # as a mark's owner (its run's lease, renewed by its heartbeat); or another machine's that holds a
        # design (a run of a chiplore that did not lease its activity)
        remote = owner.partition(":")[0] != socket.gethostname()
        if mark_live(owner, str(row["until"] or "")) or (remote and owner in leased):
            live.append(f"{owner} (since {row['at']})")
    return live


def holder(store: GraphStore, mark: str) -> str | None:
    """The process that holds `mark` (None: nobody)."""
    rows = store.read(f"MATCH (m:{SCHEMA_STATE} {{name: $name}}) RETURN m.owner AS owner", {"name": mark})
    return str(rows[0]["owner"]) if rows and rows[0]["owner"] else None


@contextmanager
def renewing(store: GraphStore, mark: str) -> Iterator[None]:
    """Renew this process's lease on `mark` while the work runs (a quarter of the lease apart)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(MARK_LEASE_S / 4):
            try:
                store.write(f"MATCH (m:{SCHEMA_STATE} {{name: $name, owner: $me}}) SET m.lease_until = $until",
                            {"name": mark, "me": mark_owner(), "until": _lease_end()})  # fmt: skip
            except Exception as error:  # a store gone for a moment: the next beat tries again
                log.warning("could not renew the %s mark: %s", mark, error)

    thread = threading.Thread(target=beat, name=f"chiplore-{mark}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


@contextmanager
def one_at_a_time(store: GraphStore, mark: str, work: str) -> Iterator[None]:
    """Do `work` holding `mark` (WorkUnderWay, in one line, while another live process holds it); the
    mark is dropped however the work ends, except by a kill, whose mark the next process takes over.
    Work of a process that already holds the mark (an inner frame of its own work) runs under it."""
    key = (id(store), mark)
    with _held_lock:
        inner = _held.get(key, 0) > 0
        if inner:
            _held[key] += 1
    if inner:
        try:
            yield
        finally:
            with _held_lock:
                _held[key] -= 1
        return
    held = claim_work(store, mark, work)
    if held is not None:
        owner, theirs, since = held
        raise WorkUnderWay(f"another process is at work on this graph's facts ({theirs or 'work'}, process {owner}, "
                           f"since {since}): let it finish, then run this again (a killed one's mark is taken over "
                           f"at once on its machine, from another {MARK_LEASE_S:.0f} s after its last "
                           "heartbeat)")  # fmt: skip
    with _held_lock:
        _held[key] = 1
    try:
        with renewing(store, mark):
            yield
    finally:
        with _held_lock:
            _held.pop(key, None)
        try:
            release_work(store, mark)
        except StoreError as error:  # the store that failed the work: the error that ended it is the one to see
            log.warning("could not drop the %s mark (the next process takes it over): %s", mark, error)
