"""What each lowered op does to values: the views and the resolved pass stages the lowerer records
beside the LoweredProgram (`lower_semantics`), for the executor and the compiler's coverage rule."""

from __future__ import annotations

from dataclasses import dataclass

from chiplore.simulator.toolchain.placement import Place, View


@dataclass(frozen=True)
class StageArg:
    """One resolved argument of a pass stage: places (a mapping), a number, a word, a tensor view,
    or a nested call (`mul(vrf = v)`)."""

    name: str | None
    places: tuple[Place, ...] | None = None
    number: float | None = None
    word: str | None = None
    view: View | None = None
    call: SemStage | None = None


@dataclass(frozen=True)
class SemStage:
    name: str
    args: tuple[StageArg, ...]

    def kwarg(self, name: str) -> StageArg | None:
        return next((a for a in self.args if a.name == name), None)

    def positional(self) -> list[StageArg]:
        return [a for a in self.args if a.name is None]


@dataclass(frozen=True)
class SemOp:
    """What an op does to values, for the executor: the same views the cost model's op was planned from."""

    op_id: str
    kind: str  # dma | pass | fill
    source: View | None
    destination: View
    stages: tuple[SemStage, ...] = ()
    context: str = ""
    value: float = 0.0  # fill
