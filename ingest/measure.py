"""Microbenchmarks into the graph: run the pack's probes through the Target, record every device
run, fit the parameters, record each as a Measurement of a HardwareParam with its interval, and
judge the doc claims about the same parameter: CONFIRMS when the claim falls inside the interval
(with slack for claims that say "about"), CONTRADICTS otherwise.

Device time is spent against a budget: a probe whose sweep would start past it is skipped, and a
probe that fails (a fault that retries cannot clear, a program the toolchain refuses) is recorded
as failed and skipped. A parameter already measured under the version is not measured again.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from pydantic import BaseModel

from chiplore.core.ids import content_sha
from chiplore.core.params import CLOCK_HZ, NOISE_SIGMA, ParamKey
from chiplore.core.target import Target
from chiplore.ingest.fits import Estimate
from chiplore.ingest.probe_loop import NOISE_PROBE, Admission, Found, ProbeRecorder, ProbeSession
from chiplore.ingest.units import in_unit
from chiplore.kg.models import Activity, HardwareParam, Measurement
from chiplore.kg.repo.knowledge import ended_if_raised, record_measurement
from chiplore.kg.repo.measurements import claims_about, documented_value, latest_value, measured_params
from chiplore.kg.store import GraphStore

HEDGED = re.compile(r"\b(about|roughly|around|approximately|nearly)\b|~", re.IGNORECASE)
HEDGE_SLACK = 0.10  # "about 280" agrees with anything within 10 %
EXACT_SLACK = 0.02  # a plain number still gets the noise of its own measurement
NOISE_FIT = "spread of log cycles around each job's median, outliers cut"


class MeasureSummary(BaseModel):
    version: str
    probes_run: int
    probes_skipped: list[str]  # already measured, or past the budget
    probes_failed: list[str]
    failure_reasons: dict[str, str] = {}  # a failed probe's reason, in one line
    probes_measured: list[str] = []  # the probes that ran and recorded what they found
    measurements: int
    confirmed: int
    contradicted: int
    device_s: float


def measure(store: GraphStore, target: Target, version: str, *, budget_s: float, repeats_scale: float = 0.25,
            rounds: int = 2, on_probe: Callable[[str, float], None] | None = None) -> MeasureSummary:  # fmt: skip
    """Run the pack's microbenchmarks under `version` until the budget is spent."""
    activity = Activity(id=f"runner-{uuid.uuid4().hex[:12]}", role="runner", policy="builtin")
    session = ProbeSession(store, target, version, activity, repeats_scale=repeats_scale, rounds=rounds,
                           on_probe=on_probe)  # fmt: skip
    measured = measured_params(store, version)
    counts = {"written": 0, "confirmed": 0, "contradicted": 0}

    def admit(probe_id: str) -> Admission:
        if probe_id == NOISE_PROBE:
            return "omit" if NOISE_SIGMA.key in measured or session.spent >= budget_s else "run"
        keys = [key.key for key in session.fits[probe_id].records.values()]
        if keys and all(key in measured for key in keys):
            session.add_given(known_values(store, version, session, probe_id))
            return "skip"
        return "skip" if session.spent >= budget_s else "run"

    def record(probe_id: str, found: Found) -> None:
        if isinstance(found, Estimate):
            record_noise(store, target.name, version, found, session.recorder)
            counts["written"] += 1
            return
        fit = session.fits[probe_id]
        for name, estimate in found.items():
            key = fit.records.get(name)
            if key is None:  # an intermediate value: a given for later fits, not a parameter
                continue
            _, agreed, disagreed = record_estimate(store, target.name, version, key, fit.id, session, estimate)
            counts["written"] += 1
            counts["confirmed"] += agreed
            counts["contradicted"] += disagreed

    with ended_if_raised(store, activity.id):  # (recorded at its first job: none before, nothing to end)
        outcome = session.run([*session.fits, NOISE_PROBE], admit, record)
    failed = outcome.failed
    session.recorder.finish(outcome.why)
    return MeasureSummary(
        version=version, probes_run=len([p for p in outcome.ran if p != NOISE_PROBE]), probes_skipped=outcome.skipped,
        probes_failed=failed, failure_reasons=outcome.why, probes_measured=list(outcome.ran),
        measurements=counts["written"], confirmed=counts["confirmed"], contradicted=counts["contradicted"],
        device_s=session.spent,
    )  # fmt: skip


def known_values(store: GraphStore, version: str, session: ProbeSession, probe_id: str) -> dict[str, float]:
    """Earlier measurements of a probe's parameters, as givens for the fits that need them."""
    out = {}
    for name, key in session.fits[probe_id].records.items():
        value = latest_value(store, version, key.key)
        if value is not None:
            out[name] = value
    return out


def record_noise(store: GraphStore, target: str, version: str, spread: Estimate, recorder: ProbeRecorder,
                 ) -> Measurement:  # fmt: skip
    runs = list(recorder.runs)
    key = NOISE_SIGMA
    return record_measurement(
        store,
        Measurement(id=content_sha(f"{target}|{version}|{key.key}|{'|'.join(runs)}")[:32], param=key.key,
                    value=spread.value, ci_low=spread.low, ci_high=spread.high, n=len(recorder.every_job),
                    fit=NOISE_FIT, unit=key.unit, toolchain=version),
        param=HardwareParam(key=key.key, unit=key.unit, description=key.meaning),
        run_ids=runs, activity=recorder.activity, target=target,
    )  # fmt: skip


def record_estimate(store: GraphStore, target: str, version: str, key: ParamKey, fit_id: str, session: ProbeSession,
                    estimate: Estimate) -> tuple[Measurement, int, int]:  # fmt: skip
    """A fitted parameter as a Measurement, judging the version's claims about it."""
    run_ids = list(session.recorder.runs)
    claims = claims_about(store, key.key, version)
    converting = any(claim["unit"] not in (None, key.unit) for claim in claims)
    clock = documented_value(store, CLOCK_HZ.key, version) if converting else None  # only when a unit differs
    confirms, contradicts = [], []
    for claim in claims:
        claimed = in_unit(float(claim["value"]), claim["unit"], key.unit, clock)  # type: ignore[arg-type]
        if claimed is None:  # a unit this judge cannot convert: no verdict
            continue
        (confirms if agrees(estimate, claimed, str(claim["text"])) else contradicts).append(str(claim["id"]))
    template = session.templates[session.fits[fit_id].template]
    measurement = Measurement(
        id=content_sha(f"{target}|{version}|{key.key}|{fit_id}|{'|'.join(sorted(run_ids))}")[:32], param=key.key,
        value=estimate.value, ci_low=estimate.low, ci_high=estimate.high, n=max(1, len(run_ids)),
        fit=f"{fit_id}: {template.name}", unit=key.unit, toolchain=version,
    )  # fmt: skip
    record_measurement(
        store, measurement, param=HardwareParam(key=key.key, unit=key.unit, description=key.meaning), run_ids=run_ids,
        activity=session.recorder.activity, target=target, confirms=confirms, contradicts=contradicts,
    )  # fmt: skip
    return measurement, len(confirms), len(contradicts)


def agrees(estimate: Estimate, claimed: float, text: str) -> bool:
    """Whether a documented value is consistent with the measurement's interval."""
    slack = HEDGE_SLACK if HEDGED.search(text) else EXACT_SLACK
    low, high = min(estimate.low, estimate.value), max(estimate.high, estimate.value)
    return low * (1 - slack) <= claimed <= high * (1 + slack)
