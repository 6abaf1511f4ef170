"""The run's heartbeat: while designs wait for a device or a turn, their leases are renewed, so a
live run's designs are never taken for abandoned; when the run dies, the heartbeat stops with it and
its leases run out (or, on this machine, are taken over at once: chiplore.agents.lease)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from types import TracebackType

from chiplore.agents.lease import Lease
from chiplore.core.errors import ChiploreError
from chiplore.kg.repo.designs import renew_leases
from chiplore.kg.repo.knowledge import renew_activity
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews, every quarter of a lease, the leases of the designs of `kernels` this run holds, and that
    of the run's own `activity` (another machine's upgrade waits while it holds)."""

    def __init__(self, store: GraphStore, lease: Lease, kernels: Sequence[str], activity: str | None = None) -> None:
        self.store, self.lease, self.kernels, self.activity = store, lease, list(kernels), activity
        self.every_s = lease.seconds / 4
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="chiplore-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self._stop.set()
        self._thread.join()

    def beat(self) -> int:
        """Renew now; how many designs this run holds."""
        until = self.lease.until()
        held = renew_leases(self.store, self.kernels, self.lease.owner, until)  # the claims first: what a miss loses
        if self.activity is not None:
            renew_activity(self.store, self.activity, until)
        return held

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.beat()
            except ChiploreError as error:  # a store hiccup: the next beat tries again, well within the lease
                log.warning("heartbeat: %s", error)
