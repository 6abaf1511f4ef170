"""SimRNGD's fixture sets, the kernels a job may name, and the saved device state; the job and result
models are the Target interface's (chiplore.core.target)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chiplore.core.target import DeviceJob
from chiplore.simulator.dsl.parser import FerriteSyntaxError, parse
from chiplore.simulator.toolchain.budget import source_over_budget
from chiplore.simulator.toolchain.versions import DEFAULT_VERSION

GRADED_SETS = tuple(f"g{i}" for i in range(7))
ALL_SETS = (*GRADED_SETS, "exact", "cancel")
SMOKE_SET = "g0"


def fixture_sets(job: DeviceJob, own: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The fixture sets a job runs on: the 7 graded ones, the smoke one, or those it names (the device's
    nine, or `own`: sets of the job's kernel pack's own that its recipe lists)."""
    if job.fixtures == "graded":
        return GRADED_SETS
    if job.fixtures == "smoke":
        return (SMOKE_SET,)
    known = (*ALL_SETS, *own)
    unknown = [s for s in job.fixtures if s not in known]
    if unknown or not job.fixtures:
        raise ValueError(f"unknown fixture sets {unknown}; choose from {', '.join(known)}")
    return job.fixtures


def declared_kernels(program: str) -> tuple[str, ...] | None:
    """The kernels a program declares, or None when it does not parse or is too large to compile
    (the compiler then says why, without reading it through). The device runs the kernel a job
    names, so a name the program lacks is refused before any device time is spent."""
    if source_over_budget(program, DEFAULT_VERSION):
        return None
    try:
        return tuple(kernel.name for kernel in parse(program).kernels)
    except FerriteSyntaxError:
        return None


def unknown_kernel(kernel: str, declared: tuple[str, ...]) -> str:
    """The one-line refusal of a job whose kernel the program does not declare."""
    have = ", ".join(declared) if declared else "none"
    return f"the program declares no kernel {kernel!r} (it declares: {have})"


class _Saved(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class SavedNoise(_Saved):
    phase: float
    bias: float


class SavedLedger(_Saved):
    project: float = Field(ge=0)
    per_agent_day: list[tuple[str, int, float]]


class InvalidState(ValueError):
    """A saved state that cannot continue this device: damaged, or another device's or seed's."""


class DeviceState(_Saved):
    """What `SimDevice.snapshot` writes and `restore` reads back: checked field by field, so a
    damaged state file is refused with a reason instead of continuing a device from garbage."""

    device_id: str
    seed: int
    now: float = Field(ge=0)
    count: int = Field(ge=0)
    session: str = ""  # the job ids' session (a state saved before sessions had none: a new one)
    slot_free: list[float]
    last_busy: float | None
    next_tenant: float | None
    rng: dict[str, Any]
    tenant_rng: dict[str, Any]
    noise: SavedNoise
    ledger: SavedLedger
    pending: dict[str, list[float]]

    @classmethod
    def checked(cls, state: object) -> DeviceState:
        """The state, validated; raises InvalidState naming the first field that is wrong."""
        try:
            return cls.model_validate(state)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the state"
            raise InvalidState(f"{where}: {first['msg']}") from None
