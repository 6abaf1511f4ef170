"""A rack of simulated RNGDs: several devices of one kind, each its own `SimDevice` with its own
queue and background tenants, clock, drift and noise, drawn from generators seeded by (project seed,
device id). Device 0 is exactly the single device of a one-device target, so a pool of one behaves
as SimRNGD always did."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from chiplore.core.errors import TargetError
from chiplore.core.target import DeviceInfo, DeviceJob, DeviceResult, JobHandle
from chiplore.simulator.device.device import DeviceConfig, Grader, SimDevice

KIND = "rngd-sim"
MAX_DEVICES = 256


def pool_configs(count: int, template: DeviceConfig | None = None) -> list[DeviceConfig]:
    """`count` devices configured like `template`, named `rngd-sim-0`, `rngd-sim-1`, ... (one device
    keeps the template's own name)."""
    if not 1 <= count <= MAX_DEVICES:
        raise TargetError(f"a device pool has 1 to {MAX_DEVICES} devices, not {count}")
    template = template or DeviceConfig()
    if count == 1:
        return [template]
    return [template.model_copy(update={"device_id": f"{KIND}-{index}"}) for index in range(count)]


class DevicePool:
    """The devices of one SimRNGD target, by id; jobs go to the device they name (the first by default)."""

    def __init__(self, seed: int, configs: Sequence[DeviceConfig], *, input_bytes: Callable[[str, str], int],
                 grader: Grader, own_sets: Callable[[str], tuple[str, ...]] | None = None) -> None:  # fmt: skip
        ids = [config.device_id for config in configs]
        if not ids or len(set(ids)) != len(ids):
            raise TargetError(f"a device pool needs at least one device and distinct ids, not {ids}")
        self._devices = {config.device_id: SimDevice(seed, config, input_bytes=input_bytes, grader=grader,
                                                     own_sets=own_sets)
                         for config in configs}  # fmt: skip

    @property
    def first(self) -> SimDevice:
        return next(iter(self._devices.values()))

    def infos(self) -> list[DeviceInfo]:
        return [DeviceInfo(id=device_id, kind=KIND) for device_id in self._devices]

    def device(self, device_id: str | None) -> SimDevice:
        """The device named `device_id` (the first when None); a TargetError names those there are."""
        if device_id is None:
            return self.first
        found = self._devices.get(device_id)
        if found is None:
            raise TargetError(f"no device {device_id!r}; this target has {', '.join(self._devices)}")
        return found

    def submit(self, job: DeviceJob, device_id: str | None = None) -> JobHandle:
        return self.device(device_id).submit(job)

    def result(self, handle: JobHandle) -> DeviceResult:
        return self.device(handle.device_id).result(handle)

    def clock(self, device_id: str) -> float:
        return self.device(device_id).now

    def wait_until(self, device_id: str, clock_s: float) -> None:
        device = self.device(device_id)
        device.advance(clock_s - device.now)
