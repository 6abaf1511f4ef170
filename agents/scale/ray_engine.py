"""The engine on Ray: one actor per device, free screens as CPU tasks.

Each device's actor holds a Ray custom resource named for its kind (`device_rngd-sim`, one unit per
device, as Kernel Tuner asks for `num_gpus=1` per GPU), builds the target in its own process and runs
one job at a time on its device. It is restarted when its process dies; the job it was running is run
again on another device by the driver (nothing of it was recorded: only the driver writes the graph).
A candidate's free screens (compile, host test, estimate) are a CPU task, retried by Ray when its
worker dies (screening is free and has no effect). With no address, a local Ray is started with
`workers` CPUs and one device resource per device; with one, this process joins that cluster, whose
nodes declare their devices (`ray start --resources '{"device_rngd-sim": 4}'`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from chiplore.agents.scale.engine import DeviceLost, NoDevices, ScreenRequest, Served, TargetFactory
from chiplore.agents.scale.screening import screen_here
from chiplore.agents.screens import ScreenResult
from chiplore.core.errors import ConfigError
from chiplore.core.target import ChipIdentity, DeviceInfo, DeviceJob, Target

RESTART_WAIT_S = 60.0  # how long a lost device's actor gets to come back before the device is retired
CHIP_ANSWER_S = 600.0  # how long the device runners get to start and say their chip (a busy cluster's wait)
_TARGETS: dict[str, Target] = {}  # a worker process's targets, by engine


def device_resource(kind: str) -> str:
    """The Ray custom resource a device of this kind provides (one unit per device)."""
    return f"device_{kind}"


def _target(key: str, factory: TargetFactory) -> Target:
    if key not in _TARGETS:
        _TARGETS[key] = factory()
    return _TARGETS[key]


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class DeviceActor:
    """One device's runner: the target, built in this process, and jobs on this one device."""

    def __init__(self, factory: TargetFactory, device: str, epoch: float) -> None:
        self.target, self.device, self.epoch = factory(), device, epoch
        self.clock = self.target.simulated_clock()  # None: the device lives on the wall clock

    def serve(self, job: DeviceJob, arrive_s: float) -> Served:
        if self.clock is not None:
            self.clock.wait_until(self.device, arrive_s)
        arrived = self._clock()
        result = self.target.result(self.target.submit(job, device=self.device))
        return Served(self.device, result, arrived, self._clock())

    def ping(self) -> int:
        return os.getpid()

    def chip(self) -> tuple[ChipIdentity | None, str]:
        """The chip this device is, and the address of the node it runs on."""
        return self.target.chip(), ray.util.get_node_ip_address()

    def _clock(self) -> float:
        if self.clock is not None:
            return self.clock.device_clock(self.device)
        return time.time() - self.epoch


@ray.remote(num_cpus=1, max_retries=3)
def _screen(key: str, factory: TargetFactory, request: ScreenRequest) -> list[ScreenResult]:
    return screen_here(_target(key, factory), request)


class RayEngine:
    """Device actors and screening tasks on a local Ray (started here) or a cluster (joined)."""

    def __init__(self, factory: TargetFactory, devices: list[DeviceInfo], *, workers: int,
                 address: str | None = None, chip: ChipIdentity | None = None) -> None:  # fmt: skip
        """`chip`: the chip the driver's target is (the one its graph learnt); a device actor that builds
        its target as another chip (a cluster node set up for another board) is refused before any job."""
        if not devices:
            raise NoDevices("the target offers no device")
        self._devices = list(devices)
        needed: dict[str, float] = {}
        for device in devices:
            needed[device_resource(device.kind)] = needed.get(device_resource(device.kind), 0.0) + 1.0
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, resources=needed, include_dashboard=False, log_to_driver=False)
        try:
            self._check_resources(needed, address)
        except ConfigError:
            if self._owns_ray:
                ray.shutdown()
            raise
        self._key = uuid.uuid4().hex
        self._factory = ray.put(factory)
        self._screens = threading.BoundedSemaphore(workers)  # at most `workers` screens in flight
        epoch = time.time()
        self._actors = {
            device.id: DeviceActor.options(resources={device_resource(device.kind): 1}).remote(  # type: ignore[attr-defined]
                factory, device.id, epoch
            )
            for device in devices
        }  # fmt: skip
        if chip is not None:
            try:
                self._check_chips(chip)
            except BaseException:  # a refusal, Ctrl-C while the actors start: none is left behind, nor an own Ray
                self.close()
                raise

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def devices(self) -> list[DeviceInfo]:
        return list(self._devices)

    def serve(self, device: str, job: DeviceJob, arrive_s: float) -> Served:
        try:
            return ray.get(self._actors[device].serve.remote(job, arrive_s))  # type: ignore[no-any-return]
        except RayActorError as error:
            raise DeviceLost(f"device {device}: its runner died ({type(error).__name__})") from None

    def alive(self, device: str) -> bool:
        try:
            ray.get(self._actors[device].ping.remote(), timeout=RESTART_WAIT_S)
        except (RayActorError, GetTimeoutError):
            return False
        return True

    def screen(self, request: ScreenRequest) -> list[ScreenResult]:
        with self._screens:
            return ray.get(_screen.remote(self._key, self._factory, request))  # type: ignore[no-any-return]

    def actor(self, device: str) -> object:
        """The device's actor handle (a test kills it to see the loop go on)."""
        return self._actors[device]

    def close(self) -> None:
        for handle in self._actors.values():
            with contextlib.suppress(ValueError, RayActorError):  # an actor already gone is what we want
                ray.kill(handle)  # type: ignore[arg-type]
        self._actors = {}
        if self._owns_ray:
            ray.shutdown()

    def _check_chips(self, expected: ChipIdentity) -> None:
        """Refuse devices of another chip than the driver's: a run's designs are priced and judged with
        one chip's facts, and a node's device of another would mix two chips' cycles in one comparison."""
        ids = list(self._actors)
        asked = [self._actors[i].chip.remote() for i in ids]  # type: ignore[attr-defined]
        ready, _ = ray.wait(asked, num_returns=len(asked), timeout=CHIP_ANSWER_S)
        if len(ready) < len(asked):  # their devices held by another run, or nodes that never came
            late = [device for device, ref in zip(ids, asked, strict=True) if ref not in ready]
            raise ConfigError(f"{len(late)} device runner(s) did not start within {CHIP_ANSWER_S:.0f} s "
                              f"({', '.join(late[:8])}{' ...' if len(late) > 8 else ''}): their devices are busy "
                              "(another run holds them) or their nodes are gone")  # fmt: skip
        try:
            answers = ray.get(asked)
        except RayError as error:  # the target could not be built on a node, or could not say its chip
            cause = str(error).strip().splitlines()[-1][:300] if str(error).strip() else type(error).__name__
            raise ConfigError(f"a device runner failed as it started: {cause}") from None
        others = [f"{device} on {node} is {chip.describe() if chip else 'a chip that says nothing of itself'}"
                  for device, (chip, node) in zip(ids, answers, strict=True)
                  if chip is None or chip.id != expected.id]  # fmt: skip
        if others:
            raise ConfigError(f"every device of a run must be the chip this process's target is "
                              f"({expected.describe()}), and {'; '.join(others)}: set those nodes up for the same "
                              "chip, or join a cluster whose devices all are")  # fmt: skip

    @staticmethod
    def _check_resources(needed: dict[str, float], address: str | None) -> None:
        offered = ray.cluster_resources()
        short = {name: count for name, count in needed.items() if offered.get(name, 0.0) < count}
        if short:
            where = f"the Ray cluster at {address}" if address else "this Ray instance"
            wanted = ", ".join(f'"{name}": {count:g}' for name, count in sorted(short.items()))
            raise ConfigError(f"{where} offers too few devices: start its nodes with "
                              f"`ray start --resources '{{{wanted}}}'` (one unit per device)")  # fmt: skip
