"""The shared, scarce, noisy device (SIMULATOR.md 5): queue, budget, measurement noise, faults."""

from chiplore.core.target import Correctness, DeviceJob, DeviceResult, Fault, JobHandle, RunSample
from simulator.device.device import DeviceConfig, DeviceHang, Grader, InvalidJob, SimDevice
from simulator.device.models import ALL_SETS, GRADED_SETS, fixture_sets

__all__ = [
    "ALL_SETS",
    "GRADED_SETS",
    "Correctness",
    "DeviceConfig",
    "DeviceHang",
    "DeviceJob",
    "DeviceResult",
    "Fault",
    "Grader",
    "InvalidJob",
    "JobHandle",
    "RunSample",
    "SimDevice",
    "fixture_sets",
]
