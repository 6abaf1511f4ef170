"""The toy chip's starting microbenchmarks: Toyl templates and the points of their sweeps. They
compile under every toolchain (one lane's chunk never passes 32 KB) and use no multiply."""

from __future__ import annotations

from chiplore.core.target import ProbeTemplate

LOADS = """#toolchain $TOOLCHAIN
kernel probe
param w ${ROWS}x256
load w chunks=$CHUNKS lanes=$LANES
"""

# 32 KB in 1..32 commands on one lane: each extra command adds one start-up.
START_UP = ProbeTemplate(
    id="TB01",
    name="DMA start-up",
    kernel="probe",
    measures="a DMA command's start-up (and the launch)",
    template=LOADS,
    knob="CHUNKS",
    repeats=40,
    points=tuple({"ROWS": "32", "CHUNKS": str(c), "LANES": "1"} for c in (1, 2, 4, 8, 16, 32)),
)
# 128 KB .. 1 MB in 32 commands on one lane and on four: the slope is the lane's rate, then the ingress.
STREAM = ProbeTemplate(
    id="TB02",
    name="DMA streaming rate",
    kernel="probe",
    measures="one lane's rate and the chip's ingress",
    template=LOADS,
    knob="ROWS",
    repeats=60,
    points=tuple({"ROWS": str(r), "CHUNKS": "32", "LANES": str(lanes)} for lanes in (1, 4) for r in (128, 512, 1024)),
)


def microbenchmarks() -> list[ProbeTemplate]:
    return [START_UP, STREAM]
