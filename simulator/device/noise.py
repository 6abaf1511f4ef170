"""The measurement model (docs/simrngd.md §8.4): what the profiling counters report for one run.

    c_meas = round8(c_true * drift(t) * exp(sigma * z) * outlier * warm)

`z ~ N(0, 1)`; `outlier ~ U(1.10, 1.60)` with p = 0.02, else 1; `drift(t) = (1 + b) * (1 + 0.015 *
sin(2 pi t / 1800 s + phi))` with `b ~ U(-0.01, 0.01)` redrawn after every cluster reset; `warm` =
1.04 for the first run after the device idled more than 60 s.
"""

from __future__ import annotations

import math

import numpy as np

from chiplore.simulator._truth import ChipTruth

COUNTER_GRANULARITY = 8


class MeasurementModel:
    """Noise of one device. All randomness comes from the device's own generator, so a replay of
    the same job sequence measures exactly the same cycles."""

    def __init__(self, truth: ChipTruth, rng: np.random.Generator) -> None:
        self.truth = truth
        self.rng = rng
        self.phase = float(rng.uniform(0.0, 2 * math.pi))
        self.bias = 0.0
        self.redraw_bias()

    def redraw_bias(self) -> None:
        """After a cluster reset or a re-seat the device settles at another operating point."""
        self.bias = float(self.rng.uniform(-self.truth.drift_bias, self.truth.drift_bias))

    def drift(self, t_s: float) -> float:
        wave = math.sin(2 * math.pi * t_s / self.truth.drift_period_s + self.phase)
        return (1 + self.bias) * (1 + self.truth.drift_amplitude * wave)

    def measure(self, c_true: float, t_s: float, first_after_idle: bool) -> int:
        z = float(self.rng.standard_normal())
        outlier = 1.0
        if self.rng.random() < self.truth.outlier_p:
            outlier = float(self.rng.uniform(self.truth.outlier_low, self.truth.outlier_high))
        warm = self.truth.warm_factor if first_after_idle else 1.0
        value = c_true * self.drift(t_s) * math.exp(self.truth.noise_sigma * z) * outlier * warm
        return int(round(value / COUNTER_GRANULARITY) * COUNTER_GRANULARITY)


def noise_cdf(x: np.ndarray, truth: ChipTruth) -> np.ndarray:
    """CDF of c_meas / (c_true * drift) before rounding: the lognormal body mixed with the
    lognormal-times-uniform outliers (what a KS test compares samples against)."""
    x = np.asarray(x, dtype=np.float64)
    sigma, p = truth.noise_sigma, truth.outlier_p
    from scipy import integrate, stats  # scipy only where the model is tested or fitted

    body = stats.norm.cdf(np.log(np.maximum(x, 1e-12)) / sigma)
    low, high = truth.outlier_low, truth.outlier_high

    def outlier_cdf(value: float) -> float:
        # P(u * exp(sigma z) <= value), u ~ U(low, high)
        integrand = lambda u: stats.norm.cdf(math.log(value / u) / sigma) if value > 0 else 0.0  # noqa: E731
        return float(integrate.quad(integrand, low, high)[0] / (high - low))

    outliers = np.array([outlier_cdf(float(v)) for v in x.ravel()]).reshape(x.shape)
    return (1 - p) * body + p * outliers
