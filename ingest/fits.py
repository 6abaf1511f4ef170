"""Microbenchmark fits: run a probe's sweep on the device through the Target interface, and fit
the parameters it is meant to reveal (the pack's `ProbeFit` models), with bootstrap intervals.

A fit sees cycles and the probe's points, as an agent does, and nothing else. The simulator's tests
run its pack's fits on its noisy device to check that every probe reveals its parameter at its
stated repeats (within about 2 %); `chiplore learn` runs them, leaner, to learn the chip.

Sweeps run every point once per round and spread the rounds evenly over one drift period of device
time, so the slow drift averages out instead of biasing one point. Medians per point make
the fits robust to the occasional slow run. Later fits take earlier results as givens (an empty
kernel's time is the intercept most DMA probes subtract).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict

from chiplore.core.errors import TargetError
from chiplore.core.probes import ProbeFit
from chiplore.core.target import CheckResult, DeviceJob, DeviceResult, ProbeTemplate, Target

Samples = list[np.ndarray]  # per point: the timed runs' cycles
Jobs = list[list[np.ndarray]]  # per point, per job: the runs one job took (one moment of the drift)
SPREAD_S = 1800.0  # one drift period of device time per sweep


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)

    value: float
    low: float  # 95 % bootstrap interval
    high: float


ROUNDS = 6  # slots over one drift period; a round's job runs its share of the repeats


class Bench:
    """The device as a sweep uses it: jobs through the Target, an optional way to let device time
    pass between rounds (a harness warps its simulated clock; an agent just keeps working), and a
    hook that sees every result (to record it, or to stop when the budget is spent)."""

    def __init__(self, target: Target, wait: Callable[[float], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 on_result: Callable[[DeviceJob, DeviceResult], None] | None = None) -> None:  # fmt: skip
        self.target, self.wait, self.clock, self.on_result = target, wait, clock, on_result

    def run(self, job: DeviceJob) -> DeviceResult:
        result = self.target.result(self.target.submit(job))
        if self.on_result is not None:
            self.on_result(job, result)
        return result

    def check(self, source: str, version: str) -> CheckResult:
        return self.target.check(source, version)


class CompileBench(Bench):
    """The bench of a compile-only search (a chip's structure, a compiler limit): it compiles and
    never runs, so what it finds costs no device time."""

    def run(self, job: DeviceJob) -> DeviceResult:
        raise TargetError(f"{job.kernel}: a compile-only search asked for a device run")


def sweep(bench: Bench, probe: ProbeTemplate, version: str, repeats: int | None = None, rounds: int = ROUNDS,
          ) -> Jobs:  # fmt: skip
    """Each point's cycles, `repeats` runs of it (default: the probe's stated repeats), taken in up
    to `rounds` jobs per point so the fixed cost of a job is paid a few times, not once per run."""
    wanted = repeats if repeats is not None else probe.repeats
    rounds = max(1, min(wanted, rounds))
    sources = [probe.instantiate(point, version) for point in probe.points]
    jobs: Jobs = [[] for _ in sources]
    start = bench.clock() if bench.clock is not None else 0.0
    for round_no in range(rounds):
        # Round k starts k / rounds of a drift period after the first: the rounds sample the slow
        # drift evenly over one period, so its mean over the sweep is the device's operating point.
        if bench.wait is not None and bench.clock is not None:
            bench.wait(max(0.0, start + round_no * SPREAD_S / rounds - bench.clock()))
        runs = wanted // rounds + (1 if round_no < wanted % rounds else 0)
        for offset in range(len(sources)):  # rotate the order so no point always runs first
            index = (offset + round_no) % len(sources)
            job = DeviceJob(kernel=probe.kernel, program=sources[index], toolchain=version, fixtures="smoke",
                            repeats=runs, agent="harness")  # fmt: skip
            jobs[index].append(np.asarray(_timed_runs(bench, job, f"{probe.id} point {index}"), dtype=np.float64))
    return jobs


def _timed_runs(bench: Bench, job: DeviceJob, what: str, attempts: int = 4) -> list[float]:
    """A job's timed runs; a job that faults at random (a hang, a transient) is simply run again."""
    result = None
    for _ in range(attempts):
        result = bench.run(job)
        if result.status == "ok":
            return [run.cycles for run in result.runs if not run.warmup]
        if result.status not in ("fault", "timeout", "transient"):  # a program or budget problem: retrying cannot help
            break
    assert result is not None
    raise RuntimeError(f"{what}: {result.status}: {result.message}")


def fit(fit_spec: ProbeFit, probe: ProbeTemplate, jobs: Jobs, given: dict[str, float],
        draws: int = 400, seed: int = 0) -> dict[str, Estimate]:  # fmt: skip
    """The parameters from the per-point medians, and intervals from resampling each point's runs."""
    assert fit_spec.model is not None, f"{fit_spec.id} is a search, not a fit"
    points = [dict(p) for p in probe.points]
    samples: Samples = [np.concatenate(point) for point in jobs]
    try:
        central = fit_spec.model(points, np.array([np.median(s) for s in samples]), given)
    except KeyError as missing:  # a value an earlier probe should have found: it failed, or has not run
        raise ValueError(f"{fit_spec.id} needs {missing.args[0]}, which no earlier probe measured") from None
    rng = np.random.default_rng(seed)
    # every draw's median of every point at once (a point's draws are one matrix): learn fits ~30 probes
    resampled = np.stack([np.median(rng.choice(s, size=(draws, len(s))), axis=1) for s in samples], axis=1)
    boot: dict[str, list[float]] = {name: [] for name in central}
    refused: list[str] = []
    for medians in resampled:
        try:
            drawn = fit_spec.model(points, medians, given)
        except ValueError as error:  # a resample the model cannot read (an outlier run at one point)
            refused.append(str(error))
            continue
        for name, value in drawn.items():
            boot[name].append(value)
    # the interval comes from the resamples the model reads; a fit it refuses on most of them is no fact
    if len(refused) > draws // 2:
        raise ValueError(f"{fit_spec.id}: {len(refused)} of {draws} resamples refused ({refused[0]})")
    found = {
        name: Estimate(
            value=value, low=float(np.percentile(boot[name], 2.5)), high=float(np.percentile(boot[name], 97.5))
        )
        for name, value in central.items()
    }
    return found


def noise_sigma(jobs: Jobs, draws: int = 400, seed: int = 0) -> Estimate:
    """The run-to-run spread (sigma of log cycles) of runs around their job's median, pooled over
    jobs: within a job the slow drift has not moved. The rare slow runs are cut at three robust
    sigmas and the standard deviation of the rest, corrected for the cut, is the estimate (it needs
    a third of the runs a MAD would). Kernels too short for the device's cycle counter to resolve the
    spread, and jobs too small to have a steady median, are left out."""
    rng = np.random.default_rng(seed)
    steady = [runs for point in jobs for runs in point if len(runs) >= 20]
    kept = [runs for runs in steady if _resolved(runs)]
    if not kept and steady and all(len(np.unique(runs)) == 1 for runs in steady):
        return Estimate(value=0.0, low=0.0, high=0.0)  # every run of every job read the same: nothing to spread
    if not kept:
        raise ValueError("no job long enough to measure the noise")
    residuals = np.concatenate([np.log(runs) - np.log(np.median(runs)) for runs in kept])

    def sigma(values: np.ndarray) -> float:
        robust = 1.4826 * np.median(np.abs(values - np.median(values)))
        inside = values[np.abs(values - np.median(values)) <= 3 * robust]  # all alike: robust 0, kept
        return float(np.std(inside) / 0.9866)  # a normal cut at 3 sigma keeps 98.66 % of its spread

    boot = [sigma(rng.choice(residuals, size=len(residuals))) for _ in range(draws)]
    return Estimate(value=sigma(residuals), low=float(np.percentile(boot, 2.5)), high=float(np.percentile(boot, 97.5)))


def _resolved(runs: np.ndarray) -> bool:
    """Whether a job's runs are long enough for the device's cycle counter to resolve a 1 % spread:
    the counter's step (the smallest gap between distinct readings) is under a 500th of the median."""
    distinct = np.unique(runs)
    step = float(np.min(np.diff(distinct))) if len(distinct) > 1 else float(np.median(runs))
    return float(np.median(runs)) >= 500 * step


def run_fit(fit_spec: ProbeFit, probe: ProbeTemplate, version: str, bench: Bench, given: dict[str, float],
            repeats: int | None = None, rounds: int = ROUNDS) -> dict[str, Estimate]:  # fmt: skip
    """Sweep and fit, or search: the probe's parameters (`repeats` overrides the probe's own)."""
    if fit_spec.search is not None:
        return {k: Estimate(value=v, low=v, high=v) for k, v in fit_spec.search(probe, version, bench).items()}
    return fit(fit_spec, probe, sweep(bench, probe, version, repeats, rounds), given)
