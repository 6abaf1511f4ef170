"""A wait on a store's reply that ends at a deadline or at a signal, whatever the server does.

The stores' own timeouts stop most queries, but not all: Neo4j and FalkorDB check them between rows,
so one expression that computes for minutes (a reduce building a huge string) runs on, and a reply of
one enormous row can take longer to decode than to compute. The untrusted read paths therefore wait
on a worker thread here: at the deadline, or when Ctrl-C or SIGTERM interrupt the wait, `abort` cuts
the worker's connection (which makes the server drop the transaction) and the caller gets control back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# What a store's client waits past the query's own timeout for the server to report it.
GRACE_S = 2.0


class DeadlinePassed(Exception):
    """The work did not finish by its deadline; its connection was cut."""


def run_bounded(work: Callable[[], T], *, seconds: float, abort: Callable[[], None]) -> T:
    """Run `work` on a daemon thread and return its result, or raise its exception.

    Past `seconds`, `abort()` is called and DeadlinePassed raised; an exception in this thread while
    waiting (KeyboardInterrupt, the SystemExit of the CLI's SIGTERM handler) calls `abort()` and goes on.
    The worker is left to end on its own once its connection is cut (daemon: it never holds up exit).
    """
    outcome: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error
        finally:
            done.set()

    thread = threading.Thread(target=target, name="chiplore-untrusted-read", daemon=True)
    thread.start()
    try:
        finished = done.wait(seconds)
    except BaseException:
        _quietly(abort)
        raise
    if not finished:
        _quietly(abort)
        raise DeadlinePassed
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _quietly(abort: Callable[[], None]) -> None:
    """Abort; a failure to cut a connection that is already broken is no news."""
    try:
        abort()
    except Exception as error:
        log.debug("aborting an untrusted read: %s", error)
