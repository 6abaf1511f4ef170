"""SimRNGD behind the Target interface (chiplore.core.target; docs/targets.md §2).

What agents get: the toolchain versions, the vendor pages that exist for each, the kernels of its
kernel packs (signature, tolerances, weight bytes, bound, the official baseline source, the op graph;
never the optimised examples), the free compiler check, the host executor (`host_test`) and the
scarce, noisy device, which grades every pack kernel against its pack's reference.

Kernels come from the built-in packs, the packs on `CHIPLORE_KERNELS` and those installed in the data
dir (`add_kernel`, `chiplore kernel add`): see simulator/kernels and docs/kernels.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from chiplore.core.errors import TargetError
from chiplore.core.settings import Settings
from chiplore.core.stats import ProgramStats
from chiplore.core.target import (
    CheckResult,
    ChipIdentity,
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
from chiplore.simulator import DEFAULT_TOOLCHAIN, DESCRIPTION, NAME, TOOLCHAIN_VERSIONS
from chiplore.simulator.bench import microbenchmarks
from chiplore.simulator.device import DeviceConfig, SimDevice
from chiplore.simulator.device.identity import chip_identity
from chiplore.simulator.device.pool import DevicePool, pool_configs
from chiplore.simulator.kernels.registry import KernelRegistry
from chiplore.simulator.pack import SimRNGDPack
from chiplore.simulator.pack.generator.learnt import compile_facts
from chiplore.simulator.shape import Chip
from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.docs import render_docs
from chiplore.simulator.toolchain.stats import analyze
from chiplore.simulator.toolchain.versions import spec

KERNELS_DIR = "kernels"  # installed packs: <data dir>/kernels/<name>/


class SimRNGD(Target):
    name = NAME
    description = DESCRIPTION

    def __init__(self, seed: int = 0, device: DeviceConfig | None = None, *, kernel_paths: tuple[Path, ...] = (),
                 kernels_dir: Path | None = None, devices: int = 1,
                 device_configs: list[DeviceConfig] | None = None) -> None:  # fmt: skip
        """`kernel_paths`: packs, or folders of packs, to offer besides the built-in ones;
        `kernels_dir`: where `add_kernel` installs packs (and they are loaded from). A pack with a
        problem is a one-line TargetError here. `devices`: how many devices, each configured like
        `device` (`device_configs` configures each one instead: a flaky one, say)."""
        self._pack = SimRNGDPack()
        # a pack's generated program is validated as its toolchain's compiler allows (a 0.7.0 pack's
        # is written without the .cast that 0.7.0 removed): the facts learning would record, by compiling
        self._kernels = KernelRegistry(kernel_paths, kernels_dir, space_for=self._pack.design_space,
                                       facts_for=compile_facts)  # fmt: skip
        self._pool = DevicePool(seed, device_configs or pool_configs(devices, device),
                                input_bytes=self._kernels.input_bytes, grader=self._kernels.grade_job,
                                own_sets=self._kernels.own_sets)  # fmt: skip
        self.device: SimDevice = self._pool.first  # the default device (a one-device target's only one)

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
        return self._kernels.specs()

    def kernel_origins(self) -> dict[str, str]:
        """Where each kernel's pack comes from: built-in, CHIPLORE_KERNELS or installed."""
        return dict(self._kernels.origins())

    def add_kernel(self, folder: Path) -> KernelSpec:
        """Validate the kernel pack in `folder` and install it in the data dir (docs/kernels.md)."""
        return self._kernels.install(folder)

    def check(self, source: str, version: str) -> CheckResult:
        return check(source, version)

    def analyze(self, source: str, version: str | None = None) -> ProgramStats:
        """ferc's lowering statistics (`ferc stats`): free like check; a program that does not compile
        gives `compiled = False` with check's diagnostics."""
        return analyze(source, version)

    def host_test(self, source: str, kernel: str, version: str) -> TestResult:
        """The executor on the smoke fixtures: free, on the host, slower than the device."""
        return self._kernels.host_test(source, kernel, version)

    def host_check(self, source: str, kernel: str, version: str, sets: tuple[str, ...]) -> TestResult | None:
        """The executor on named fixture sets (a kernel's check sets), as the device would grade them."""
        return self._kernels.host_test(source, kernel, version, sets)

    def devices(self) -> list[DeviceInfo]:
        """The simulated devices (`CHIPLORE_DEVICES`), `rngd-sim-0` first."""
        return self._pool.infos()

    def submit(self, job: DeviceJob, device: str | None = None) -> JobHandle:
        return self._pool.submit(job, device)

    def result(self, handle: JobHandle) -> DeviceResult:
        return self._pool.result(handle)

    def device_clock(self, device: str) -> float:
        """The simulated clock of one device (chiplore.core.target.SimulatedClock)."""
        return self._pool.clock(device)

    def chip(self) -> ChipIdentity:
        """A fingerprint of the chip CHIPLORE_SIM_TRUTH describes (the documented one where it is unset)."""
        return chip_identity()

    def simulated_clock(self) -> SimRNGD:
        """Its devices keep simulated time (chiplore.core.target.SimulatedClock)."""
        return self

    def wait_until(self, device: str, clock_s: float) -> None:
        """Let one device's simulated clock run on to `clock_s` (its tenants keep arriving)."""
        self._pool.wait_until(device, clock_s)

    def microbenchmarks(self) -> list[ProbeTemplate]:
        """The starting probes (simulator/bench), written for the documented shape; agents may write more."""
        return microbenchmarks()

    def microbenchmarks_for(self, found: Mapping[str, float]) -> list[ProbeTemplate]:
        """The probes written for the shape MB00 found (its values by their local names)."""
        return microbenchmarks(Chip.named(found))

    def pack(self) -> SimRNGDPack:
        """What chiplore knows of this chip family: probes, fits, doc patterns, repairs, design spaces."""
        return self._pack


def grade_job(source: str, kernel: str, version: str, sets: tuple[str, ...]) -> Correctness | None:
    """The grader of a device that runs the built-in kernels only (benchmarks/executor.py): the executor
    against their references; None when it cannot be checked. `fe-run` grades every pack SimRNGD offers."""
    return _builtin_registry().grade_job(source, kernel, version, sets)


def _builtin_registry() -> KernelRegistry:
    global _BUILTIN
    if _BUILTIN is None:
        _BUILTIN = KernelRegistry()
    return _BUILTIN


_BUILTIN: KernelRegistry | None = None


def kernel_paths(settings: Settings) -> tuple[Path, ...]:
    """The folders `CHIPLORE_KERNELS` names (os.pathsep-separated; empty entries ignored)."""
    return tuple(Path(part).expanduser() for part in settings.kernels.split(os.pathsep) if part.strip())


def from_settings(settings: Settings) -> SimRNGD:
    """The `chiplore.targets` entry point: SimRNGD seeded from chiplore's settings, with the kernel
    packs on CHIPLORE_KERNELS and those installed in the data dir, and CHIPLORE_DEVICES devices."""
    if settings.data_dir.exists() and not settings.data_dir.is_dir():
        raise TargetError(f"the data dir {settings.data_dir} is a file, not a folder")
    return SimRNGD(seed=settings.seed, kernel_paths=kernel_paths(settings), kernels_dir=settings.data_dir / KERNELS_DIR,
                   devices=settings.devices)  # fmt: skip
