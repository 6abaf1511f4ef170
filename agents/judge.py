"""The judge: accept a candidate over the best only on statistical evidence.

Early (big steps): the candidate's graded median is compared with the best's; it must beat it by
more than the measured noise band, and a clear loss stops there. Anything in between, and every
candidate once accepted steps have shrunk under `LATE_STEP`, goes to interleaved A/B pairs: one
short job of each per pair, alternating who goes first, the paired log-ratio of medians, and a
Student-t interval of its mean looked at every few pairs. The looks share the 5 % error (Bonferroni),
so the sequential test keeps a 95 % interval overall: a percentile bootstrap of six pairs is far too
narrow, and looking often at a 95 % interval accepts slower candidates several times in a hundred.
Accept only when the whole interval is below -0.5 %; reject once it cannot get there (its low end
above -0.5 %) or the pairs run out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.stats import binomtest
from scipy.stats import t as student_t

from chiplore.kg.models import Decision

# Runs per side of an A/B pair: a job's fixed cost (loading, ~1.5 s) dwarfs its runs, and the median
# of 25 halves the per-pair noise of a median of 5, so a real 2-3 % gain shows within a dozen pairs.
AB_REPEATS = 25
LATE_STEP = 0.03  # once improvements are under 3 %, every decision is an A/B test
MIN_GAIN = 0.005  # the whole interval must be below -0.5 %
NOISE_BAND_SIGMAS = 2.0
FIRST_LOOK, LOOK_EVERY, MAX_PAIRS = 6, 3, 24
LOOKS = 1 + (MAX_PAIRS - FIRST_LOOK) // LOOK_EVERY
ALPHA = 0.05


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
    samples: tuple[float, ...] = ()  # the paired log-ratios, or the two medians


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


def ab_test(run_pair: PairRunner, max_pairs: int = MAX_PAIRS) -> Verdict:
    """Sequential paired comparison; `run_pair(i)` returns None when the budget stops it."""
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
            verdict = _look(logs, runs, final=False)
            if verdict.decision != "continue":
                return verdict
    if len(logs) < 2:
        return Verdict("inconclusive", "paired-t", 1.0, 0.0, math.inf, 1.0, len(logs), tuple(runs),
                       tuple(logs))  # fmt: skip
    return _look(logs, runs, final=True)


def decide(candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
    """The whole decision: a clear early loss stops; a clear early win stands unless the loop is late;
    everything else is settled by A/B pairs."""
    first = early(candidate, best, sigma)
    if first.decision == "continue" or (late and first.decision == "accept"):
        return ab_test(run_pair)
    return first


def _look(logs: list[float], runs: list[str], *, final: bool) -> Verdict:
    values = np.asarray(logs)
    n = len(values)
    mean, spread = float(values.mean()), float(values.std(ddof=1)) / math.sqrt(n)
    half = float(student_t.ppf(1 - ALPHA / LOOKS / 2, n - 1)) * spread
    low, high = mean - half, mean + half
    wins = int((values < 0).sum())
    p_value = float(binomtest(wins, n, 0.5, alternative="greater").pvalue)
    threshold = math.log(1 - MIN_GAIN)
    decision: Decision
    if high < threshold:
        decision = "accept"
    elif low > threshold:
        decision = "reject"  # even the best case is not a 0.5 % gain
    else:
        decision = "inconclusive" if final else "continue"
    return Verdict(decision, "paired-t", math.exp(mean), math.exp(low), math.exp(high), p_value, n,
                   tuple(runs), tuple(logs))  # fmt: skip


class Judge(Protocol):
    """Decides a measured candidate against BEST; called once per candidate that reached the device."""

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        """`candidate` and `best` are graded medians; `run_pair(i)` runs the i-th A/B pair on demand."""
        ...


class SequentialJudge:
    """The early look on the graded medians, then interleaved A/B pairs with a sequential t-test."""

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        return decide(candidate, best, sigma, late=late, run_pair=run_pair)
