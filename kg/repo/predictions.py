"""The cost model's predictions (Prediction nodes): what a search priced, so that a run killed in
the middle of a search does not price the same programs again."""

from __future__ import annotations

from collections.abc import Sequence

from chiplore.kg.models import Prediction
from chiplore.kg.repo.nodes import upsert
from chiplore.kg.store import GraphStore


def record_predictions(store: GraphStore, predictions: Sequence[Prediction]) -> None:
    """Keep predictions (one statement for the batch; a prediction kept twice stays one node)."""
    if predictions:
        upsert(store, list(predictions))


def predictions_of(store: GraphStore, kernel: str) -> dict[str, float | None]:
    """Every prediction kept for a kernel: id -> cycles (None: the model could not price it)."""
    rows = store.read("MATCH (p:Prediction {kernel: $k}) RETURN p.id AS id, p.cycles AS cycles", {"k": kernel})
    return {str(row["id"]): (None if row["cycles"] is None else float(row["cycles"])) for row in rows}
