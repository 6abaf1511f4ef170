"""The run's calendar: when, in device-clock seconds, each job may start.

Devices run side by side, each on its own clock. A job may not start before the results it was
decided from existed: a design's jobs run one after another, a round's designs start when the round
was proposed (after the round before it ended), and a design is judged after the designs proposed
before it in its round were (BEST may have changed). Each thread of the loop carries its position on
the calendar (`Calendar.now`); the runner sends a job to its device at that time and moves it to the
job's end. On a real device the clock is the wall's and these are simply the times things happened.

On simulated devices the calendar is not the wall's, and free work (screens, proposals) takes wall
time but no calendar time: a thread still screening at 5 s could send its job after another thread
sent one at 600 s to the same device, whose clock cannot go back, and the first job would seem to
have queued for ten minutes. An ordered calendar (`ordered=True`) sends jobs in calendar order
instead, as a conservative discrete-event simulation does: a job at `t` waits until no thread of the
run can still send one before `t` (every other thread is past `t`, waits behind a later job, or
waits for another thread: its turn, its round's designs, a device).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from chiplore.core.errors import KernelStop

ACTIVE, WAITING, BLOCKED = "active", "waiting", "blocked"


class CalendarClosed(KernelStop):
    """The run is stopping: no further job is sent."""


@dataclass
class _Place:
    state: str  # ACTIVE (working from `at_s`), WAITING (its job is due at `at_s`) or BLOCKED
    at_s: float


class Calendar:
    """Each thread's position on the run's calendar (seconds). A thread joins where its parent says
    (`join`), or takes a place its parent held for it (`hold` then `adopt`: no job slips in between);
    it leaves when done."""

    def __init__(self, *, ordered: bool = False) -> None:
        self.ordered = ordered
        self._local = threading.local()
        self._places: dict[int, _Place] = {}
        self._keys = itertools.count()
        self._changed = threading.Condition()
        self._closed = False

    def hold(self, at_s: float) -> int:
        """A place at `at_s` for a thread about to start (it counts from now on)."""
        with self._changed:
            key = next(self._keys)
            self._places[key] = _Place(ACTIVE, at_s)
            return key

    def adopt(self, key: int) -> None:
        """This thread works from the place held for it."""
        with self._changed:
            self._local.key, self._local.now = key, self._places[key].at_s

    def join(self, at_s: float) -> None:
        """This thread works from `at_s` on."""
        self.adopt(self.hold(at_s))

    def leave(self) -> None:
        """This thread is done: it sends no more jobs."""
        with self._changed:
            self._places.pop(getattr(self._local, "key", -1), None)
            self._local.key = -1
            self._changed.notify_all()

    def now(self) -> float:
        return float(getattr(self._local, "now", 0.0))

    def advance(self, to_s: float) -> float:
        """This thread learnt something at `to_s` (a job ended, a turn came): it goes on from there."""
        with self._changed:
            self._local.now = max(self.now(), to_s)
            self._move(None, self._local.now)
            return float(self._local.now)

    @contextmanager
    def blocked(self) -> Iterator[None]:
        """This thread waits for others (its turn, its round's designs, a device): while it waits, it
        holds no job back; it goes on from where it was, or later if it advances."""
        with self._changed:
            self._move(BLOCKED, self.now())
        try:
            yield
        finally:
            with self._changed:
                self._move(ACTIVE, self.now())

    def await_turn(self) -> None:
        """Before sending a job at `now()`: on an ordered calendar, wait until no thread of the run can
        still send one earlier. CalendarClosed when the run stops meanwhile."""
        if not self.ordered:
            return
        key, at_s = getattr(self._local, "key", -1), self.now()
        with self._changed:
            self._move(WAITING, at_s)
            try:
                self._changed.wait_for(lambda: self._closed or self._first(key, at_s))
                if self._closed:
                    raise CalendarClosed("the run is stopping")
            finally:
                self._move(ACTIVE, at_s)

    def close(self) -> None:
        """The run is stopping: every job waiting for its turn gives up."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _first(self, key: int, at_s: float) -> bool:
        for other, place in self._places.items():
            if other == key or place.state == BLOCKED:
                continue
            if place.state == WAITING and (place.at_s, other) > (at_s, key):
                continue
            if place.state == ACTIVE and place.at_s >= at_s:
                continue
            return False
        return True

    def _move(self, state: str | None, at_s: float) -> None:
        """Under the lock: this thread's place changes (None: its state stays; a thread that has not
        joined has no place)."""
        place = self._places.get(getattr(self._local, "key", -1))
        if place is not None:
            place.state, place.at_s = state or place.state, at_s
            self._changed.notify_all()


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
