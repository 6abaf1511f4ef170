"""What the loop on many devices needs from an execution engine: a job run on a device it chose,
and a candidate screened on a CPU worker. `chiplore.agents.scale.ray_engine` implements it on Ray; a test or
another engine (Dask, a queue) implements the same two methods."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from chiplore.agents.screens import Candidate, ScreenResult
from chiplore.core.errors import KernelStop
from chiplore.core.target import DeviceInfo, DeviceJob, DeviceResult, Target

TargetFactory = Callable[[], Target]  # builds the target in a worker's process (picklable: a module-level function)


class DeviceLost(Exception):
    """The device's runner died before the job's result came back: nothing of the job was recorded,
    so it runs again on another device."""


class NoDevices(KernelStop):
    """Every device's runner is gone: no job can run."""


@dataclass(frozen=True)
class Served:
    """A job a device ran: where, what it reported, and the device's clock when the job reached it and
    when it ended (seconds of the run's calendar: simulated on a simulated device, the wall's since the
    engine started on a real one). In between, the job held the device: queued behind other tenants,
    running, or resetting the device after a fault."""

    device: str
    result: DeviceResult
    arrived_s: float
    clock_s: float

    @property
    def held_s(self) -> float:
        return max(self.clock_s - self.arrived_s, 0.0)


@dataclass(frozen=True)
class ScreenRequest:
    """Everything a CPU worker needs to screen one candidate besides the target it builds itself:
    the toolchain, the rules in force, the facts and calibration the estimate prices it with."""

    candidate: Candidate
    version: str
    rules: tuple[object, ...]  # chiplore.agents.knowledge.Rule, picklable
    facts: dict[str, float]
    calibration: float  # the kernel's calibration factor for the cost model


class Engine(Protocol):
    """Where the loop's work runs. Every method may be called from several threads at once."""

    def devices(self) -> list[DeviceInfo]:
        """The devices it runs jobs on (the target's)."""
        ...

    def serve(self, device: str, job: DeviceJob, arrive_s: float) -> Served:
        """Run one job on `device` and wait for it. On a simulated device the job arrives at
        `arrive_s` of the calendar (the device idles until then); DeviceLost when the device's
        runner died meanwhile."""
        ...

    def alive(self, device: str) -> bool:
        """After a DeviceLost: whether the device's runner came back (restarted) to take more jobs."""
        ...

    def screen(self, request: ScreenRequest) -> list[ScreenResult]:
        """The standard screens of a candidate, cheapest first, up to the first that fails."""
        ...

    def close(self) -> None:
        """Stop the device runners (and the engine, when it started one)."""
        ...
