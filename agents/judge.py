"""The judge: accept a candidate over BEST only on statistical evidence, and stop measuring as soon
as the answer is clear.

A decision is a sequential probability ratio test (Wald's SPRT) on interleaved A/B pairs: one job of
each design per pair, back to back on one device (the device's drift cancels), alternating who goes
first. A pair's sample is the log-ratio of the two jobs' trimmed geometric means. The test weighs
"no gain" (the ratio is 1) against "a 1 % gain" (0.99): after each pair it accepts once the
likelihood ratio says a gain with 1 % error on candidates that are no faster, rejects once it says
no gain with 10 % error on a true 1 % gain, and otherwise asks for another pair. So a clear loss or a
clear win stops after one or two pairs and only a step near the indifference zone (a gain between 0
and 1 %) takes many; at the test's pair limit such a step is accepted when the pairs show it faster
beyond a one-sided bound at half the accept error (a 0.5 % gain measured on 12 pairs), else left open.

The noise of a pair comes from the run-to-run noise sigma learning measured (`device.noise_sigma`),
which is a floor: the pairs' own spread, pooled with it, can only widen it, so a device with more
noise between jobs than within them is not trusted beyond what its pairs show. An accept needs two
pairs at least, so that the pairs' spread has a say.

The loop runs the test before the candidate's graded run (`triage`): a loser is dropped on its short
jobs and never pays for the graded one; a winner gets its graded run (correctness on every graded
set) before it becomes BEST. `decide` is the judgement after a graded run: an early look at the two
graded medians settles a clear difference (beyond twice the measured noise), the sequential test the
rest, reusing the pairs the triage ran.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from chiplore.kg.models import Decision

# Runs per side of an A/B pair. A job's fixed cost (loading, ~1.5 s) dwarfs its runs (~0.02 s each),
# so 50 runs (the device's most per job) buy the most evidence per device-second.
AB_REPEATS = 50
TRIM = 0.1  # cut from each end of a job's sorted log cycles: the rare slow runs and a cold first one
# The spread of a job's trimmed mean of log cycles, in units of sigma / sqrt(runs): 1.07 measured on
# log-normal runs with 2 % outliers of 1.1-1.6x (the simulated device's noise model); rounded up.
TRIMMED_SPREAD = 1.1
NO_GAIN = 0.0  # the log-ratio the test must reject to accept: the candidate is no faster
GAIN = math.log(0.99)  # the log-ratio it must reject to reject: a 1 % gain
ALPHA = 0.01  # accepts of candidates that are no faster
BETA = 0.10  # rejects of a true 1 % gain
MIN_ACCEPT_PAIRS = 2
MAX_PAIRS = 12
PRIOR_PAIRS = 2.0  # the weight of the measured noise against the pairs' own spread, in pairs
LATE_STEP = 0.03  # once improvements are under 3 %, the graded medians accept nothing on their own
NOISE_BAND_SIGMAS = 2.0
# The least noise the judge assumes: a chip whose runs all read alike (sigma measured 0) still has a
# counter step, and the SPRT's likelihoods need a spread above zero.
MIN_SIGMA = 0.002
# The least difference two graded medians, run minutes apart, may show by chance: the device's drift,
# which the run-to-run noise does not show (on the simulated device, +-1.5 % over half an hour).
MIN_NOISE_BAND = 0.03
Z95 = 1.959964
Z_LIMIT = 2.575829  # one-sided at ALPHA / 2: a gain shown at the pair limit, beside the SPRT's own accepts
LIMIT_METHOD = "sprt, a gain shown at its pair limit"


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


def trimmed_cycles(cycles: Sequence[float]) -> float:
    """A job's cycles: the geometric mean of its timed runs with `TRIM` of them cut from each end."""
    logs = np.sort(np.log(np.asarray(cycles, dtype=np.float64)))
    cut = int(len(logs) * TRIM)
    return float(math.exp(logs[cut : len(logs) - cut].mean()))


@dataclass(frozen=True)
class PairPlan:
    """How one side of an A/B pair is measured: runs per job, and the cycles a job's runs amount to."""

    repeats: int = AB_REPEATS
    statistic: Callable[[Sequence[float]], float] = trimmed_cycles
    spread: float = TRIMMED_SPREAD  # the statistic's spread in units of sigma / sqrt(repeats)

    def pair_sigma(self, sigma: float) -> float:
        """The spread of a pair's log-ratio from the run-to-run noise: two independent jobs."""
        return math.sqrt(2.0) * self.spread * max(sigma, MIN_SIGMA) / math.sqrt(self.repeats)


PAIR_PLAN = PairPlan()


def noise_band(sigma: float) -> float:
    """The relative difference two graded medians can show by chance (drift included)."""
    return max(NOISE_BAND_SIGMAS * sigma, MIN_NOISE_BAND)


def early(candidate: float, best: float, sigma: float) -> Verdict:
    """A clear win or a clear loss from the graded medians; `continue` sends it to A/B pairs."""
    ratio = candidate / best
    band = noise_band(sigma)
    decision: Decision = "accept" if ratio < 1 - band else "reject" if ratio > 1 + band else "continue"
    return Verdict(decision, "median-of-7", ratio, ratio * (1 - band), ratio * (1 + band), math.nan, 0,
                   samples=(candidate, best))  # fmt: skip


# A pair: the candidate's and the incumbent's cycles from back-to-back jobs, and the run ids.
PairRunner = Callable[[int], tuple[float, float, tuple[str, ...]] | None]


def pair_spread(logs: Sequence[float], prior: float) -> float:
    """The spread of one pair's log-ratio: the measured noise, widened by the pairs' own spread
    (pooled with it as `PRIOR_PAIRS` pairs' worth), never narrowed."""
    n = len(logs)
    squares = float(np.sum((np.asarray(logs) - np.mean(logs)) ** 2)) if n > 1 else 0.0
    pooled = (PRIOR_PAIRS * prior**2 + squares) / (PRIOR_PAIRS + n - 1)
    return math.sqrt(max(prior**2, pooled))


def log_likelihood_ratio(logs: Sequence[float], spread: float) -> float:
    """log P(pairs | a 1 % gain) / P(pairs | no gain), for normal pair log-ratios of that spread."""
    middle = (NO_GAIN + GAIN) / 2
    return (GAIN - NO_GAIN) / spread**2 * float(np.sum(np.asarray(logs) - middle))


def sprt_step(logs: Sequence[float], prior: float) -> Decision:
    """Wald's boundaries on the pairs so far."""
    llr = log_likelihood_ratio(logs, pair_spread(logs, prior))
    if llr >= math.log((1 - BETA) / ALPHA) and len(logs) >= MIN_ACCEPT_PAIRS:
        return "accept"
    if llr <= math.log(BETA / (1 - ALPHA)):
        return "reject"
    return "continue"


def sequential(run_pair: PairRunner, sigma: float, *, plan: PairPlan = PAIR_PLAN,
               max_pairs: int = MAX_PAIRS) -> Verdict:  # fmt: skip
    """The SPRT on pairs `run_pair(i)` (None when a job failed or the budget stops it: inconclusive).
    When `max_pairs` pairs did not settle it: an accept where the test ran to its own limit and the
    pairs show a gain (`gain_shown`), else inconclusive."""
    prior = plan.pair_sigma(sigma)
    logs: list[float] = []
    runs: list[str] = []
    for index in range(max_pairs):
        pair = run_pair(index)
        if pair is None:
            return _summary("inconclusive", logs, runs, prior)
        cand, inc, ids = pair
        logs.append(math.log(cand / inc))
        runs.extend(ids)
        decision = sprt_step(logs, prior)
        if decision != "continue":
            return _summary(decision, logs, runs, prior)
    verdict = _summary("inconclusive", logs, runs, prior)
    # Run to its own limit, the test settled neither hypothesis: the gain lies between none and 1 %. One
    # the pairs show beyond a one-sided bound (at half the accept error: its accepts add to the SPRT's) is
    # still a gain, taken under a method of its own. A shorter limit (a triage's) leaves it to `decide`.
    if max_pairs >= MAX_PAIRS and gain_shown(logs, prior):
        return replace(verdict, decision="accept", method=LIMIT_METHOD)
    return verdict


def gain_shown(logs: Sequence[float], prior: float) -> bool:
    """Whether the pairs' mean log-ratio lies below 0 by more than its one-sided bound at ALPHA / 2."""
    if len(logs) < MIN_ACCEPT_PAIRS:
        return False
    return float(np.mean(logs)) + Z_LIMIT * pair_spread(logs, prior) / math.sqrt(len(logs)) < NO_GAIN


def sign_test(wins: int, n: int) -> float:
    """One-sided sign test: the chance of `wins` or more wins in `n` fair coin flips (exact; scipy's
    binomtest gives the same number, at half a second of import for every CLI command)."""
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def _summary(decision: Decision, logs: list[float], runs: list[str], prior: float) -> Verdict:
    """The verdict with the pairs' mean ratio, a 95 % interval of it at the spread the test used (an
    estimate's spread, not corrected for stopping when the answer was clear), and a sign test."""
    if not logs:
        return Verdict(decision, "sprt", 1.0, 0.0, math.inf, 1.0, 0, tuple(runs))
    n, mean = len(logs), float(np.mean(logs))
    half = Z95 * pair_spread(logs, prior) / math.sqrt(n)
    wins = sum(value < 0 for value in logs)
    p_value = sign_test(wins, n)
    return Verdict(decision, "sprt", math.exp(mean), math.exp(mean - half), math.exp(mean + half), p_value, n,
                   tuple(runs), tuple(logs))  # fmt: skip


def decide(candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner,
           plan: PairPlan = PAIR_PLAN) -> Verdict:  # fmt: skip
    """The judgement after the candidate's graded run: a clear early loss stops; a clear early win
    stands unless the loop is late; everything else is settled by the sequential test."""
    first = early(candidate, best, sigma)
    if first.decision == "continue" or (late and first.decision == "accept"):
        return sequential(run_pair, sigma, plan=plan)
    return first


def triage(run_pair: PairRunner, sigma: float, *, plan: PairPlan = PAIR_PLAN, max_pairs: int = MAX_PAIRS) -> Verdict:
    """The sequential test before the candidate's graded run. `reject`, or `inconclusive` (the test's
    own limit reached with no gain shown), drops it without the graded run; `accept` stands once the
    graded run shows it correct; `continue` (a job failed, or `max_pairs` below the test's own limit
    ran out) leaves the decision to `decide` after it."""
    stopped = False

    def counted(index: int) -> tuple[float, float, tuple[str, ...]] | None:
        nonlocal stopped
        pair = run_pair(index)
        stopped = pair is None
        return pair

    verdict = sequential(counted, sigma, plan=plan, max_pairs=max_pairs)
    if verdict.decision == "inconclusive" and (stopped or max_pairs < MAX_PAIRS):
        return replace(verdict, decision="continue")
    return verdict


class Judge:
    """Decides a measured candidate against BEST; called once per candidate that reached the device.
    Subclass it (as Optuna's samplers subclass BaseSampler): `decide` is required; `triage` and
    `pair_plan` are optional hooks with defaults."""

    pair_plan: PairPlan = PAIR_PLAN  # how its A/B pairs are measured

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        """`candidate` and `best` are graded medians; `run_pair(i)` runs the i-th A/B pair on demand.
        `sigma` is the device's run-to-run noise as learning measured it."""
        raise NotImplementedError

    def triage(self, sigma: float, run_pair: PairRunner) -> Verdict | None:
        """Before the candidate's graded run, on A/B pairs alone: `reject` drops it without its graded
        run; `accept` stands once the graded run shows it correct; `continue` leaves it to `decide`,
        whose `run_pair` replays these pairs first. None (the default): no triage, every design gets
        its graded run first."""
        return None


@dataclass(frozen=True)
class SequentialJudge(Judge):
    """The builtin judge: the SPRT on A/B pairs before the graded run (up to `triage_pairs` of them;
    0 runs none), then the early look at the graded medians and the rest of the test."""

    triage_pairs: int = MAX_PAIRS
    pair_plan: PairPlan = field(default=PAIR_PLAN)

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        return decide(candidate, best, sigma, late=late, run_pair=run_pair, plan=self.pair_plan)

    def triage(self, sigma: float, run_pair: PairRunner) -> Verdict | None:
        if self.triage_pairs <= 0:
            return Verdict("continue", "sprt", 1.0, 0.0, math.inf, 1.0, 0)
        return triage(run_pair, sigma, plan=self.pair_plan, max_pairs=min(self.triage_pairs, MAX_PAIRS))
