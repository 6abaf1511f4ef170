"""The GEMV design space and the cost model over it.

A design loads the weights in `chunks` DMA commands split over `lanes` lanes and multiplies as the
chunks arrive. More lanes stream faster until the chip's ingress caps them; more chunks hide more
of the multiply behind the loads but pay a start-up each; one lane's share of a chunk must fit its
buffer (the measured limit, or the key's default until it is measured). The statement that
multiplies is the one the toolchain has (`mac` where the rules do not refuse it).
"""

from __future__ import annotations

import json

from chiplore.core.pack import CostModel, Facts, Knob, Params
from chiplore.core.params import ParamKey
from tests.toy.pack import params as P
from tests.toy.pack.probes import MAC

ROWS = COLS = 256
WEIGHT_BYTES = ROWS * COLS * 4
VECTOR_BYTES = COLS * 4
COST_PARAMS = (P.LAUNCH, P.DMA_START, P.LANE_RATE, P.INGRESS, P.MAC_RATE)


def param(facts: Facts, key: ParamKey) -> float:
    """A measured parameter, or its default until it is measured."""
    value = facts.get(key.key, key.default)
    assert value is not None, f"{key.key} has no default"
    return value


def predict_gemv(chunks: int, lanes: int, facts: Facts) -> float:
    """Cycles of one run: launch, the weights' chunks, the vector's load, the multiply's exposed
    tail, the store."""
    start, lane = param(facts, P.DMA_START), param(facts, P.LANE_RATE)
    rate = min(lanes * lane, param(facts, P.INGRESS))
    chunk = start + WEIGHT_BYTES / chunks / rate
    compute = WEIGHT_BYTES / param(facts, P.MAC_RATE) / chunks
    exposed = compute + (chunks - 1) * max(0.0, compute - chunk)
    small = start + VECTOR_BYTES / lane  # the vector in, the result out: one command on one lane each
    return param(facts, P.LAUNCH) + chunks * chunk + exposed + 2 * small


class GemvSpace:
    kernel = "gemv"
    knobs = (Knob("chunks", (1, 2, 4, 8, 16, 32, 64)), Knob("lanes", (1, 2, 4)))
    consults = (*(key.key for key in COST_PARAMS), P.LANE_BUFFER.key, MAC)

    def valid(self, params: Params, facts: Facts) -> bool:
        split = params["chunks"] * params["lanes"]
        return ROWS % split == 0 and WEIGHT_BYTES // split <= param(facts, P.LANE_BUFFER)

    def features(self, params: Params, facts: Facts) -> dict[str, object]:
        return {"load.bytes_per_lane": WEIGHT_BYTES // (params["chunks"] * params["lanes"]),
                "load.lanes": params["lanes"]}  # fmt: skip

    def source(self, params: Params, facts: Facts, version: str) -> str:
        multiply = "mac" if facts.get(MAC, 0.0) > 0 else "mul"
        load = f"load w chunks={params['chunks']} lanes={params['lanes']}"
        return (f"#toolchain {version}\nkernel gemv\nparam w {ROWS}x{COLS}\nparam x {COLS}\nout y {ROWS}\n{load}\n"
                f"load x\n{multiply} y w x\nstore y\n")  # fmt: skip

    def rationale(self, params: Params, facts: Facts, predicted_cycles: float) -> str:
        rate = min(params["lanes"] * param(facts, P.LANE_RATE), param(facts, P.INGRESS))
        return (f"{json.dumps(params, sort_keys=True)}: {params['lanes']} lane(s) at {rate:.0f} B/cycle, "
                f"{params['chunks']} start-up(s) of {param(facts, P.DMA_START):.0f} cycles, "
                f"{WEIGHT_BYTES // (params['chunks'] * params['lanes']):,} B per lane and chunk; "
                f"predicted {predicted_cycles:,.0f} cycles")  # fmt: skip


class GemvCostModel(CostModel):
    """Prices GEMV designs from their knobs; a program without knobs has no price."""

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        if kernel != GemvSpace.kernel or params is None:
            return None
        return predict_gemv(params["chunks"], params["lanes"], facts)
