"""Which ops of a lowered program are ordered and which may run at the same time.

The scheduler (docs/simrngd.md §7.4) starts an op after its queue predecessor, its producers and the
previous readers of the buffer it overwrites. Those three edge kinds make a DAG over program order;
two ops may overlap exactly when neither reaches the other. The bank-run rule (E0520) and the cost
model's exclusive passes both ask this question.
"""

from __future__ import annotations

from chiplore.simulator.toolchain.lowered import DmaOp, LoweredProgram, PassOp


class Ordering:
    def __init__(self, program: LoweredProgram) -> None:
        self.program = program
        self._index = {op.id: i for i, op in enumerate(program.ops)}
        # before[i]: bitset of the ops that finish before op i starts (transitively)
        self._before: list[int] = []
        last_in_queue: dict[str, int] = {}
        readers: dict[str, list[int]] = {}  # buffer -> readers since its last write
        for i, op in enumerate(program.ops):
            direct = {self._index[d] for d in op.deps if d in self._index}
            direct |= {last_in_queue[q] for q in op.queues if q in last_in_queue}
            for buffer in op.writes:
                direct |= {r for r in readers.get(buffer, []) if r != i}
            mask = 0
            for j in direct:
                mask |= self._before[j] | (1 << j)
            self._before.append(mask)
            for q in op.queues:
                last_in_queue[q] = i
            for buffer in op.reads:
                readers.setdefault(buffer, []).append(i)
            for buffer in op.writes:
                readers[buffer] = []

    def ordered(self, first: str, second: str) -> bool:
        """Does one of the two ops finish before the other starts, whatever the timing?"""
        a, b = self._index[first], self._index[second]
        return bool(self._before[b] >> a & 1) or bool(self._before[a] >> b & 1)

    def concurrent_dmas_into(self, op: PassOp) -> list[tuple[DmaOp, int]]:
        """DMA ops that may write one of the pass's clusters while it runs, with that cluster."""
        out: list[tuple[DmaOp, int]] = []
        for dma in self.program.dmas:
            if dma.dma_kind == "d2h" or self.ordered(dma.id, op.id):
                continue
            shared = sorted(set(dma.clusters) & set(op.clusters))
            if shared:
                out.append((dma, shared[0]))
        return out
