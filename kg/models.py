"""Pydantic models of the graph's nodes (docs/graph.md §2), the data at the store boundary."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from chiplore.core.clock import utc_now
from chiplore.kg.schema import FACT_KEY, FACT_LABELS, NODE_KEYS

FactStatus = Literal["current", "stale", "refuted", "superseded", "retired"]
ToolchainStatus = Literal["active", "known"]  # the version the graph works under, and every other (its facts go stale)
DesignStatus = Literal["proposed", "screened_out", "queued", "measured", "accepted", "rejected", "failed"]
UNFINISHED: tuple[DesignStatus, ...] = ("proposed", "queued", "measured")  # between proposal and decision
RunStatus = Literal["ok", "fault", "timeout", "incorrect"]
BUDGET_END = "BUDGET_END"  # the fault of a timeout the runner's budget ended (not a failed run: status counts none)
Decision = Literal["accept", "reject", "continue", "inconclusive"]


class GraphNode(BaseModel):
    """A node of one label, identified by its key property."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    label: ClassVar[str]

    @classmethod
    def key_property(cls) -> str:
        return NODE_KEYS[cls.label]

    @property
    def node_key(self) -> str:
        return str(getattr(self, self.key_property()))

    @classmethod
    def from_properties(cls, properties: dict[str, Any]) -> Self:
        """The model of a node read back from the graph (labels and derived keys are dropped)."""
        return cls.model_validate({k: v for k, v in properties.items() if k in cls.model_fields})

    def properties(self) -> dict[str, Any]:
        """The node's properties as stored; a fact also gets its graph-wide fact id."""
        props = self.model_dump(mode="json")
        if self.label in FACT_LABELS:
            props[FACT_KEY] = f"{self.label}:{self.node_key}"
        return props


class Target(GraphNode):
    label: ClassVar[str] = "Target"
    name: str
    description: str = ""


class Toolchain(GraphNode):
    label: ClassVar[str] = "Toolchain"
    id: str
    target: str
    version: str
    ordinal: int = Field(ge=0)  # release order among the target's toolchains, oldest 0
    status: ToolchainStatus = "known"

    @staticmethod
    def id_of(target: str, version: str) -> str:
        return f"{target}@{version}"


class DocPage(GraphNode):
    label: ClassVar[str] = "DocPage"
    id: str
    version: str
    path: str
    sha: str
    title: str = ""


class DocChunk(GraphNode):
    label: ClassVar[str] = "DocChunk"
    sha: str
    text: str
    ord: int


class Concept(GraphNode):
    label: ClassVar[str] = "Concept"
    key: str
    kind: str = "concept"


class Claim(GraphNode):
    label: ClassVar[str] = "Claim"
    id: str
    text: str
    param: str | None = None
    value: float | None = None
    unit: str | None = None
    status: FactStatus = "current"
    toolchain: str


class Check(GraphNode):
    label: ClassVar[str] = "Check"
    id: str
    # compile: a language example compiled under a version; host: run on the host against what it computes
    method: Literal["citation", "probe", "measurement", "compile", "host"]
    verdict: Literal["confirms", "contradicts", "inconclusive"]
    detail: str = ""
    # a measurement's re-check: the value it found and its 95 % interval (the measurement it confirms keeps its own)
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class HardwareParam(GraphNode):
    label: ClassVar[str] = "HardwareParam"
    key: str
    unit: str
    description: str = ""


class Measurement(GraphNode):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # a fit that failed is no fact
    label: ClassVar[str] = "Measurement"
    id: str
    param: str
    value: float
    ci_low: float
    ci_high: float
    n: int = Field(ge=1)
    fit: str
    unit: str
    status: FactStatus = "current"
    toolchain: str
    measured_at: str = Field(default_factory=utc_now)


class ProbeProgram(GraphNode):
    label: ClassVar[str] = "ProbeProgram"
    sha: str
    source: str
    purpose: str = ""


class Diagnostic(GraphNode):
    label: ClassVar[str] = "Diagnostic"
    id: str
    code: str
    severity: Literal["error", "warning", "note"]
    message: str
    toolchain: str


class LegalityRule(GraphNode):
    label: ClassVar[str] = "LegalityRule"
    id: str
    key: str
    code: str
    predicate: str  # JSON, evaluated by the screener
    description: str = ""
    probe: str = ""  # which probe found it ("<key>|<purpose>"): the rule it supersedes under a new toolchain
    status: FactStatus = "current"
    toolchain: str  # the version it was first derived under; HOLDS_UNDER links say where it holds


class Kernel(GraphNode):
    label: ClassVar[str] = "Kernel"
    name: str
    target: str
    weight_bytes: int = Field(ge=0)
    bound_cycles: float = Field(ge=0)


REPAIR_POLICY = "builtin-repair"  # the policy of an upgrade's repair: a port of a design, no step of the loop


class DesignNode(GraphNode):
    label: ClassVar[str] = "DesignNode"
    id: str
    kernel: str
    role: str
    policy: str
    rationale: str = ""
    change: str = ""
    status: DesignStatus = "proposed"
    depth: int = Field(ge=0)
    params: str = ""  # JSON of the design family's knobs; empty for a program written whole
    predicted_cycles: float | None = None  # the loop's cost model (calibrated), before any device run
    model_cycles: float | None = None  # the pack's model before calibration: what the calibration is fitted on
    measured_cycles: float | None = None  # median of its graded device run
    reason: str = ""  # why it ended where it did: the failing screen, the fault, the judge's verdict
    flagged: str = ""  # a toolchain upgrade changed facts it consulted: which, and under which version
    owner: str = ""  # the process working on it ("" once decided): a claim, with its lease
    lease_until: str = ""  # the owner's claim holds until then (ISO time); another may take it over after
    created_at: str = Field(default_factory=utc_now)


class KernelVersion(GraphNode):
    label: ClassVar[str] = "KernelVersion"
    sha: str
    kernel: str
    source: str
    toolchain: str


class Screening(GraphNode):
    label: ClassVar[str] = "Screening"
    id: str
    design: str
    check: str
    passed: bool
    detail: str = ""
    predicted_cycles: float | None = None


class Prediction(GraphNode):
    """What the cost model said one program of a kernel costs under some learnt facts (raw, before the
    kernel's calibration): kept so that a search a killed run began is not priced again."""

    label: ClassVar[str] = "Prediction"
    id: str  # the hash of kernel, program, settings and facts
    kernel: str
    cycles: float | None  # None: the model could not price it


class DeviceRun(GraphNode):
    label: ClassVar[str] = "DeviceRun"
    id: str
    kernel: str
    job_id: str  # the device's id of the job: unique on its device
    device: str = ""  # the device that ran it (also its ON link to the Device)
    cycles: list[float]
    median_cycles: float | None
    status: RunStatus
    device_s: float = Field(ge=0)
    fixtures: Literal["smoke", "graded", "checks"] = "graded"  # checks: a kernel's check sets, named
    faults: list[str] = Field(default_factory=list)
    toolchain: str
    finished_at: str = Field(default_factory=utc_now)


class Comparison(GraphNode):
    label: ClassVar[str] = "Comparison"
    id: str
    kernel: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    pairs: int = Field(ge=0)
    method: str
    # superseded: made against a BEST that was replaced before the candidate's turn (not a decision)
    decision: Decision | Literal["superseded"]
    decided_at: str = Field(default_factory=utc_now)


class Upgrade(GraphNode):
    """One `chiplore toolchain upgrade`: its state (so a killed one resumes) and what it found."""

    label: ClassVar[str] = "Upgrade"
    id: str
    target: str
    from_version: str
    to_version: str
    status: Literal["running", "done"] = "running"
    budget_s: float = Field(ge=0)
    summary: str = ""  # JSON of the finished upgrade's summary
    started_at: str = Field(default_factory=utc_now)
    ended_at: str | None = None

    @staticmethod
    def id_of(target: str, from_version: str, to_version: str) -> str:
        return f"{target}@{from_version}->{to_version}"


class Revalidation(GraphNode):
    """A kernel's BEST (or its baseline) checked again under a new toolchain: it still compiles and is
    measured again, or it broke and was repaired (or could not be)."""

    label: ClassVar[str] = "Revalidation"
    id: str
    kernel: str
    design: str  # the design re-validated
    role: Literal["best", "baseline"]
    from_version: str
    to_version: str
    outcome: Literal["survived", "repaired", "broken"]
    diagnostics: str = ""  # the new toolchain's errors on the old program
    repaired_design: str | None = None
    cycles_before: float | None = None  # under the old version
    cycles_after: float | None = None  # under the new one (of the repaired program when repaired)
    detail: str = ""

    @staticmethod
    def id_of(kernel: str, design: str, to_version: str) -> str:
        return f"{kernel}:{design}@{to_version}"


Availability = Literal["available", "deprecated", "unavailable"]
EntryVerdict = Literal["confirmed", "contradicted", "unverified"]
# How an entry differs from the same construct's entry under the version before ("" : none to compare).
EntryChange = Literal["", "unchanged", "added", "removed", "renamed", "deprecated", "changed"]


class LanguageEntry(GraphNode):
    """What the DSL summary says of one construct under one toolchain version: its syntax and meaning
    (cited from the docs, or written by an LLM librarian), whether the compiler has it, and the
    verdict of the checks behind it (its examples compiled and run; the docs' claims about it)."""

    label: ClassVar[str] = "LanguageEntry"
    id: str
    name: str  # the construct's, as the pack names it
    version: str
    kind: str
    syntax: str
    meaning: str = ""
    policy: str = "builtin"  # who wrote the meaning
    availability: Availability = "available"
    instead: str = ""  # what the compiler says to write instead, when it refuses or deprecates it
    verdict: EntryVerdict = "unverified"
    why: str = ""  # the evidence behind a contradicted verdict
    examples: int = Field(0, ge=0)  # programs compiled for it under the version
    fingerprint: str = ""  # availability and the constraints that are not numbers: compared across versions
    change: EntryChange = ""
    change_from: str = ""  # the version it was compared with
    before: str = ""  # that version's fingerprint, when it differs
    change_detail: str = ""
    status: FactStatus = "current"
    toolchain: str

    @staticmethod
    def id_of(target: str, version: str, construct: str) -> str:
        return f"{target}@{version}:{construct}"


class LanguageExample(GraphNode):
    """A program that shows one or more constructs: a doc code block (completed when a fragment), a
    program the pack writes for a construct no block shows, or an LLM librarian's. Content-addressed."""

    label: ClassVar[str] = "LanguageExample"
    id: str
    source: str
    origin: Literal["doc", "pack", "llm"]
    version: str  # the version it was written for
    expects: str = ""  # the diagnostic code it is said to draw ("": it compiles)
    statement: str = ""  # what it is said to show or compute
    constructs: list[str] = Field(default_factory=list)


class Activity(GraphNode):
    label: ClassVar[str] = "Activity"
    id: str
    role: str
    policy: str
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0  # of a model call
    cost_usd: float = 0.0  # a model call's estimate, from the configured prices
    started_at: str = Field(default_factory=utc_now)
    ended_at: str | None = None
    outcome: str = "ok"
    owner: str | None = None  # `host:pid` of the process a `running` activity runs in
    # a running optimize renews it from its heartbeat: another machine's run is live while it holds
    lease_until: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _ended_at_once(cls, data: Any) -> Any:
        """A record of something done in one step (given its end only) starts when it ends: a default
        start taken after the end it was given would end before it starts."""
        if isinstance(data, dict) and data.get("ended_at") and not data.get("started_at"):
            return {**data, "started_at": data["ended_at"]}
        return data


NODE_MODELS: dict[str, type[GraphNode]] = {
    model.label: model
    for model in (
        Target, Toolchain, DocPage, DocChunk, Concept, Claim, Check, HardwareParam, Measurement,
        ProbeProgram, Diagnostic, LegalityRule, Kernel, DesignNode, KernelVersion, Screening,
        DeviceRun, Comparison, Activity, Upgrade, Revalidation, LanguageEntry, LanguageExample,
    )
}  # fmt: skip
