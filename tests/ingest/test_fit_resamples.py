"""A fit's interval comes from the resamples its model reads (chiplore.ingest.fits.fit): one that the model
refuses (an outlier run moved one point's median) is left out, and a fit refused on most of them is none."""

from __future__ import annotations

import numpy as np
import pytest

from chiplore.core.probes import ProbeFit
from chiplore.core.target import ProbeTemplate
from chiplore.ingest.fits import fit

pytestmark = pytest.mark.unit

PROBE = ProbeTemplate(id="MBX", name="x", kernel="x", measures="x", template="", knob="N", points=({"N": "1"},))


def slow_below(limit: float):  # type: ignore[no-untyped-def]
    """A model that reads its one point's median as a rate, and refuses a median past `limit`."""

    def model(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
        if medians[0] > limit:
            raise ValueError(f"MBX: {medians[0]:.0f} cycles, past {limit:.0f}")
        return {"rate": 1000.0 / float(medians[0])}

    return model


def test_a_resample_the_model_refuses_is_left_out_of_the_interval() -> None:
    """MB07 failed on 8 of 12 seeds of the ordinary chip at learn's repeats: one resample in 400 whose median
    took an outlier run raised, and the whole probe with it, where the central fit was right."""
    runs = np.array([100.0] * 22 + [400.0] * 18)  # a resample's median is sometimes an outlier's
    spec = ProbeFit("MBX", "MBX", ("rate",), model=slow_below(150.0))
    found = fit(spec, PROBE, [[runs]], {}, draws=400, seed=1)
    assert found["rate"].value == pytest.approx(10.0)
    assert found["rate"].low == pytest.approx(10.0) and found["rate"].high == pytest.approx(10.0)


def test_a_fit_its_model_refuses_on_most_resamples_is_refused() -> None:
    runs = np.array([100.0] * 19 + [400.0] * 21)  # the central median is an outlier's too
    spec = ProbeFit("MBX", "MBX", ("rate",), model=slow_below(150.0))
    with pytest.raises(ValueError, match="MBX: 400 cycles, past 150"):
        fit(spec, PROBE, [[runs]], {}, draws=400, seed=1)
    spread = np.array([80.0, 90.0, 100.0, 110.0, 120.0])  # the central median reads; about 64 % of resamples not

    def exact(points: list[dict[str, str]], medians: np.ndarray, given: dict[str, float]) -> dict[str, float]:
        if medians[0] != 100.0:
            raise ValueError(f"MBX: {medians[0]:.0f} cycles, not 100")
        return {"rate": 10.0}

    with pytest.raises(ValueError, match=r"MBX: \d+ of 400 resamples refused \(MBX: \d+ cycles, not 100\)"):
        fit(ProbeFit("MBX", "MBX", ("rate",), model=exact), PROBE, [[spread]], {}, draws=400, seed=1)
