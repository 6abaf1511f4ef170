"""The toy chip behind chiplore's Target interface (chiplore.core.target): its toolchains, docs,
kernel, compiler, host executor, device and microbenchmarks, and the pack its team wrote."""

from __future__ import annotations

from pathlib import Path

from chiplore.core.errors import TargetError
from chiplore.core.settings import Settings
from chiplore.core.stats import ProgramStats
from chiplore.core.target import (
    CheckResult,
    Correctness,
    DeviceInfo,
    DeviceJob,
    DeviceResult,
    DocPage,
    JobHandle,
    KernelSpec,
    ProbeTemplate,
    Target,
    TestResult,
)
from tests.toy.bench import microbenchmarks
from tests.toy.compiler import Program, analyse
from tests.toy.device import ToyDevice
from tests.toy.docs import pages
from tests.toy.execute import grade
from tests.toy.kernel import GEMV, gemv_spec
from tests.toy.pack import ToyPack
from tests.toy.stats import analyze
from tests.toy.versions import DEFAULT_VERSION, VERSIONS

SMOKE = ("smoke",)


class ToyChip(Target):
    name = "toychip"
    description = "The toy chip: DMA lanes into a small compute array, programmed in Toyl (chiplore's test target)"

    def __init__(self, seed: int = 0, devices: int = 1, flaky: dict[str, float] | None = None) -> None:
        """`devices`: how many toy devices (`toy-0`, `toy-1`, ...), each with its own clock and noise;
        `flaky`: the share of its jobs a device (by id) faults."""
        self.spec = gemv_spec()
        flaky = flaky or {}
        self._devices = {device.device_id: device for device in
                         (ToyDevice(seed, self._grade, index, flaky.get(f"toy-{index}", 0.0))
                          for index in range(devices))}  # fmt: skip
        self.device = self._devices["toy-0"]
        self._pack = ToyPack()

    def toolchains(self) -> list[str]:
        return list(VERSIONS)

    def default_toolchain(self) -> str:
        return DEFAULT_VERSION

    def docs(self, version: str) -> list[DocPage]:
        return pages(version)

    def kernels(self) -> list[KernelSpec]:
        return [self.spec]

    def add_kernel(self, folder: Path) -> KernelSpec:
        raise TargetError(f"the toy chip takes no kernel packs: it runs its one kernel, {GEMV} ({folder} not added)")

    def check(self, source: str, version: str) -> CheckResult:
        return analyse(source, version)[0]

    def analyze(self, source: str, version: str) -> ProgramStats:
        return analyze(source, version)

    def host_test(self, source: str, kernel: str, version: str) -> TestResult:
        checked, program = analyse(source, version)
        if not checked.ok:
            return TestResult(kernel=kernel, toolchain=version, compiled=False, diagnostics=checked.diagnostics,
                              message="the program does not compile")  # fmt: skip
        correctness = self._grade(program, kernel, SMOKE)
        message = correctness.message if correctness else f"not executed: no reference for kernel {kernel!r}"
        return TestResult(kernel=kernel, toolchain=version, compiled=True, diagnostics=checked.diagnostics,
                          correctness=correctness, message=message)  # fmt: skip

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(id=device_id, kind="toy") for device_id in self._devices]

    def submit(self, job: DeviceJob, device: str | None = None) -> JobHandle:
        return self._device(device).submit(job)

    def result(self, handle: JobHandle) -> DeviceResult:
        return self._device(handle.device_id).result(handle)

    def simulated_clock(self) -> ToyChip:
        return self

    def device_clock(self, device: str) -> float:
        return self._device(device).now

    def wait_until(self, device: str, clock_s: float) -> None:
        self._device(device).advance_to(clock_s)

    def microbenchmarks(self) -> list[ProbeTemplate]:
        return microbenchmarks()

    def pack(self) -> ToyPack:
        return self._pack

    def _device(self, device_id: str | None) -> ToyDevice:
        found = self._devices.get(device_id or "toy-0")
        if found is None:
            raise TargetError(f"no device {device_id!r}; the toy chip has {', '.join(self._devices)}")
        return found

    def _grade(self, program: Program, kernel: str, sets: tuple[str, ...]) -> Correctness | None:
        if kernel != GEMV:
            return None  # probes are timed, not graded
        return grade(program, kernel, sets, self.spec.atol, self.spec.rtol)


def from_settings(settings: Settings) -> ToyChip:
    """The factory chiplore calls (`CHIPLORE_TARGET=tests.toy:from_settings`, or a `chiplore.targets` entry point)."""
    return ToyChip(seed=settings.seed, devices=settings.devices)
