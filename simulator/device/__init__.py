"""The shared, scarce, noisy device (docs/simrngd.md §8): queue, budget, measurement noise, faults."""

from chiplore.core.target import Correctness, DeviceJob, DeviceResult, Fault, JobHandle, RunSample
from chiplore.simulator.device.device import DeviceConfig, DeviceHang, Grader, InvalidJob, SimDevice
from chiplore.simulator.device.models import ALL_SETS, GRADED_SETS, InvalidState, declared_kernels, fixture_sets
from chiplore.simulator.device.state import CorruptState, DeviceStore

__all__ = [
    "ALL_SETS",
    "GRADED_SETS",
    "Correctness",
    "CorruptState",
    "DeviceConfig",
    "DeviceHang",
    "DeviceJob",
    "DeviceResult",
    "DeviceStore",
    "Fault",
    "Grader",
    "InvalidJob",
    "InvalidState",
    "JobHandle",
    "RunSample",
    "SimDevice",
    "declared_kernels",
    "fixture_sets",
]
