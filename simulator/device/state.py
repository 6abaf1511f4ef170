"""Where `fe-run` keeps one device between calls: `<data dir>/device/<device id>.json`.

Every read-modify-write of the state happens under an exclusive lock on `<device id>.lock`, so
concurrent `fe-run` processes sharing a data dir queue behind each other and no charge is lost.
The state is written to a temporary file, fsynced and renamed over the old one, so a write cut
short (a crash, a full disk, a kill) leaves the previous state, never half of one. A state that is
damaged anyway is refused with its path and `fe-run reset` moves it aside.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel

from chiplore.core.errors import TargetError
from chiplore.simulator.device.device import DAY_S, DeviceConfig, SimDevice
from chiplore.simulator.device.models import DeviceState, InvalidState
from chiplore.simulator.textfile import UnreadableFile, read_text_file

MAX_STATE_BYTES = 64 * 1024 * 1024  # a ledger of years of agent-days is a few MB
RESET_HINT = "`fe-run reset` starts the device afresh (keeping the old file as a backup)"


class StateError(TargetError):
    """The device's state cannot be kept: its directory or file cannot be written or locked."""

    def __init__(self, path: Path, reason: str, hint: str = "") -> None:
        super().__init__(f"device state {path}: {reason}" + (f"; {hint}" if hint else ""))
        self.path, self.reason = path, reason


class CorruptState(StateError):
    """The saved device state cannot be read or does not fit this device."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(path, reason, RESET_HINT)


class AgentUsage(BaseModel):
    agent: str
    spent_today_s: float
    left_today_s: float
    pending: int  # jobs that finish after the device's clock


class DeviceStatus(BaseModel):
    """What `fe-run status` reports: the device's clock, its jobs and the budget ledger."""

    device_id: str
    seed: int
    state_path: str
    saved: bool  # False: no job has run yet; the device starts fresh
    clock_s: float
    day: int
    jobs: int
    project_spent_s: float
    project_budget_s: float | None
    agent_budget_s_per_day: float
    agents: list[AgentUsage]


class ResetReport(BaseModel):
    """What `fe-run reset` did."""

    device_id: str
    state_path: str
    removed: bool
    backup_path: str | None = None
    previous: DeviceStatus | None = None  # what the old state held, when it was readable
    problem: str | None = None  # why the old state was unreadable, when it was


class DeviceStore:
    """One device's state file under a data dir."""

    def __init__(self, data_dir: Path, device_id: str) -> None:
        self.directory = data_dir / "device"
        self.device_id = device_id
        self.path = self.directory / f"{device_id}.json"
        self.backup_path = self.directory / f"{device_id}.json.bak"
        self.lock_path = self.directory / f"{device_id}.lock"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the device's lock: one reader-modifier-writer at a time, across processes."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            lock = self.lock_path.open("a")
        except OSError as error:
            raise StateError(self.lock_path, f"cannot lock: {error.strerror or error}") from None
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def session(self, device: SimDevice) -> Iterator[SimDevice]:
        """Continue `device` from the saved state and save it when the block ends without an
        error (a refused job changes nothing). Called by `fe-run submit` around one job."""
        with self.locked():
            state = self.read()
            if state is not None:
                try:
                    device.restore(state)
                except InvalidState as error:
                    raise CorruptState(self.path, str(error)) from None
            yield device
            self.write(device.snapshot())

    def read(self) -> dict[str, object] | None:
        """The saved state as written, or None when there is none; raises CorruptState."""
        if not self.path.exists():
            return None
        try:
            state = json.loads(read_text_file(self.path, MAX_STATE_BYTES))
        except UnreadableFile as error:
            raise CorruptState(self.path, error.reason) from None
        except json.JSONDecodeError as error:
            raise CorruptState(self.path, f"not valid JSON ({error})") from None
        if not isinstance(state, dict):
            raise CorruptState(self.path, f"not a JSON object but {type(state).__name__}")
        return state

    def write(self, state: dict[str, object]) -> None:
        """Replace the saved state atomically: temporary file, fsync, rename, fsync of the directory."""
        try:
            handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, before the rename)
                "w", dir=self.directory, prefix=f".{self.device_id}.", suffix=".tmp", delete=False, encoding="utf-8"
            )
        except OSError as error:
            raise StateError(self.path, f"cannot write: {error.strerror or error}") from None
        try:
            with handle:
                json.dump(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, self.path)
            _fsync_directory(self.directory)
        except OSError as error:
            raise StateError(self.path, f"cannot write: {error.strerror or error}") from None
        finally:
            Path(handle.name).unlink(missing_ok=True)  # gone already after a rename

    def status(self, config: DeviceConfig, seed: int, agent: str | None = None) -> DeviceStatus:
        """The device as the saved state leaves it (a fresh device when there is none)."""
        with self.locked():
            state = self.read()
        try:
            saved = DeviceState.checked(state) if state is not None else None
        except InvalidState as error:
            raise CorruptState(self.path, str(error)) from None
        return self._status(saved, config, seed, agent)

    def reset(self, config: DeviceConfig, seed: int) -> ResetReport:
        """Move the saved state aside (to `<id>.json.bak`): the next job starts a fresh device."""
        report = ResetReport(device_id=self.device_id, state_path=str(self.path), removed=False)
        with self.locked():
            if not self.path.exists():
                return report
            try:
                previous = self._status(DeviceState.checked(self.read()), config, seed, None)
                report = report.model_copy(update={"previous": previous})
            except CorruptState as error:
                report = report.model_copy(update={"problem": error.reason})
            except InvalidState as error:
                report = report.model_copy(update={"problem": str(error)})
            try:
                os.replace(self.path, self.backup_path)
                _fsync_directory(self.directory)
            except OSError as error:
                raise StateError(self.path, f"cannot move aside: {error.strerror or error}") from None
        return report.model_copy(update={"removed": True, "backup_path": str(self.backup_path)})

    def _status(self, saved: DeviceState | None, config: DeviceConfig, seed: int, agent: str | None) -> DeviceStatus:
        now = saved.now if saved else 0.0
        day = int(now // DAY_S)
        spent: dict[str, float] = {}
        pending: dict[str, int] = {}
        if saved is not None:
            spent = {name: used for name, d, used in saved.ledger.per_agent_day if d == day}
            pending = {name: sum(t > now for t in times) for name, times in saved.pending.items()}
        names = [agent] if agent is not None else sorted(set(spent) | {n for n, count in pending.items() if count})
        budget = config.agent_budget_s_per_day
        return DeviceStatus(
            device_id=self.device_id,
            seed=saved.seed if saved else seed,
            state_path=str(self.path),
            saved=saved is not None,
            clock_s=now,
            day=day,
            jobs=saved.count if saved else 0,
            project_spent_s=saved.ledger.project if saved else 0.0,
            project_budget_s=config.project_budget_s,
            agent_budget_s_per_day=budget,
            agents=[
                AgentUsage(
                    agent=name,
                    spent_today_s=spent.get(name, 0.0),
                    left_today_s=max(budget - spent.get(name, 0.0), 0.0),
                    pending=pending.get(name, 0),
                )
                for name in names
            ],
        )


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable: the directory entry itself must reach the disk."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
