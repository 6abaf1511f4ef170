"""The toy chip's hardware parameters as chiplore learns them. `default` is the order of magnitude
the cost model assumes until a parameter is measured (a guess about chips like this one, not this
chip's value)."""

from __future__ import annotations

from chiplore.core.params import ParamKey, ParamRegistry

LAUNCH = ParamKey("kernel.launch_cycles", "cycles", "the fixed cost of a kernel launch", 200.0)
DMA_START = ParamKey("dma.start_cycles", "cycles", "a DMA command's start-up, before its first byte", 500.0)
LANE_RATE = ParamKey("dma.lane_bytes_per_cycle", "B/cycle", "one DMA lane's streaming rate", 16.0)
INGRESS = ParamKey(
    "dma.ingress_bytes_per_cycle", "B/cycle", "the rate weights reach compute at: four lanes, capped by the chip", 50.0
)
LANE_BUFFER = ParamKey(
    "dma.lane_buffer_bytes", "B", "the most one lane's buffer holds of one chunk (the compiler's limit)", 32768.0
)
# Not probed: the multiply hides behind the loads in every good design, so the model's guess serves.
MAC_RATE = ParamKey("mac.bytes_per_cycle", "B/cycle", "matrix bytes a multiply consumes per cycle", 100.0)

PARAMS = ParamRegistry((LAUNCH, DMA_START, LANE_RATE, INGRESS, LANE_BUFFER, MAC_RATE))
