"""The shared, scarce, noisy device (SIMULATOR.md 5): queue, budget, measurement noise, faults."""

from simulator.device.device import DeviceConfig, Grader, InvalidJob, SimDevice
from simulator.device.models import (
    ALL_SETS,
    GRADED_SETS,
    Correctness,
    DeviceJob,
    DeviceResult,
    Fault,
    JobHandle,
    RunSample,
)

__all__ = [
    "ALL_SETS",
    "GRADED_SETS",
    "Correctness",
    "DeviceConfig",
    "DeviceJob",
    "DeviceResult",
    "Fault",
    "Grader",
    "InvalidJob",
    "JobHandle",
    "RunSample",
    "SimDevice",
]
