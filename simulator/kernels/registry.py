"""The kernels one SimRNGD offers: its built-in kernels, the packs on the user's paths
(`CHIPLORE_KERNELS`) and those installed in the data dir (`chiplore kernel add`), in that order.

A pack is validated when it is loaded (`validate.validate_pack`), except the packs SimRNGD ships
(its tests validate them); an installed pack carries a stamp of the digest it was validated with, so
it is only re-validated after its files change. A path naming a built-in kernel's own pack (the
shipped folder, say) adds nothing and is no clash. Any problem is one `TargetError` line naming the
pack, and a target is not built from a set of packs with a problem in it: nothing half-loaded
reaches the graph.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from chiplore.core.errors import TargetError
from chiplore.core.target import Correctness, KernelSpec, TestResult
from chiplore.simulator.device import DeviceHang
from chiplore.simulator.execute.executor import ExecutionError, IndexOutOfRange
from chiplore.simulator.execute.grading import SMOKE_SET, grade_case, host_test
from chiplore.simulator.kernel_specs import packed_input_bytes
from chiplore.simulator.kernels.builtin import builtin_packs, is_shipped
from chiplore.simulator.kernels.manifest import MANIFEST, PackProblem
from chiplore.simulator.kernels.pack import KernelPack, Origin, read_pack
from chiplore.simulator.kernels.validate import FactsFor, SpaceFor, validate_pack
from chiplore.simulator.toolchain.check import check, checked_chip
from chiplore.simulator.toolchain.harness import register_kernel
from chiplore.simulator.toolchain.placement import LoweringError

STAMP = ".chiplore-validated"  # in an installed pack: the digest it was validated with
_validated: set[tuple[str, str | None]] = set()  # (digest, chip) validated in this process


REPLACE = ": delete that folder, then add the pack again, to install another version of it"


class KernelRegistry:
    """Packs by kernel name, in offering order."""

    def __init__(self, paths: tuple[Path, ...] = (), installed: Path | None = None,
                 space_for: SpaceFor | None = None, facts_for: FactsFor | None = None) -> None:  # fmt: skip
        self.installed, self.space_for, self.facts_for = installed, space_for, facts_for
        self.packs: dict[str, KernelPack] = dict(builtin_packs())
        for folder in _pack_folders(paths):
            if not self._is_builtin(folder):
                self._add(self._load(folder, "CHIPLORE_KERNELS"))
        if installed is not None and installed.is_dir():
            for folder in sorted(p for p in installed.iterdir() if p.is_dir() and not p.name.startswith(".")):
                self._add(self._load(folder, "installed"))

    # ---- what the target offers ---------------------------------------------------------------------

    def specs(self) -> list[KernelSpec]:
        return [pack.spec for pack in self.packs.values()]

    def origins(self) -> dict[str, Origin]:
        return {name: pack.origin for name, pack in self.packs.items()}

    def host_test(self, source: str, kernel: str, version: str, sets: tuple[str, ...] = (SMOKE_SET,)) -> TestResult:
        """The executor on fixture sets (the smoke one by default) against the kernel's reference."""
        pack = self.packs.get(kernel)
        if pack is not None:
            return host_test(source, pack.case, version, sets)
        checked = check(source, version)
        base = {"kernel": kernel, "toolchain": checked.version, "diagnostics": checked.diagnostics}
        if not checked.ok:
            return TestResult(**base, compiled=False, message="the program does not compile")
        return TestResult(**base, compiled=True, message=f"not executed: {kernel} is not a harness kernel, so there "
                          "is no reference to compare with")  # fmt: skip

    def grade_job(self, source: str, kernel: str, version: str, sets: tuple[str, ...]) -> Correctness | None:
        """The device's grader: the executor against the kernel's reference; None when it cannot be checked."""
        pack = self.packs.get(kernel)
        if pack is None:
            return None  # probes have no reference: they are timed, not graded
        try:
            return grade_case(source, pack.case, version, sets)
        except IndexOutOfRange as error:
            raise DeviceHang(str(error)) from error
        except (ExecutionError, LoweringError):
            return None

    def own_sets(self, kernel: str) -> tuple[str, ...]:
        """The fixture sets a kernel's pack draws besides the device's nine (its recipe lists them)."""
        pack = self.packs.get(kernel)
        return pack.own_sets if pack is not None else ()

    def input_bytes(self, kernel: str, source: str) -> int:
        return packed_input_bytes(self.packs.get(kernel), source)

    # ---- adding a pack ------------------------------------------------------------------------------

    def install(self, folder: Path) -> KernelSpec:
        """Validate the pack in `folder` and copy it into the installed folder; a TargetError (and
        nothing copied) when it is not valid or its kernel's name is taken."""
        if self.installed is None:
            raise TargetError("this target has no data dir to install kernel packs into")
        source = Path(folder).expanduser()
        pack = _read(source, "installed")
        self._clash(pack)
        _validate(pack, self.space_for, self.facts_for)
        destination = self.installed / pack.name
        if destination.exists():
            raise TargetError(f"kernel {pack.name} is already installed in {destination}{REPLACE}")
        staging = self.installed / f".staging-{pack.name}-{uuid.uuid4().hex[:8]}"
        try:
            self.installed.mkdir(parents=True, exist_ok=True)
            shutil.copytree(pack.folder, staging, ignore=shutil.ignore_patterns("__pycache__", ".*"))
            (staging / STAMP).write_text(pack.digest + "\n")
            staging.rename(destination)  # one step: another process sees the whole pack or none
        except OSError as error:
            shutil.rmtree(staging, ignore_errors=True)
            if destination.exists():
                raise TargetError(f"kernel {pack.name} is already installed in {destination}{REPLACE}") from None
            raise TargetError(f"cannot install kernel pack {pack.name} into {self.installed}: {error}") from None
        installed = _read(destination, "installed")
        self._add(installed)
        return installed.spec

    # ---- loading ------------------------------------------------------------------------------------

    def _load(self, folder: Path, origin: Origin) -> KernelPack:
        pack = _read(folder, origin)
        self._clash(pack)
        stamped = (folder / STAMP).is_file() and (folder / STAMP).read_text().strip() == pack.digest
        if not ((origin == "installed" and stamped) or is_shipped(folder)):
            _validate(pack, self.space_for, self.facts_for)
        return pack

    def _is_builtin(self, folder: Path) -> bool:
        return any(p.origin == "built-in" and p.folder == folder.resolve() for p in self.packs.values())

    def _clash(self, pack: KernelPack) -> None:
        other = self.packs.get(pack.name)
        if other is None:
            return
        if other.origin == "built-in":
            raise TargetError(f"kernel pack {pack.folder}: kernel {pack.name} is built in; give the pack another name")
        if other.origin == "installed":
            raise TargetError(f"kernel {pack.name} is already installed in {other.folder}{REPLACE}")
        if other.folder == pack.folder:
            raise TargetError(f"kernel {pack.name} is already offered by {other.origin} ({other.folder}): it runs "
                              f"as it is; add it only to keep it once {other.origin} no longer names it")  # fmt: skip
        home = Path(self.installed).resolve() if self.installed is not None else None
        installed = next((p.folder for p in (other, pack) if home is not None and p.folder.parent == home), None)
        keep = (f"leave it out of CHIPLORE_KERNELS, or delete the installed copy {installed}" if installed
                else "name one of them in CHIPLORE_KERNELS")  # fmt: skip
        raise TargetError(f"kernel {pack.name} is defined twice: {other.folder} ({other.origin}) and {pack.folder} "
                          f"({pack.origin}); keep one: {keep}")  # fmt: skip

    def _add(self, pack: KernelPack) -> None:
        self.packs[pack.name] = pack
        if register_kernel(pack.name, pack.baseline):
            _forget_checks()


def _pack_folders(paths: tuple[Path, ...]) -> list[Path]:
    """Each path is a pack, or a folder of packs (its sub-folders that hold a kernel.toml)."""
    folders: list[Path] = []
    for path in paths:
        path = Path(path).expanduser()
        if not path.is_dir():
            raise TargetError(f"CHIPLORE_KERNELS names {path}, which is not a folder")
        if (path / MANIFEST).is_file():
            folders.append(path)
        else:
            folders += sorted(p for p in path.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
    return folders


def _read(folder: Path, origin: Origin) -> KernelPack:
    try:
        return read_pack(folder, origin)
    except PackProblem as problem:
        raise TargetError(f"kernel pack {folder}: {problem}") from None


def _validate(pack: KernelPack, space_for: SpaceFor | None, facts_for: FactsFor | None) -> None:
    key = (pack.digest, checked_chip())  # a pack is validated on a chip: its baseline may not compile on another
    if key in _validated:
        return
    try:
        validate_pack(pack, space_for, facts_for)
    except PackProblem as problem:
        raise TargetError(f"kernel pack {pack.name} ({pack.folder}): {problem}") from None
    _validated.add(key)


def _forget_checks() -> None:
    """A program checked before a kernel's signature changed may hold a stale E0102 verdict."""
    from chiplore.simulator.toolchain import check as checker

    checker._check_cached.cache_clear()
