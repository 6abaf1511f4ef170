"""The judge: accept a candidate over the best only on statistical evidence.

Early (big steps): the candidate's graded median is compared with the best's; it must beat it by
more than the measured noise band, and a clear loss stops there. Anything in between, and every
candidate once accepted steps have shrunk under `LATE_STEP`, goes to interleaved A/B pairs: one
short job of each per pair, alternating who goes first, the paired log-ratio of medians, and a
bootstrap interval looked at every few pairs. Accept only when the whole 95 % interval is below
-0.5 %; reject once the interval cannot get there (its low end above -0.5 %) or the pairs run out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binomtest

from kg.models import Decision

LATE_STEP = 0.03  # once improvements are under 3 %, every decision is an A/B test
MIN_GAIN = 0.005  # the whole interval must be below -0.5 %
NOISE_BAND_SIGMAS = 2.0
FIRST_LOOK, LOOK_EVERY, MAX_PAIRS = 6, 3, 24
BOOTSTRAP_DRAWS = 4000


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    method: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    pairs: int
    run_ids: tuple[str, ...] = ()
    samples: tuple[float, ...] = field(default=())  # the paired log-ratios, or the two medians


def noise_band(sigma: float) -> float:
    """The relative difference two graded medians can show by chance (drift included)."""
    return NOISE_BAND_SIGMAS * sigma


def early(candidate: float, best: float, sigma: float) -> Verdict:
    """A clear win or a clear loss from the graded medians; `continue` sends it to A/B pairs."""
    ratio = candidate / best
    band = noise_band(sigma)
    decision: Decision = "accept" if ratio < 1 - band else "reject" if ratio > 1 + band else "continue"
    return Verdict(decision, "median-of-7", ratio, ratio * (1 - band), ratio * (1 + band), math.nan, 0,
                   samples=(candidate, best))  # fmt: skip


# A pair: the candidate's and the incumbent's median cycles from back-to-back jobs, and the run ids.
PairRunner = Callable[[int], tuple[float, float, tuple[str, ...]] | None]


def ab_test(run_pair: PairRunner, seed: int = 0, max_pairs: int = MAX_PAIRS) -> Verdict:
    """Sequential paired comparison; `run_pair(i)` returns None when the budget stops it."""
    rng = np.random.default_rng(seed)
    logs: list[float] = []
    runs: list[str] = []
    verdict: Verdict | None = None
    for index in range(max_pairs):
        pair = run_pair(index)
        if pair is None:
            break
        cand, inc, ids = pair
        logs.append(math.log(cand / inc))
        runs.extend(ids)
        if len(logs) >= FIRST_LOOK and (len(logs) - FIRST_LOOK) % LOOK_EVERY == 0:
            verdict = _look(logs, runs, rng, final=False)
            if verdict.decision != "continue":
                return verdict
    if len(logs) < 2:
        return Verdict("inconclusive", "paired-bootstrap", 1.0, 0.0, math.inf, 1.0, len(logs), tuple(runs),
                       tuple(logs))  # fmt: skip
    return _look(logs, runs, rng, final=True)


def _look(logs: list[float], runs: list[str], rng: np.random.Generator, *, final: bool) -> Verdict:
    values = np.asarray(logs)
    means = rng.choice(values, size=(BOOTSTRAP_DRAWS, len(values)), replace=True).mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    wins = int((values < 0).sum())
    p_value = float(binomtest(wins, len(values), 0.5, alternative="greater").pvalue)
    threshold = math.log(1 - MIN_GAIN)
    decision: Decision
    if high < threshold:
        decision = "accept"
    elif low > threshold:
        decision = "reject"  # even the best case is not a 0.5 % gain
    else:
        decision = "inconclusive" if final else "continue"
    return Verdict(decision, "paired-bootstrap", float(math.exp(values.mean())), float(math.exp(low)),
                   float(math.exp(high)), p_value, len(values), tuple(runs), tuple(logs))  # fmt: skip
