"""The Target interface: everything chiplore knows of an accelerator comes through it and its pack
(`chiplore.core.pack`). `agents/` and `ingest/` import only the core, never a target's internals;
SimRNGD (`chiplore.simulator.target`) is the default implementation, and another accelerator plugs in the
same way (docs/targets.md).

The models here are the boundary: pydantic, frozen, JSON-serialisable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from chiplore.core.ops import OpGraph

if TYPE_CHECKING:  # both modules import this one: the annotations name them without a cycle
    from chiplore.core.pack import TargetPack
    from chiplore.core.stats import ProgramStats

Severity = Literal["error", "warning", "note"]
JobStatus = Literal["ok", "compile_error", "fault", "timeout", "transient", "queue_rejected"]
# why a device refused a job at its queue: its allowance of device time is spent (no design is to
# blame and nothing will run), or too many of the agent's jobs are pending (it clears as they finish)
Rejection = Literal["budget", "queue_full"]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ---- compiling -------------------------------------------------------------------------------


class Span(BaseModel):
    """Where in the source text: 1-based line and column, end exclusive."""

    model_config = ConfigDict(frozen=True)

    line: int
    column: int
    end_line: int
    end_column: int


class Diagnostic(BaseModel):
    """One coded compiler message (`error[E0301]: ...`)."""

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Severity
    message: str
    span: Span | None = None
    notes: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class CheckResult(Frozen):
    version: str
    diagnostics: tuple[Diagnostic, ...]
    rules_checked: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the program compiles (warnings and notes allowed)."""
        return not any(d.is_error for d in self.diagnostics)


# ---- what the target offers ------------------------------------------------------------------


class DocPage(Frozen):
    """One agent-visible page of vendor material for one toolchain version."""

    version: str
    path: str  # e.g. "dma.md", "CHANGES.md"
    title: str
    text: str


class KernelParam(Frozen):
    name: str
    type: str  # as the kernel writes it, e.g. "&hbm<f8e4m3>[H, Qs]"
    mutable: bool
    dtype: str
    shape: tuple[tuple[str, int], ...]  # (axis, size), row-major


class KernelSpec(Frozen):
    """A kernel the harness runs: its signature, how it is graded, and where it starts from."""

    name: str
    description: str
    label: str = ""  # a short name for tables and figures (e.g. "FFN"); the name when empty
    params: tuple[KernelParam, ...]
    axes: dict[str, int]
    atol: float
    rtol: float
    weight_bytes: int
    bound_cycles: float  # weight bytes over the chip's weight ingress (its roof)
    baseline_source: str  # the official baseline program
    ops: OpGraph | None = None  # what it computes (chiplore.core.ops); a design generator writes programs from it
    # fixture sets beyond the graded ones, built to catch what they may miss (a bf16 partial sum, a
    # cancellation): acceptance grades a design on them once, before it becomes BEST
    check_sets: tuple[str, ...] = ()


class ProbeTemplate(Frozen):
    """A microbenchmark: a program template, the points of its sweep, and what it measures.

    The template names its variables `$NAME` (string.Template); each point gives every variable
    a value and `knob` names the one a fit uses as its x."""

    id: str
    name: str
    kernel: str
    measures: str
    template: str
    knob: str
    points: tuple[dict[str, str], ...]
    repeats: int = 3

    def instantiate(self, point: dict[str, str], toolchain: str) -> str:
        from string import Template

        return Template(self.template).substitute({**point, "TOOLCHAIN": toolchain})


# ---- running -----------------------------------------------------------------------------------


class WorstElement(Frozen):
    fixture: str
    output: str
    index: int
    abs_err: float
    tol: float


class Correctness(Frozen):
    passed: bool
    worst: WorstElement | None = None
    sets: tuple[str, ...] = ()
    message: str = ""


class TestResult(Frozen):
    """A free host-side (CPU) run of a program on the smoke fixtures."""

    __test__ = False  # not a pytest class

    kernel: str
    toolchain: str
    compiled: bool
    diagnostics: tuple[Diagnostic, ...] = ()
    correctness: Correctness | None = None
    message: str = ""


class DeviceJob(Frozen):
    kernel: str
    program: str
    toolchain: str | None = None  # else the program's header, else the target's default
    fixtures: Literal["graded", "smoke"] | tuple[str, ...] = "graded"
    repeats: int = Field(1, ge=1, le=50)  # timed runs per fixture set
    profile: bool = False  # a coarse timeline; costs device time
    agent: str = "agent"  # whose budget and pending-job allowance it uses
    # the most device time the job may take: the device stops it there, as at its own cap (whichever is
    # less); a runner sets what is left of its budget, so a job that hangs cannot spend past it
    limit_s: float | None = Field(None, gt=0)


class DeviceInfo(Frozen):
    """One device a target offers. Devices of one `kind` are interchangeable: a scheduler asks for
    "a device of this kind" (optimize --workers N keeps one runner per device, a Ray custom resource
    per kind), and `submit(job, device=id)` sends a job to this one. Each device has its own queue,
    clock, drift and noise, so an A/B comparison's pairs run on one device."""

    id: str  # what `submit` takes and a result's `device_id` reports
    kind: str  # e.g. "rngd-sim"; a letters, digits, '-' and '_' word
    endpoint: str = ""  # where a real device is reached (a host:port, a PCI address); "" for a simulated one


class ChipIdentity(Frozen):
    """What a device says of the chip it is (a part number and revision, a fingerprint). Equal ids are
    one chip: a graph holds one chip's facts, so a graph learnt on one is refused on another."""

    id: str = Field(min_length=1)
    note: str = ""  # where the id comes from, for a person (a truth file, a serial number)

    def describe(self) -> str:
        return f"{self.id} ({self.note})" if self.note else self.id


class JobHandle(Frozen):
    job_id: str
    device_id: str
    submitted_s: float  # device clock at submission


class RunSample(Frozen):
    fixture: str
    cycles: int
    warmup: bool


class Fault(Frozen):
    """What went wrong on the device, in the target's own words (SimRNGD: NOC_TIMEOUT, CLUSTER_RESET,
    HANG, TRANSIENT); `cluster` and `cycle` say where and when, when the device says so."""

    code: str
    cluster: int | None = None
    cycle: int | None = None
    run: int | None = None


class ProfileEntry(Frozen):
    line: int | None
    label: str
    cycles: int


class Profile(Frozen):
    """A schedule viewer's coarse picture: busy fractions and the longest ops (durations perturbed)."""

    busy_fraction: dict[str, float]
    longest: tuple[ProfileEntry, ...]


class DeviceResult(Frozen):
    job_id: str
    status: JobStatus
    kernel: str
    toolchain: str
    device_id: str
    queue_wait_s: float = 0.0
    device_s: float = 0.0  # device seconds charged to the budget
    wall_s: float = 0.0  # real seconds the job took to serve
    diagnostics: tuple[Diagnostic, ...] = ()
    runs: tuple[RunSample, ...] = ()
    median_cycles: int | None = None
    correctness: Correctness | None = None
    faults: tuple[Fault, ...] = ()
    profile: Profile | None = None
    retryable: bool = False
    message: str = ""
    rejected_for: Rejection | None = None  # set with status queue_rejected


class Target:
    """An accelerator as chiplore sees it: the way a user sees real hardware (its docs, its compiler,
    its device), plus the pack its chip team wrote for chiplore. `agents/` and `ingest/` reach a chip
    only through this class and `TargetPack`. A chip's target subclasses it and implements every
    method that raises NotImplementedError here; the others are optional, with the defaults below
    (the way Optuna's BaseSampler offers its hooks)."""

    name: str
    description: str = ""  # optional: a line on what the chip is (the graph's Target node); the name when empty

    def toolchains(self) -> list[str]:
        """Known toolchain versions, oldest first; the last is the newest. Read by `init` and upgrades."""
        raise NotImplementedError

    def default_toolchain(self) -> str:
        """The version a fresh graph starts on (`chiplore init`)."""
        raise NotImplementedError

    def docs(self, version: str) -> list[DocPage]:
        """The vendor pages of one toolchain version, changelog included; read by the librarian."""
        raise NotImplementedError

    def kernels(self) -> list[KernelSpec]:
        """The kernels to optimize: signature, tolerances, weight bytes, bound, baseline source."""
        raise NotImplementedError

    def add_kernel(self, folder: Path) -> KernelSpec:
        """Validate a kernel pack and install it where this target finds its kernels, so `kernels`
        offers it from then on (`chiplore kernel add`); a one-line TargetError, with nothing
        installed, when it is not valid or the target takes no packs."""
        raise NotImplementedError

    def check(self, source: str, version: str) -> CheckResult:
        """Parse and legality rules with coded diagnostics; free. Called by the rule probes, the
        screener and the repairs."""
        raise NotImplementedError

    def analyze(self, source: str, version: str) -> ProgramStats:
        """The program's static lowering statistics (`chiplore.core.stats`): its ops, their queues,
        dependencies and counters, program totals and peaks; free, like `check`, and deterministic.
        What the screens and the pack's cost model read (it predicts cycles from them). A program
        that does not compile is not an exception: its stats say `compiled = False` and carry the
        diagnostics `check` gives."""
        raise NotImplementedError

    def host_test(self, source: str, kernel: str, version: str) -> TestResult:
        """Correctness on the host (CPU) with the smoke fixtures; free, slower than `check`. The
        screener's last check before device time is spent."""
        raise NotImplementedError

    def host_check(self, source: str, kernel: str, version: str, sets: tuple[str, ...]) -> TestResult | None:
        """Correctness on the host on named fixture sets (a kernel's check sets); None where the target
        cannot test them there, the default (the device grades them before a design becomes BEST)."""
        return None

    def devices(self) -> list[DeviceInfo]:
        """The devices jobs can run on, first the default one; at least one. A rack lists each device
        (SimRNGD: `CHIPLORE_DEVICES` of them). Read by `optimize --workers N`, which runs one runner
        per device and sends each job to a device it chose."""
        raise NotImplementedError

    def submit(self, job: DeviceJob, device: str | None = None) -> JobHandle:
        """Queue a job on the scarce, noisy device (microbenchmarks, designs, A/B pairs): on the
        device `devices()` lists as `device`, or on the first one when None. An id the target does
        not offer is a TargetError."""
        raise NotImplementedError

    def result(self, handle: JobHandle) -> DeviceResult:
        """Wait for a submitted job (on the device its handle names) and return what the device reported."""
        raise NotImplementedError

    def microbenchmarks(self) -> list[ProbeTemplate]:
        """The starting probes whose sweeps the pack's fits turn into measurements."""
        raise NotImplementedError

    def microbenchmarks_for(self, found: Mapping[str, float]) -> list[ProbeTemplate]:
        """The probes written for what earlier probes found, by the fits' local names (a chip's shape:
        its cluster and slice counts decide how a probe's layouts must be written). By default the
        starting probes, whatever was found."""
        return self.microbenchmarks()

    def pack(self) -> TargetPack:
        """What chiplore's generic layers need to know of this chip family (`chiplore.core.pack`)."""
        raise NotImplementedError

    # ---- optional ------------------------------------------------------------------------------

    def kernel_origins(self) -> dict[str, str]:
        """Where each kernel comes from, by name (SimRNGD: "built-in", "CHIPLORE_KERNELS", "installed");
        read by `chiplore kernel list`. By default nothing is said."""
        return {}

    def chip(self) -> ChipIdentity | None:
        """Which chip the devices are (the same for every device of the target). `learn` records it on
        the graph's Target node, and learn, optimize and upgrade refuse a graph that learnt another:
        its facts (rates, limits, the shape) would price and judge this chip's designs. None (the
        default) when the devices say nothing: nothing is recorded or refused."""
        return None

    def simulated_clock(self) -> SimulatedClock | None:
        """The devices' simulated clocks, for a target whose devices keep simulated time (a simulator);
        None (the default) for devices that live on the wall clock. The loop on many devices sends
        jobs in calendar order on simulated clocks."""
        return None


class SimulatedClock(Protocol):
    """A target whose devices keep simulated time (a simulator: a 12-day campaign runs in minutes).
    A scheduler that runs jobs on several devices at once tells a device when a job reaches it, so
    that no job starts, in simulated time, before the results it was decided from existed. Real
    devices live on the wall clock and have none (`Target.simulated_clock` is None)."""

    def device_clock(self, device: str) -> float:
        """The device's clock, in seconds since it came up: the end of its last job, or later."""
        ...

    def wait_until(self, device: str, clock_s: float) -> None:
        """Let the device's clock run on to `clock_s` (its background tenants keep it busy meanwhile);
        nothing when it is already past. Called before a job that may not start earlier."""
        ...
