"""Which device takes the next job. A device serves one of the run's jobs at a time (or one A/B
comparison, all its pairs); the next job takes the free device that came free earliest on the
calendar, so no device idles while another has a queue. A device whose runner died and did not come
back is retired."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from chiplore.agents.scale.engine import NoDevices


class DeviceSlots:
    def __init__(self, devices: Iterable[str]) -> None:
        self._free: dict[str, float] = dict.fromkeys(devices, 0.0)  # free device -> when it came free
        self._busy: set[str] = set()
        self._closed = False
        if not self._free:
            raise NoDevices("the target offers no device")
        self._changed = threading.Condition()

    def take(self, avoid: Iterable[str] = ()) -> str:
        """Wait for a free device and hold it: the earliest free one outside `avoid` (where a job
        just faulted), or one of `avoid` when no other device is left."""
        with self._changed:
            while (device := self._choose(set(avoid))) is None:
                self._changed.wait()
            return device

    def try_take(self, avoid: Iterable[str] = ()) -> str | None:
        """`take` without waiting: None when no device is free for this job now."""
        with self._changed:
            return self._choose(set(avoid))

    def give_back(self, device: str, clock_s: float) -> None:
        """The device is free again, from `clock_s` on the calendar."""
        with self._changed:
            self._busy.discard(device)
            self._free[device] = clock_s
            self._changed.notify_all()

    def retire(self, device: str) -> None:
        """The device's runner is gone for good: no job goes to it any more."""
        with self._changed:
            self._busy.discard(device)
            self._free.pop(device, None)
            self._changed.notify_all()

    def close(self) -> None:
        """The run is stopping: no further job takes a device (those running finish)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _choose(self, avoided: set[str]) -> str | None:
        """Under the lock: hold and return the device this job takes, None when it must wait."""
        if self._closed:
            raise NoDevices("the run is stopping")
        if not self._free and not self._busy:
            raise NoDevices("every device's runner is gone")
        others = {d: t for d, t in self._free.items() if d not in avoided}
        only_avoided = not (set(self._free) | self._busy) - avoided
        choice = others or (self._free if only_avoided else {})
        if not choice:
            return None
        device = min(choice, key=lambda d: (choice[d], d))
        del self._free[device]
        self._busy.add(device)
        return device

    def idle(self) -> int:
        """How many devices are free now."""
        with self._changed:
            return len(self._free)

    def live(self) -> int:
        with self._changed:
            return len(self._free) + len(self._busy)
