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
    DeviceJob,
    DeviceResult,
    DocPage,
    JobHandle,
    KernelSpec,
    ProbeTemplate,
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


class ToyChip:
    name = "toychip"
    description = "The toy chip: DMA lanes into a small compute array, programmed in Toyl (chiplore's test target)"

    def __init__(self, seed: int = 0) -> None:
        self.spec = gemv_spec()
        self.device = ToyDevice(seed, self._grade)
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

    def submit(self, job: DeviceJob) -> JobHandle:
        return self.device.submit(job)

    def result(self, handle: JobHandle) -> DeviceResult:
        return self.device.result(handle)

    def microbenchmarks(self) -> list[ProbeTemplate]:
        return microbenchmarks()

    def pack(self) -> ToyPack:
        return self._pack

    def _grade(self, program: Program, kernel: str, sets: tuple[str, ...]) -> Correctness | None:
        if kernel != GEMV:
            return None  # probes are timed, not graded
        return grade(program, kernel, sets, self.spec.atol, self.spec.rtol)


def from_settings(settings: Settings) -> ToyChip:
    """The factory chiplore calls (`CHIPLORE_TARGET=tests.toy:from_settings`, or a `chiplore.targets` entry point)."""
    return ToyChip(seed=settings.seed)
