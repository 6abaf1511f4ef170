"""The one probe loop of `learn` and of an upgrade's re-measuring: run the pack's probes in a given
order against a device budget, record every device run as it comes, and hand each probe's
estimates to the caller, which decides what they mean (a new measurement, or a re-check of an old
one). The run-to-run noise is a probe like the others (`NOISE_PROBE`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from chiplore.core.clock import utc_now
from chiplore.core.ids import content_sha
from chiplore.core.params import ParamKey
from chiplore.core.probes import ProbeFit
from chiplore.core.target import DeviceJob, DeviceResult, ProbeTemplate, Target
from chiplore.ingest.fits import Bench, Estimate, noise_sigma, run_fit
from chiplore.kg.models import Activity, KernelVersion
from chiplore.kg.repo.knowledge import RUNNING, record_activity
from chiplore.kg.repo.nodes import upsert
from chiplore.kg.repo.runs import device_run, record_device_runs
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)

NOISE_PROBE = "noise"
# What a probe that cannot give an answer raises: a job that faults every time or does not compile
# (RuntimeError), a fit with too few points or no solution, a value that is no number (ValueError).
PROBE_FAILURES = (RuntimeError, KeyError, ValueError, ZeroDivisionError, IndexError)
NOISE_JOBS = 20  # x 50 runs of one long kernel: the noise within 5 %
Found = dict[str, Estimate] | Estimate  # a fit's estimates by local name, or the noise
Admission = Literal["run", "skip", "omit"]  # run it; skip it (and say so); leave it out


class ProbeRecorder:
    """Every device result of a probe run into the graph, as it comes: its KernelVersion and
    DeviceRun, under one runner activity (recorded with the first result, so a run that does
    nothing adds nothing). Keeps what the noise estimate and the fits' provenance need."""

    def __init__(self, store: GraphStore, version: str, activity: Activity, spent_s: float = 0.0) -> None:
        self.store, self.version, self.activity = store, version, activity
        self.spent = spent_s
        self.started = False
        self.runs: list[str] = []  # of the probe now running
        self.every_job: list[tuple[str, np.ndarray]] = []  # (run id, timed cycles) of the noise runs
        self.noise_jobs: dict[DeviceJob, float] = {}  # every job run, by its median: the longest measures the noise

    def begin(self) -> None:
        if not self.started:
            record_activity(self.store, self.activity.model_copy(update={"outcome": RUNNING}))
            self.started = True

    def __call__(self, job: DeviceJob, result: DeviceResult) -> None:
        self.spent += result.device_s
        run = device_run(job, result)
        version_node = KernelVersion(sha=content_sha(job.program), kernel=job.kernel, source=job.program,
                                     toolchain=self.version)  # fmt: skip
        upsert(self.store, [version_node])
        record_device_runs(self.store, [(run, version_node.sha)], activity=self.activity)
        self.runs.append(run.id)
        if run.status == "ok" and run.cycles:
            self.every_job.append((run.id, np.asarray(run.cycles, dtype=np.float64)))
            self.noise_jobs[job] = max(self.noise_jobs.get(job, 0.0), float(np.median(run.cycles)))

    def finish(self, why: Mapping[str, str]) -> None:
        """Close the activity; its outcome names each failed probe and why."""
        if self.started:
            ended = {"ended_at": utc_now(), "outcome": probe_outcome(why)}
            upsert(self.store, [self.activity.model_copy(update=ended)])


def probe_outcome(why: Mapping[str, str]) -> str:
    """A probe run's outcome: `ok`, or each failed probe and why."""
    return "failed probes: " + "; ".join(f"{p} ({reason})" for p, reason in why.items()) if why else "ok"


@dataclass
class ProbeOutcome:
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # each failed probe's reason, in one line, in order

    @property
    def failed(self) -> list[str]:
        return list(self.why)


class ProbeSession:
    """One run's probes on one toolchain version: the target's templates, the pack's fits, the
    device through a recorder, and the values found so far (later fits take them as givens).

    `repeats_scale` and `rounds` make the sweeps leaner than the probes state (learning wants every
    parameter within 5 %, not 2 %, in a quarter of an hour of device time)."""

    def __init__(self, store: GraphStore, target: Target, version: str, activity: Activity, *, spent_s: float = 0.0,
                 repeats_scale: float = 0.25, rounds: int = 2,
                 on_probe: Callable[[str, float], None] | None = None) -> None:  # fmt: skip
        pack = target.pack()
        self.version = version
        self.target = target
        self.templates = {p.id: p for p in target.microbenchmarks()}
        self.fits: dict[str, ProbeFit] = {f.id: f for f in pack.fits if f.template in self.templates}
        self.keys: dict[str, ParamKey] = {name: key for f in pack.fits for name, key in f.records.items()}
        self.recorder = ProbeRecorder(store, version, activity, spent_s=spent_s)
        self.bench = Bench(target, on_result=self.recorder)
        self.given: dict[str, float] = {}
        self.repeats_scale, self.rounds = repeats_scale, rounds
        self.on_probe = on_probe

    @property
    def spent(self) -> float:
        return self.recorder.spent

    def run(self, order: Iterable[str], admit: Callable[[str], Admission],
            record: Callable[[str, Found], None]) -> ProbeOutcome:  # fmt: skip
        """Run the probes in `order` that `admit` lets through; `record` hears what each found."""
        outcome = ProbeOutcome()
        for probe_id in order:
            admission = admit(probe_id)
            if admission != "run":
                if admission == "skip":
                    outcome.skipped.append(probe_id)
                continue
            before = self.spent
            try:
                found = self._noise() if probe_id == NOISE_PROBE else self._fit(probe_id)
                record(probe_id, found)  # a value that is no number (a NaN fit) is refused here
            except PROBE_FAILURES as error:  # a fault retries cannot clear, a refused program, a fit with no answer
                outcome.why[probe_id] = " ".join(str(error).split())[:300] or type(error).__name__
                log.info("probe %s failed: %s", probe_id, outcome.why[probe_id])  # the summary says it
                continue
            outcome.ran.append(probe_id)
            if self.on_probe is not None:
                self.on_probe(probe_id, self.spent - before)
        return outcome

    def _fit(self, probe_id: str) -> dict[str, Estimate]:
        """One probe's sweep and fit; raises one of PROBE_FAILURES when it failed."""
        spec = self.fits[probe_id]
        probe = self.templates[spec.template]
        self.recorder.begin()
        self.recorder.runs.clear()
        found = run_fit(spec, probe, self.version, self.bench, self.given,
                        repeats=max(3, round(probe.repeats * self.repeats_scale)), rounds=self.rounds)  # fmt: skip
        self.add_given({name: e.value for name, e in found.items()})
        return found

    def add_given(self, values: Mapping[str, float]) -> None:
        """Values later fits take as givens; later probes are written for them (e.g. the chip's shape)."""
        self.given |= values
        self.templates = {p.id: p for p in self.target.microbenchmarks_for(self.given)}

    def _noise(self) -> Estimate:
        """The noise: many runs of one long kernel (the longest the sweeps ran, or the first probe's
        first point when nothing ran this time), in jobs of fifty. ValueError when no job was long enough."""
        recorder = self.recorder
        recorder.begin()
        if recorder.noise_jobs:
            longest = max(recorder.noise_jobs, key=lambda job: recorder.noise_jobs[job])
        else:
            # a timed probe's (a search's template may be compile-only)
            timed = [self.templates[f.template] for f in self.fits.values() if f.search is None]
            first: ProbeTemplate = timed[0] if timed else next(iter(self.templates.values()))
            longest = DeviceJob(kernel=first.kernel, program=first.instantiate(first.points[0], self.version),
                                toolchain=self.version, fixtures="smoke", agent="harness")  # fmt: skip
        recorder.every_job.clear()
        recorder.runs.clear()
        for _ in range(NOISE_JOBS):
            self.bench.run(longest.model_copy(update={"repeats": 50}))
        return noise_sigma([[cycles for _, cycles in recorder.every_job]])
