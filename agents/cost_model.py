"""The loop's cost model: the target pack's structure (cycles from a design and the measured
parameters, never the target's truth), scaled by what the device said of the designs already run.
Its job is ranking and screening, not precision: the device decides. `update` is called with the
(predicted, measured) pairs of a kernel's designs after every decision (a measure callback)."""

from __future__ import annotations

import json
import statistics
from collections import OrderedDict
from collections.abc import Sequence

from chiplore.core.ids import content_sha
from chiplore.core.pack import CostModel, Facts, Params

REMEMBERED = 50_000  # raw predictions kept (a float each): a pack's model may compile to price


def calibration(pairs: Sequence[tuple[float, float]]) -> float:
    """The device's verdict on the model so far: median of measured / predicted over run designs."""
    ratios = [measured / predicted for predicted, measured in pairs if predicted > 0 and measured > 0]
    return statistics.median(ratios) if ratios else 1.0


class CalibratedCostModel:
    """A pack's cost model with one calibration factor per kernel."""

    def __init__(self, model: CostModel) -> None:
        self.model = model
        self.factors: dict[str, float] = {}
        self._raw: OrderedDict[tuple[str, str, str, str], float | None] = OrderedDict()

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        """Predicted cycles of a design, calibrated; None when the pack's model cannot price it. The
        pack's prediction of the same design under the same facts is asked for once."""
        key = (kernel, content_sha(source), json.dumps(params, sort_keys=True),
               json.dumps(facts, sort_keys=True, default=str))  # fmt: skip
        if key in self._raw:
            raw = self._raw[key]
        else:
            raw = self._raw[key] = self.model.predict(kernel, source, params, facts)
            if len(self._raw) > REMEMBERED:
                self._raw.popitem(last=False)
        return None if raw is None else raw * self.factors.get(kernel, 1.0)

    def explain(self, kernel: str, source: str, params: Params | None, facts: Facts) -> str:
        """What bounds the design, as the pack's model says ("" when it cannot say)."""
        return self.model.explain(kernel, source, params, facts)

    def update(self, kernel: str, pairs: Sequence[tuple[float, float]]) -> None:
        """Recalibrate from every (predicted, measured) pair of the kernel's designs so far."""
        self.factors[kernel] = calibration(pairs)
