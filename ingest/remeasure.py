"""Re-measuring under a new toolchain: the stale measurements of the old version are measured
again, within a device budget, in the order that matters most:

1. parameters the new version's docs put further from their measurement than a re-measurement
   confirms (`CONFIRM_FLOOR`): the vendor says something moved;
2. then the other parameters the new version's docs state another value for (or a first one);
3. then the parameters the designs consulted most (CONSULTED links);
4. then the cheapest (the device time the old sweep took).

A probe whose last sweep cost more than the budget left is skipped for a cheaper one. A new value
consistent with the old one (`consistent`) confirms it: the old measurement holds under the new version
too and a Check records the runs. Otherwise the new measurement SUPERSEDES the old. The doc claims
of the new version are judged against whatever now holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from chiplore.core.ids import content_sha
from chiplore.core.params import CLOCK_HZ, NOISE_SIGMA
from chiplore.core.target import Target
from chiplore.ingest.fits import Estimate
from chiplore.ingest.measure import agrees, record_estimate, record_noise
from chiplore.ingest.probe_loop import NOISE_PROBE, Admission, Found, ProbeSession
from chiplore.ingest.units import in_unit
from chiplore.kg.models import Activity, Check, Measurement
from chiplore.kg.repo.knowledge import confirm_measurement, supersede
from chiplore.kg.repo.measurements import (
    carried_over,
    claims_about,
    consulted_counts,
    device_seconds_behind,
    documented_value,
    documented_values,
    stale_measurements,
    superseded_under,
    unjudged_claims,
    values_under,
)
from chiplore.kg.repo.nodes import Link, Ref, link
from chiplore.kg.store import GraphStore

CONFIRM_Z = 3.0  # standard errors of the difference of the two estimates
# Sweeps on different days differ by more than one sweep's bootstrap interval (the device drifts
# between sessions; re-measuring every parameter on other device seeds moved unchanged ones by up to
# 7.4 %): a fitted value that moved less than this confirms. Exact values (searches of the
# compiler's limits) have no interval, and any move is a change.
CONFIRM_FLOOR = 0.10
Z95 = 1.96
COST_MARGIN = 1.15  # a sweep again costs what it did, give or take a retried job


class Recheck(BaseModel):
    param: str
    outcome: Literal["confirmed", "changed"]
    before: float
    before_ci: tuple[float, float]
    after: float
    after_ci: tuple[float, float]


class RemeasureSummary(BaseModel):
    previous: str
    version: str
    order: list[str]  # the stale probes, most important first
    probes_run: list[str]
    probes_skipped: list[str]  # over the budget left
    skip_reasons: dict[str, str] = {}  # a skipped probe's cost against what was left, in one line
    probes_failed: list[str]
    failure_reasons: dict[str, str] = {}  # a failed probe's reason, in one line
    rechecks: list[Recheck]
    claims_judged: int
    device_s: float

    def then(self, later: RemeasureSummary) -> RemeasureSummary:
        """This pass followed by a later one of the same upgrade: what both ran, what is still skipped."""
        return later.model_copy(update={
            "order": self.order, "probes_run": self.probes_run + later.probes_run,
            "probes_failed": self.probes_failed + later.probes_failed,
            "failure_reasons": self.failure_reasons | later.failure_reasons, "rechecks": self.rechecks + later.rechecks,
            "claims_judged": self.claims_judged + later.claims_judged, "device_s": self.device_s + later.device_s,
        })  # fmt: skip


def consistent(old: Measurement, new: Estimate, exact: bool = False) -> bool:
    """Whether a re-measurement agrees with the measurement it re-checks. An `exact` value (a search of a
    limit) agrees only with itself, but for the float's last bits; a fitted one within three standard
    errors of the difference or a tenth, on a device with no noise too (its intervals have no width,
    and a fit that reads other re-measured values moved by 1e-8 to 0.2 %: 'changed' on a quiet chip)."""
    se = math.hypot((old.ci_high - old.ci_low) / (2 * Z95), (new.high - new.low) / (2 * Z95))
    if exact:
        return math.isclose(new.value, old.value, rel_tol=1e-9, abs_tol=1e-12)
    return abs(new.value - old.value) <= max(CONFIRM_Z * se, CONFIRM_FLOOR * abs(old.value), 1e-12)


def remeasure(store: GraphStore, target: Target, previous: str, version: str, *, budget_s: float,
              activity: Activity, spent_s: float = 0.0, free_only: bool = False, repeats_scale: float = 0.25,
              rounds: int = 2, on_probe: Callable[[str, float], None] | None = None) -> RemeasureSummary:  # fmt: skip
    """Re-measure `previous`'s stale measurements under `version` until `budget_s` (which counts
    `spent_s`, the device time this upgrade already spent) is used up; with `free_only`, only the
    probes that cost no device time (the compiler's limits). Idempotent: what an earlier call
    confirmed or superseded is no longer stale."""
    session = ProbeSession(store, target, version, activity, spent_s=spent_s, repeats_scale=repeats_scale,
                           rounds=rounds, on_probe=on_probe)  # fmt: skip
    stale = stale_measurements(store, target.name, previous)
    by_probe = _stale_probes(session, stale)
    order = _priority(store, target.name, previous, version, stale, by_probe)
    names = {key.key: name for name, key in session.keys.items()}
    session.add_given({names[key]: value for key, value in _given(store, target.name, previous, version).items()
                       if key in names})  # fmt: skip
    rechecks: list[Recheck] = []

    def cost(probe_id: str) -> float:
        return device_seconds_behind(store, [stale[key].id for key in by_probe[probe_id]])

    skip_reasons: dict[str, str] = {}

    def admit(probe_id: str) -> Admission:
        needed = cost(probe_id)
        if free_only and needed > 0:
            return "omit"
        if session.spent + COST_MARGIN * needed > budget_s:  # the priority bends to cost: say so
            skip_reasons[probe_id] = (f"its last sweep took {needed:.0f} device-s, and "
                                      f"{max(budget_s - session.spent, 0.0):.0f} of the budget were left")  # fmt: skip
            return "skip"
        return "run"

    def record(probe_id: str, found: Found) -> None:
        if isinstance(found, Estimate):
            estimates = {NOISE_SIGMA.key: found}
        else:
            fit = session.fits[probe_id]
            estimates = {key.key: found[name] for name, key in fit.records.items() if name in found}
        exact = not isinstance(found, Estimate) and session.fits[probe_id].search is not None  # a search's limit
        for key, estimate in estimates.items():
            old = stale.get(key)
            if old is not None and consistent(old, estimate, exact):
                rechecks.append(_confirm(store, target.name, version, old, estimate, session, activity))
                continue
            if isinstance(found, Estimate):
                new = record_noise(store, target.name, version, estimate, session.recorder)
            else:
                new, _, _ = record_estimate(store, target.name, version, session.keys[names[key]], probe_id, session,
                                            estimate)  # fmt: skip
            if old is not None:
                supersede(store, "Measurement", new.id, old.id)
                rechecks.append(_recheck(old, estimate, "changed"))

    outcome = session.run(order, admit, record)
    judged = judge_claims(store, target.name, version)
    return RemeasureSummary(previous=previous, version=version, order=order, probes_run=outcome.ran,
                            probes_skipped=outcome.skipped, skip_reasons=skip_reasons, probes_failed=outcome.failed,
                            failure_reasons=outcome.why,
                            rechecks=rechecks, claims_judged=judged, device_s=session.spent - spent_s)  # fmt: skip


class RecheckState(BaseModel):
    """Where the re-checking of `previous`'s measurements stands, over every run of the upgrade."""

    confirmed: list[str]  # parameters whose old measurement holds under the new version too
    changed: list[Recheck]
    stale: list[str]  # not re-measured yet: the old value serves


def recheck_state(store: GraphStore, target: str, previous: str, version: str) -> RecheckState:
    return RecheckState(
        confirmed=carried_over(store, target, version),
        changed=[_recheck(old, Estimate(value=new.value, low=new.ci_low, high=new.ci_high), "changed")
                 for old, new in superseded_under(store, target, version)],
        stale=sorted(stale_measurements(store, target, previous)),
    )  # fmt: skip


def _stale_probes(session: ProbeSession, stale: dict[str, Measurement]) -> dict[str, list[str]]:
    """Probe id -> the stale parameters it measures (a probe is run for all of them at once)."""
    out: dict[str, list[str]] = {}
    for probe_id, fit in session.fits.items():
        keys = [key.key for key in fit.records.values() if key.key in stale]
        if keys:
            out[probe_id] = keys
    if NOISE_SIGMA.key in stale:
        out[NOISE_PROBE] = [NOISE_SIGMA.key]
    return out


def _priority(store: GraphStore, target: str, previous: str, version: str, stale: dict[str, Measurement],
              by_probe: dict[str, list[str]]) -> list[str]:  # fmt: skip
    by_id = consulted_counts(store, [m.id for m in stale.values()])
    consulted = {key: by_id.get(m.id, 0) for key, m in stale.items()}
    claimed = documented_values(store, target, [previous, version])
    # the vendor now states another value (or a first one): the parameter may well have moved; first where
    # that value is further from what was measured than a re-measurement confirms (a queued start-up the
    # 0.7.0 docs first state at about 90 cycles, measured 340 under 0.6.0, stayed stale behind two probes
    # whose docs had moved towards what was measured)
    redocumented = {p for p, by in claimed.items() if by.get(version) and by.get(version) != by.get(previous)}
    clock = documented_value(store, CLOCK_HZ.key, version)
    moved = {p for p in redocumented & set(stale) if _off(store, stale[p], version, clock) > CONFIRM_FLOOR}

    def rank(probe_id: str) -> tuple[int, int, int, float, str]:
        keys = by_probe[probe_id]
        cost = device_seconds_behind(store, [stale[key].id for key in keys])
        return (-int(any(k in moved for k in keys)), -int(any(k in redocumented for k in keys)),
                -sum(consulted.get(k, 0) for k in keys), cost, probe_id)  # fmt: skip

    # the noise is the spread of the jobs the other probes ran: first, it had none and failed, and its
    # stale measurement outlived every later upgrade
    return sorted(by_probe, key=lambda probe_id: (probe_id == NOISE_PROBE, rank(probe_id)))


def _off(store: GraphStore, measured: Measurement, version: str, clock: float | None) -> float:
    """How far the version's docs put a parameter from its measurement under the previous version: the
    nearest stated value's relative distance (0 where none converts to the measurement's unit)."""
    stated = [in_unit(float(c["value"]), c["unit"], measured.unit, clock)  # type: ignore[arg-type]
              for c in claims_about(store, measured.param, version) if c["value"] is not None]  # fmt: skip
    scale = abs(measured.value)
    return min((abs(v - measured.value) / scale for v in stated if v is not None and scale > 0), default=0.0)


def _given(store: GraphStore, target: str, previous: str, version: str) -> dict[str, float]:
    """What the fits may take as known: the new version's values, else the old version's."""
    return {**values_under(store, target, previous), **values_under(store, target, version)}


def _recheck(old: Measurement, new: Estimate, outcome: Literal["confirmed", "changed"]) -> Recheck:
    return Recheck(param=old.param, outcome=outcome, before=old.value, before_ci=(old.ci_low, old.ci_high),
                   after=new.value, after_ci=(new.low, new.high))  # fmt: skip


def _confirm(store: GraphStore, target: str, version: str, old: Measurement, new: Estimate, session: ProbeSession,
             activity: Activity) -> Recheck:  # fmt: skip
    runs = list(session.recorder.runs)
    check = Check(id=content_sha(f"{old.id}|{version}|{'|'.join(runs)}")[:32], method="measurement",
                  verdict="confirms", value=new.value, ci_low=new.low, ci_high=new.high,
                  detail=f"re-measured under {version}: {new.value:.6g} [{new.low:.6g}, {new.high:.6g}] against "
                         f"{old.value:.6g} [{old.ci_low:.6g}, {old.ci_high:.6g}]")  # fmt: skip
    confirm_measurement(store, old.id, check=check, run_ids=runs, activity=activity, target=target, version=version)
    return _recheck(old, new, "confirmed")


def judge_claims(store: GraphStore, target: str, version: str) -> int:
    """Judge the version's doc claims that no measurement under it has judged yet (claims of changed
    pages, or claims a confirmed measurement never saw) against the measurement that holds now."""
    clock = documented_value(store, CLOCK_HZ.key, version)
    links = []
    for row in unjudged_claims(store, target, version):
        claimed = in_unit(float(row["value"]), row["unit"], row["m_unit"], clock)  # type: ignore[arg-type]
        if claimed is None:
            continue
        estimate = Estimate(value=row["m_value"], low=row["low"], high=row["high"])  # type: ignore[arg-type]
        verdict = "CONFIRMS" if agrees(estimate, claimed, str(row["text"])) else "CONTRADICTS"
        links.append(Link(Ref("Measurement", str(row["measurement"])), verdict, Ref("Claim", str(row["claim"]))))
    link(store, links)
    return len(links)
