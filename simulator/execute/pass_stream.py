"""The values a Tensor-Unit pass carries from its source to its destination (`Stream`), where its
digits are cut so that each stage keeps or reduces whole array axes, and how the commit reads it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from chiplore.simulator.execute.factored import Array, reduce_over, take
from chiplore.simulator.execute.stored_tensor import Index, grid_index
from chiplore.simulator.toolchain.digits import Digit
from chiplore.simulator.toolchain.op_semantics import SemStage
from chiplore.simulator.toolchain.placement import View


@dataclass
class Stream:
    """The values a pass carries: one array axis per enumerated digit of its source view."""

    dims: list[tuple[Digit, np.ndarray, str]]  # digit, its values (view coordinates), field
    data: Array
    packet: list[Digit] = field(default_factory=list)  # digits in the packet (what sum_packet reduces)
    stash: Array | None = None
    dtype: str | None = None  # the format the values are exactly in; None once computed in f32
    carried: str = "f32"  # the dtype the stream carries (what a commit without a cast reinterprets)
    source: View | None = None  # the pass's source view as written, and as its stream is indexed
    frame: View | None = None

    def index(self) -> Index:
        return grid_index([(d, v) for d, v, _ in self.dims])

    def reduce(self, keep: list[bool], op: str = "add") -> None:
        axes = tuple(i for i, k in enumerate(keep) if not k)
        if axes:
            self.data = reduce_over(self.data, axes, np.max if op == "max" else np.sum)
            if self.stash is not None and self.stash.ndim == len(keep):
                self.stash = None
            self.dims = [d for d, k in zip(self.dims, keep, strict=True) if k]


def stage_cuts(stages: tuple[SemStage, ...]) -> dict[str, set[int]]:
    """Per axis, the strides and limits the stages name: where the stream's digits are cut."""
    cuts: dict[str, set[int]] = {}

    def visit(stage: SemStage) -> None:
        for arg in stage.args:
            for place in arg.places or ():
                for digit in place.digits:
                    cuts.setdefault(digit.axis, set()).update({digit.stride, digit.limit})
            if arg.call is not None:
                visit(arg.call)

    for stage in stages:
        visit(stage)
    return cuts


def stream_at(stream: Stream, index: Index) -> tuple[Array, np.ndarray]:
    """The stream's value at these atom indices (its reduced digits are gone, absent atoms read 0),
    and where the stream has one at all."""
    picks = []
    inside: np.ndarray = np.array(True)
    for digit, values, _ in stream.dims:
        wanted = (index.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
        start = int(values[0])
        if int(values[-1]) - start + 1 == len(values):  # a contiguous range: no search needed
            position = wanted - start
            found = (position >= 0) & (position < len(values))
            position = np.clip(position, 0, len(values) - 1)
        else:
            position = np.clip(np.searchsorted(values, wanted), 0, len(values) - 1)
            found = values[position] == wanted
        if not found.all():  # the usual case finds every digit: no need to broadcast the mask
            inside = inside & found
        picks.append(position)
    values = take(stream.data, tuple(picks)) if picks else stream.data
    return values, inside
