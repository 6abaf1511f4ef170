"""ProgramStats: the static lowering statistics of one program, as its toolchain reports them.

A compiler's schedule dump in a form any target can fill: the ops of the lowered program in order,
each with its kind, the in-order queues it occupies (one `OpPart` per queue: a DMA's share on one
engine, a pass on its context), the shared resources each part draws on, the ops it waits for, and
named counters (bytes, packets, flits, ...); plus program totals, per-resource totals and peaks.
Counter names are the target's own vocabulary (its `ferc stats`-like command lists them); chiplore's
generic layers only carry them, and a target pack's cost model reads them. `Target.analyze` returns
it; it never holds a timing: cycles are what a cost model predicts and the device measures.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from chiplore.core.target import Diagnostic

Counters = dict[str, float]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OpPart(_Frozen):
    """An op's share of one in-order queue: what that queue's unit does for the op."""

    queue: str  # e.g. "e3" (a DMA engine), "main" (a context)
    resources: tuple[str, ...] = ()  # shared resources it draws on while it runs, e.g. "cluster0.ingress"
    counters: Counters = Field(default_factory=dict)


class OpStats(_Frozen):
    """One op of the lowered program, in program order."""

    id: str
    label: str  # unique, readable: the call site and loop iteration
    kind: str  # "<family>.<variant>", e.g. "dma.h2d", "pass.main"
    line: int | None = None
    deps: tuple[str, ...] = ()  # ids of the ops whose results it reads
    after: tuple[str, ...] = ()  # ids of the ops that must finish before it overwrites what they read
    counters: Counters = Field(default_factory=dict)
    parts: tuple[OpPart, ...] = ()

    @property
    def family(self) -> str:
        """The kind's family: "dma", "pass", ..."""
        return self.kind.split(".", 1)[0]

    @property
    def queues(self) -> tuple[str, ...]:
        return tuple(part.queue for part in self.parts)


class ProgramStats(_Frozen):
    """What a program does, counted statically. `compiled` is False when the program does not compile:
    then `diagnostics` say why (as `Target.check` does) and there are no ops."""

    target: str
    kernel: str
    version: str
    compiled: bool = True
    diagnostics: tuple[Diagnostic, ...] = ()
    ops: tuple[OpStats, ...] = ()
    totals: Counters = Field(default_factory=dict)  # e.g. "dma.bytes", "pass.count"
    by_resource: dict[str, Counters] = Field(default_factory=dict)  # per queue, cluster, engine, input ...
    peaks: Counters = Field(default_factory=dict)  # e.g. "dm.bytes_per_slice"

    def total(self, name: str) -> float:
        """A program total, 0 when the program has none of it."""
        return self.totals.get(name, 0.0)

    def of_kind(self, prefix: str) -> list[OpStats]:
        """The ops whose kind is `prefix` or starts with `prefix.` ("dma", "dma.h2d")."""
        return [op for op in self.ops if op.kind == prefix or op.kind.startswith(prefix + ".")]

    def op(self, label: str) -> OpStats:
        """The op with this label (labels are unique)."""
        for op in self.ops:
            if op.label == label:
                return op
        raise KeyError(label)
