"""The run's calendar: when, in device-clock seconds, each job may start.

Devices run side by side, each on its own clock. A job may not start before the results it was
decided from existed: a design's jobs run one after another, a round's designs start when the round
was proposed (after the round before it ended), and a design is judged after the designs proposed
before it in its round were (BEST may have changed). Each thread of the loop carries its position on
the calendar (`Calendar.now`); the runner sends a job to its device at that time and moves it to the
job's end. On a real device the clock is the wall's and these are simply the times things happened.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class Calendar:
    """Each thread's position on the run's calendar (seconds); a thread starts where its parent says."""

    def __init__(self) -> None:
        self._local = threading.local()

    def start(self, at_s: float) -> None:
        """This thread works from `at_s` on (a design thread: when its round was proposed)."""
        self._local.now = at_s

    def now(self) -> float:
        return float(getattr(self._local, "now", 0.0))

    def advance(self, to_s: float) -> float:
        """This thread learnt something at `to_s` (a job ended, a turn came): it goes on from there."""
        self._local.now = max(self.now(), to_s)
        return self._local.now


@dataclass
class Turns:
    """One round's designs are judged in the order they were proposed: a design's decision waits for
    the decisions (or the ends) of every design before it, and starts on the calendar after them."""

    count: int
    _ended: dict[int, float] = field(default_factory=dict)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, index: int) -> float:
        """Block until every design before `index` has ended; the latest calendar time they ended at."""
        with self._changed:
            self._changed.wait_for(lambda: all(i in self._ended for i in range(index)))
            return max((self._ended[i] for i in range(index)), default=0.0)

    def end(self, index: int, at_s: float) -> None:
        """Design `index` is decided (or ended before a decision) at `at_s`; called once, always."""
        with self._changed:
            self._ended[index] = at_s
            self._changed.notify_all()

    def last(self) -> float:
        """When the whole round ended on the calendar (after every design's `end`)."""
        with self._changed:
            return max(self._ended.values(), default=0.0)
