"""How long a compiled Toyl program really takes on the toy chip (from its hidden truth).

DMA commands run one after another: a load is `chunks` commands, each paying the start-up and then
streaming its chunk at the lanes' rate, capped by the chip's ingress. A multiply consumes its matrix
chunk by chunk as the chunks arrive, so only the last chunk's share of the compute is not hidden
(unless the compute is slower than the chunks). A store is one command on one lane.
"""

from __future__ import annotations

from tests.toy.compiler import Program
from tests.toy.truth import Truth
from tests.toy.versions import MULTIPLIES


def cycles(program: Program, truth: Truth) -> float:
    total = truth.launch_cycles
    per_chunk: dict[str, tuple[int, float]] = {}  # a loaded input: its chunks and one chunk's DMA time
    for s in program.statements:
        if s.op == "load":
            tensor = program.tensors[s.args[0]]
            chunks, lanes = s.options.get("chunks", 1), s.options.get("lanes", 1)
            rate = min(lanes * truth.lane_bytes_per_cycle, truth.ingress_bytes_per_cycle)
            chunk = truth.dma_start_cycles + tensor.nbytes / chunks / rate
            per_chunk[tensor.name] = (chunks, chunk)
            total += chunks * chunk
        elif s.op in MULTIPLIES:
            matrix = program.tensors[s.args[1]]
            chunks, chunk = per_chunk.get(matrix.name, (1, 0.0))
            compute = matrix.nbytes / truth.mac_bytes_per_cycle / chunks
            total += compute + (chunks - 1) * max(0.0, compute - chunk)
        elif s.op == "scale":
            total += program.tensors[s.args[1]].nbytes / truth.scale_bytes_per_cycle
        elif s.op == "store":
            total += truth.dma_start_cycles + program.tensors[s.args[0]].nbytes / truth.lane_bytes_per_cycle
    return total
