"""SimRNGD behind the Target interface (DESIGN.md section 2, chiplore.core.target).

What agents get: the toolchain versions, the vendor pages that exist for each, the harness
kernels (signature, tolerances, weight bytes, bound, the official baseline source; never the
optimised examples), the free compiler check, and the scarce, noisy device. Host-side execution
(`host_test`) and graded correctness come with the executor of SIMULATOR.md 6.4; until then device
results carry `correctness = None`.
"""

from __future__ import annotations

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
from simulator import DEFAULT_TOOLCHAIN, DESCRIPTION, NAME, TOOLCHAIN_VERSIONS
from simulator.bench import microbenchmarks
from simulator.device import DeviceConfig, DeviceHang, SimDevice
from simulator.device.models import SMOKE_SET
from simulator.execute.executor import ExecutionError, IndexOutOfRange
from simulator.execute.grading import grade_program
from simulator.kernel_specs import input_bytes, kernel_specs
from simulator.pack import SimRNGDPack
from simulator.toolchain.check import check
from simulator.toolchain.docs import render_docs
from simulator.toolchain.harness import HARNESS_KERNELS
from simulator.toolchain.placement import LoweringError
from simulator.toolchain.stats import analyze
from simulator.toolchain.versions import spec


class SimRNGD:
    name = NAME
    description = DESCRIPTION

    def __init__(self, seed: int = 0, device: DeviceConfig | None = None) -> None:
        self.device = SimDevice(seed, device, input_bytes=input_bytes, grader=grade_job)
        self._pack = SimRNGDPack()

    def toolchains(self) -> list[str]:
        return list(TOOLCHAIN_VERSIONS)

    def default_toolchain(self) -> str:
        return DEFAULT_TOOLCHAIN

    def docs(self, version: str) -> list[DocPage]:
        """The vendor pages of one toolchain version and its CHANGES.md, written against this chip."""
        spec(version)  # an unknown version is a ValueError that names the known ones
        pages = []
        for path, text in render_docs(version).items():
            title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), path)
            pages.append(DocPage(version=version, path=path, title=title, text=text))
        return pages

    def kernels(self) -> list[KernelSpec]:
        return kernel_specs()

    def check(self, source: str, version: str) -> CheckResult:
        return check(source, version)

    def analyze(self, source: str, version: str | None = None) -> ProgramStats:
        """ferc's lowering statistics (`ferc stats`): free like check; a program that does not compile
        gives `compiled = False` with check's diagnostics."""
        return analyze(source, version)

    def host_test(self, source: str, kernel: str, version: str) -> TestResult:
        """The executor on the smoke fixtures: free, on the host, slower than the device."""
        checked = check(source, version)
        if not checked.ok:
            return TestResult(kernel=kernel, toolchain=checked.version, compiled=False, diagnostics=checked.diagnostics,
                              message="the program does not compile")  # fmt: skip
        base = {"kernel": kernel, "toolchain": checked.version, "compiled": True, "diagnostics": checked.diagnostics}
        if kernel not in HARNESS_KERNELS:
            return TestResult(**base, message=f"not executed: {kernel} is not a harness kernel, so there is no "
                              "reference to compare with")  # fmt: skip
        try:
            correctness = grade_program(source, kernel, checked.version, (SMOKE_SET,))
        except IndexOutOfRange as error:
            return TestResult(**base, correctness=Correctness(passed=False, message=str(error)),
                              message=f"would hang on the device: {error}")  # fmt: skip
        except (ExecutionError, LoweringError) as error:
            return TestResult(**base, message=f"not executed: {error}")
        return TestResult(**base, correctness=correctness, message=correctness.message)

    def submit(self, job: DeviceJob) -> JobHandle:
        return self.device.submit(job)

    def result(self, handle: JobHandle) -> DeviceResult:
        return self.device.result(handle)

    def microbenchmarks(self) -> list[ProbeTemplate]:
        """The starting probes (simulator/bench); agents may write more."""
        return microbenchmarks()

    def pack(self) -> SimRNGDPack:
        """What chiplore knows of this chip family: probes, fits, doc patterns, repairs, design spaces."""
        return self._pack


def grade_job(source: str, kernel: str, version: str, sets: tuple[str, ...]) -> Correctness | None:
    """The device's grader: the executor against the references; None when it cannot be checked."""
    if kernel not in HARNESS_KERNELS:
        return None  # probes have no reference: they are timed, not graded
    try:
        return grade_program(source, kernel, version, sets)
    except IndexOutOfRange as error:
        raise DeviceHang(str(error)) from error
    except (ExecutionError, LoweringError):
        return None


def from_settings(settings: Settings) -> SimRNGD:
    """The `chiplore.targets` entry point: SimRNGD seeded from chiplore's settings."""
    return SimRNGD(seed=settings.seed)
