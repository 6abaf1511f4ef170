"""Who works on a design: a process claims it in the graph (owner and lease) and renews the lease at
every step; another process takes it over only once the lease has expired, or at once when the
owner is a process of this machine that no longer runs (killed). Two processes on one graph thus
never work the same design, and a dead one's designs are finished by the next."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from chiplore.core.clock import to_iso
from chiplore.kg.processes import owner_runs, this_process

LEASE_S = 120.0  # a step (a device job, an A/B pair) takes seconds; a lease outlives many


@dataclass(frozen=True)
class Lease:
    """This process's identity as a design's owner, and how long its claims hold."""

    owner: str = field(default_factory=lambda: f"{this_process()}:{uuid.uuid4().hex[:8]}")  # host:pid:tag
    seconds: float = LEASE_S

    def until(self) -> str:
        """When a claim made or renewed now expires."""
        return to_iso(datetime.now(UTC) + timedelta(seconds=self.seconds))

    def may_take(self, owner: str, lease_until: str) -> bool:
        """Whether a design held by `owner` until `lease_until` may be taken over now."""
        if not owner or owner == self.owner:
            return True
        if lease_until and lease_until < to_iso(datetime.now(UTC)):
            return True
        return not owner_runs(owner)
