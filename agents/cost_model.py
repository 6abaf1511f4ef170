"""The loop's cost model: the target pack's structure (cycles from a design and the measured
parameters, never the target's truth), scaled by what the device said of the designs already run.
Its job is ranking and screening, not precision: the device decides. `update` is called with the
(predicted, measured) pairs of a kernel's designs after every decision (a measure callback)."""

from __future__ import annotations

import json
import logging
import statistics
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from chiplore.core.ids import content_sha
from chiplore.core.pack import CostModel, Facts, Params
from chiplore.kg.models import Prediction
from chiplore.kg.repo.predictions import predictions_of, record_predictions
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)

REMEMBERED = 50_000  # raw predictions kept (a float each): a pack's model may compile to price
KEEP_EVERY = 16  # predictions written to the memory at a time
MIN_PAIRS = 3  # run designs of a kernel before its model error is taken as known


def calibration(pairs: Sequence[tuple[float, float]], best: tuple[float, float] | None = None) -> float:
    """The device's verdict on the model so far: the median of measured / predicted over run designs, each
    predicted by the pack's model before any calibration (a calibrated one would undo the last factor).
    With BEST's (predicted now, measured), the lower of that median and BEST's own ratio: a design is then
    priced at most as the model prices it against BEST, so a model whose error differs between designs
    (facts an upgrade left stale, say) screens out no design it ranks ahead of BEST."""
    ratios = _ratios(pairs)
    median = statistics.median(ratios) if ratios else None
    at_best = best[1] / best[0] if best is not None and best[0] > 0 and best[1] > 0 else None
    found = [ratio for ratio in (median, at_best) if ratio is not None]
    return min(found) if found else 1.0


def model_error(pairs: Sequence[tuple[float, float]]) -> float | None:
    """How far the model's error varies between a kernel's run designs: the largest measured / predicted
    ratio over the smallest, less one (None before MIN_PAIRS designs ran). A design the model prices x
    slower than another can be the faster one only when x is below it."""
    ratios = _ratios(pairs)
    return max(ratios) / min(ratios) - 1 if len(ratios) >= MIN_PAIRS else None


def _ratios(pairs: Sequence[tuple[float, float]]) -> list[float]:
    return [measured / predicted for predicted, measured in pairs if predicted > 0 and measured > 0]


class PredictionMemory(Protocol):
    """Where raw predictions outlive a process (the graph's Prediction nodes)."""

    def recall(self, kernel: str) -> dict[str, float | None]:
        """Every prediction kept for the kernel, by key."""
        ...

    def keep(self, kernel: str, predictions: dict[str, float | None]) -> None:
        """Keep these predictions of the kernel, by key."""
        ...


class GraphPredictionMemory:
    """Predictions kept in the graph, so a run killed in the middle of a search prices none twice."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store

    def recall(self, kernel: str) -> dict[str, float | None]:
        return predictions_of(self.store, kernel)

    def keep(self, kernel: str, predictions: dict[str, float | None]) -> None:
        record_predictions(self.store, [Prediction(id=key, kernel=kernel, cycles=cycles)
                                        for key, cycles in predictions.items()])  # fmt: skip


class CalibratedCostModel:
    """A pack's cost model with one calibration factor per kernel. With a `memory`, every raw prediction
    is kept there (in batches) and a kernel's kept ones are recalled before the pack is asked."""

    def __init__(self, model: CostModel, memory: PredictionMemory | None = None) -> None:
        self.model, self.memory = model, memory
        self.factors: dict[str, float] = {}
        self.errors: dict[str, float | None] = {}  # model_error of each kernel's run designs
        self._raw: OrderedDict[str, float | None] = OrderedDict()
        self._recalled: set[str] = set()
        self._unkept: dict[str, dict[str, float | None]] = {}
        self._lock = threading.Lock()

    @property
    def reads(self) -> tuple[str, ...]:
        """The parameter keys the pack's prices read."""
        return self.model.reads

    def predict(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        """Predicted cycles of a design, calibrated; None when the pack's model cannot price it."""
        raw = self.raw(kernel, source, params, facts)
        return None if raw is None else raw * self.factors.get(kernel, 1.0)

    def raw(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        """The pack's own prediction, before the kernel's calibration: what a design records so that the
        calibration compares the device with the model, not with itself. Asked of the pack once per
        design and facts (across runs, with a memory)."""
        key = content_sha(f"{kernel}|{content_sha(source)}|{json.dumps(params, sort_keys=True)}|"
                          f"{json.dumps(facts, sort_keys=True, default=str)}")  # fmt: skip
        self._recall(kernel)
        if key in self._raw:
            raw = self._raw[key]
        else:
            raw = self._priced(kernel, source, params, facts)
            with self._lock:
                self._raw[key] = raw
                if len(self._raw) > REMEMBERED:
                    self._raw.popitem(last=False)
                self._unkept.setdefault(kernel, {})[key] = raw
                full = sum(len(batch) for batch in self._unkept.values()) >= KEEP_EVERY
            if full:
                self.keep()
        return raw

    def keep(self) -> None:
        """Put the predictions not kept yet into the memory (called every few predictions and after
        each decision)."""
        with self._lock:
            unkept, self._unkept = self._unkept, {}
        if self.memory is not None:
            for kernel, batch in unkept.items():
                self.memory.keep(kernel, batch)

    def _priced(self, kernel: str, source: str, params: Params | None, facts: Facts) -> float | None:
        """The pack's price, or None when its model fails on the program: a design that cannot be priced
        is screened out, and a fault in a pack's model must not stop the loop (logged for its author)."""
        try:
            return self.model.predict(kernel, source, params, facts)
        except Exception as error:  # a pack's model is third-party code: any failure means "cannot price"
            log.warning("the pack's cost model failed on a design of %s: %s: %s", kernel, type(error).__name__,
                        (str(error).splitlines() or [""])[0][:200])  # fmt: skip
            return None

    def _recall(self, kernel: str) -> None:
        if self.memory is None or kernel in self._recalled:
            return
        self._recalled.add(kernel)
        recalled = self.memory.recall(kernel)
        with self._lock:
            for key, raw in recalled.items():
                self._raw.setdefault(key, raw)

    def explain(self, kernel: str, source: str, params: Params | None, facts: Facts) -> str:
        """What bounds the design, as the pack's model says ("" when it cannot say, or fails: a pack's
        model is third-party code, and an explanation is never worth stopping the loop for)."""
        try:
            return self.model.explain(kernel, source, params, facts)
        except Exception as error:
            log.warning("the pack's cost model could not explain a design of %s: %s: %s", kernel,
                        type(error).__name__, (str(error).splitlines() or [""])[0][:200])  # fmt: skip
            return ""

    def update(self, kernel: str, pairs: Sequence[tuple[float, float]], best: tuple[float, float] | None = None
               ) -> None:  # fmt: skip
        """Recalibrate from every (predicted, measured) pair of the kernel's designs so far and BEST's (its
        raw price under today's facts, its measured cycles)."""
        self.factors[kernel] = calibration(pairs, best)
        self.errors[kernel] = model_error(pairs)
        self.keep()
