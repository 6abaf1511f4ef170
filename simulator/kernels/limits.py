"""A kernel pack's own Python (its reference.py) under a time limit: a reference that never returns
is refused in one line instead of hanging `kernel add` and every later command."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

REFERENCE_LIMIT_S = 120.0  # far past what a numpy reference takes on the smoke fixtures


class OutOfTime(BaseException):
    """The pack's code ran past its time limit (no Exception: the pack's own `except Exception` cannot
    swallow it)."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise OutOfTime in the block after `seconds` (an alarm: in the main thread only; elsewhere no
    limit). An alarm someone else set (a test runner's timeout) is kept: due sooner, it stands alone;
    due later, it is set again, less the time the block took, once the block ends."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return
    pending, interval = signal.getitimer(signal.ITIMER_REAL)
    if 0 < pending <= seconds:
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if pending > 0:
            signal.setitimer(signal.ITIMER_REAL, max(pending - (time.monotonic() - started), 1e-3), interval)
