"""Re-measuring under a new toolchain (DESIGN.md 6): the stale measurements of the old version are
measured again, within a device budget, in the order that matters most:

1. parameters the new version's docs state another value for (or a first one): the vendor says
   something moved;
2. then the parameters the designs consulted most (CONSULTED links);
3. then the cheapest (the device time the old sweep took).

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
from chiplore.core.target import Target
from ingest.fits import FITS, Bench, Estimate
from ingest.measure import (
    NOISE,
    PARAMS,
    ProbeRecorder,
    agrees,
    clock_hz,
    in_unit,
    record_estimate,
    record_noise,
    run_probe,
    sample_noise,
)
from kg.models import Activity, Check, Measurement, Toolchain
from kg.repo.knowledge import confirm_measurement, supersede
from kg.repo.nodes import Link, Ref, link
from kg.store import GraphStore

CONFIRM_Z = 3.0  # standard errors of the difference of the two estimates
# Sweeps on different days differ by more than one sweep's bootstrap interval (the device drifts
# between sessions; re-measuring every parameter on other device seeds moved unchanged ones by up to
# 7.4 %): a fitted value that moved less than this confirms. Exact values (searches of the
# compiler's limits) have no interval, and any move is a change.
CONFIRM_FLOOR = 0.10
Z95 = 1.96
COST_MARGIN = 1.15  # a sweep again costs what it did, give or take a retried job
NOISE_PROBE = "noise"


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
    probes_failed: list[str]
    rechecks: list[Recheck]
    claims_judged: int
    device_s: float


def consistent(old: Measurement, new: Estimate) -> bool:
    """Whether a re-measurement agrees with the measurement it re-checks."""
    se = math.hypot((old.ci_high - old.ci_low) / (2 * Z95), (new.high - new.low) / (2 * Z95))
    if se == 0:
        return new.value == old.value
    return abs(new.value - old.value) <= max(CONFIRM_Z * se, CONFIRM_FLOOR * abs(old.value))


def stale_measurements(store: GraphStore, target: str, previous: str) -> dict[str, Measurement]:
    """The latest stale measurement of each parameter that `previous` (or, for what an earlier
    upgrade's budget left unchecked, a version before it) holds."""
    rows = store.read(
        "MATCH (old:Toolchain {id: $old}) MATCH (m:Measurement {status: 'stale'})-[:UNDER]->(t:Toolchain) "
        "WHERE t.target = old.target AND t.ordinal <= old.ordinal "
        "RETURN m AS node ORDER BY t.ordinal, m.measured_at, m.id",
        {"old": Toolchain.id_of(target, previous)},
    )
    return {m.param: m for m in (Measurement.from_properties(row["node"]) for row in rows)}


def remeasure(store: GraphStore, target: Target, previous: str, version: str, *, budget_s: float,
              activity: Activity, spent_s: float = 0.0, free_only: bool = False, repeats_scale: float = 0.25,
              rounds: int = 2, on_probe: Callable[[str, float], None] | None = None) -> RemeasureSummary:  # fmt: skip
    """Re-measure `previous`'s stale measurements under `version` until `budget_s` (which counts
    `spent_s`, the device time this upgrade already spent) is used up; with `free_only`, only the
    probes that cost no device time (the compiler's limits). Idempotent: what an earlier call
    confirmed or superseded is no longer stale."""
    stale = stale_measurements(store, target.name, previous)
    by_probe = _stale_probes(stale)
    order = _priority(store, target.name, previous, version, stale, by_probe)
    probes = {p.id: p for p in target.microbenchmarks()}
    recorder = ProbeRecorder(store, version, activity, spent_s=spent_s)
    bench = Bench(target, on_result=recorder)
    given = _given(store, target.name, previous, version)
    run, skipped, failed, rechecks = [], [], [], []
    for probe_id in order:
        cost = _cost(store, [stale[key].id for key in by_probe[probe_id]])
        if free_only and cost > 0:
            continue
        if recorder.spent + COST_MARGIN * cost > budget_s:
            skipped.append(probe_id)
            continue
        before = recorder.spent
        if probe_id == NOISE_PROBE:
            spread = sample_noise(version, recorder, bench, probes)
            if spread is None:
                failed.append(probe_id)
                continue
            old = stale[NOISE[0]]
            if consistent(old, spread):
                rechecks.append(_confirm(store, target.name, version, old, spread, recorder, activity))
            else:
                supersede(store, "Measurement", record_noise(store, target.name, version, spread, recorder).id, old.id)
                rechecks.append(_recheck(old, spread, "changed"))
        else:
            spec, probe = FITS[probe_id], probes.get(probe_id.split("/")[0])
            found = run_probe(recorder, spec, probe, version, bench, given, repeats_scale, rounds) if probe else None
            if found is None or probe is None:
                failed.append(probe_id)
                continue
            given |= {name: e.value for name, e in found.items()}
            estimates = {PARAMS[name][0]: e for name, e in found.items() if name in PARAMS}
            for key, estimate in estimates.items():
                old = stale.get(key)
                if old is not None and consistent(old, estimate):
                    rechecks.append(_confirm(store, target.name, version, old, estimate, recorder, activity))
                    continue
                name = next(n for n in spec.params if PARAMS.get(n, ("",))[0] == key)
                new, _, _ = record_estimate(store, target.name, version, probe, spec.probe, name, estimate,
                                            list(recorder.runs), activity)  # fmt: skip
                if old is not None:
                    supersede(store, "Measurement", new.id, old.id)
                    rechecks.append(_recheck(old, estimate, "changed"))
        run.append(probe_id)
        if on_probe is not None:
            on_probe(probe_id, recorder.spent - before)
    judged = judge_claims(store, target.name, version)
    return RemeasureSummary(previous=previous, version=version, order=order, probes_run=run, probes_skipped=skipped,
                            probes_failed=failed, rechecks=rechecks, claims_judged=judged,
                            device_s=recorder.spent - spent_s)  # fmt: skip


class RecheckState(BaseModel):
    """Where the re-checking of `previous`'s measurements stands, over every run of the upgrade."""

    confirmed: list[str]  # parameters whose old measurement holds under the new version too
    changed: list[Recheck]
    stale: list[str]  # not re-measured yet: the old value serves


def recheck_state(store: GraphStore, target: str, previous: str, version: str) -> RecheckState:
    params = {"old": Toolchain.id_of(target, previous), "new": Toolchain.id_of(target, version)}
    confirmed = store.read(  # carried over from an earlier version
        "MATCH (new:Toolchain {id: $new}) MATCH (m:Measurement)-[:UNDER]->(new) "
        "MATCH (m)-[:UNDER]->(t:Toolchain) WHERE t.target = new.target AND t.ordinal < new.ordinal "
        "RETURN DISTINCT m.param AS param ORDER BY param",
        params,
    )
    changed = store.read(
        "MATCH (n:Measurement)-[:UNDER]->(:Toolchain {id: $new}) MATCH (n)-[:SUPERSEDES]->(o:Measurement) "
        "RETURN n AS new, o AS old ORDER BY n.param",
        params,
    )
    pairs = [(Measurement.from_properties(r["old"]), Measurement.from_properties(r["new"])) for r in changed]
    return RecheckState(
        confirmed=[r["param"] for r in confirmed],
        changed=[_recheck(old, Estimate(value=new.value, low=new.ci_low, high=new.ci_high), "changed")
                 for old, new in pairs],
        stale=sorted(stale_measurements(store, target, previous)),
    )  # fmt: skip


def _stale_probes(stale: dict[str, Measurement]) -> dict[str, list[str]]:
    """Probe id -> the stale parameters it measures (a probe is run for all of them at once)."""
    out: dict[str, list[str]] = {}
    for probe_id, spec in FITS.items():
        keys = [PARAMS[name][0] for name in spec.params if name in PARAMS and PARAMS[name][0] in stale]
        if keys:
            out[probe_id] = keys
    if NOISE[0] in stale:
        out[NOISE_PROBE] = [NOISE[0]]
    return out


def _priority(store: GraphStore, target: str, previous: str, version: str, stale: dict[str, Measurement],
              by_probe: dict[str, list[str]]) -> list[str]:  # fmt: skip
    ids = {m.id: key for key, m in stale.items()}
    consulted: dict[str, int] = {}
    for row in store.read(
        "MATCH (:DesignNode)-[:CONSULTED]->(m:Measurement) WHERE m.id IN $ids RETURN m.id AS id, count(*) AS n",
        {"ids": sorted(ids)},
    ):
        consulted[ids[row["id"]]] = int(row["n"])
    claimed: dict[str, dict[str, set[float]]] = {}
    for row in store.read(
        "MATCH (c:Claim)-[:UNDER]->(t:Toolchain) WHERE t.id IN [$old, $new] AND c.value IS NOT NULL "
        "AND c.param IS NOT NULL RETURN c.param AS param, t.id AS t, c.value AS value",
        {"new": Toolchain.id_of(target, version), "old": Toolchain.id_of(target, previous)},
    ):
        claimed.setdefault(row["param"], {}).setdefault(row["t"], set()).add(float(row["value"]))
    # the vendor now states another value (or a first one): the parameter may well have moved
    old, new = Toolchain.id_of(target, previous), Toolchain.id_of(target, version)
    redocumented = {p for p, by in claimed.items() if by.get(new) and by.get(new) != by.get(old)}

    def rank(probe_id: str) -> tuple[int, int, float, str]:
        keys = by_probe[probe_id]
        cost = _cost(store, [stale[key].id for key in keys])
        return (-int(any(k in redocumented for k in keys)), -sum(consulted.get(k, 0) for k in keys), cost, probe_id)

    return sorted(by_probe, key=rank)


def _cost(store: GraphStore, measurement_ids: list[str]) -> float:
    """The device time the runs behind these measurements took (what measuring them again costs)."""
    rows = store.read(
        "MATCH (m:Measurement)-[:FROM]->(r:DeviceRun) WHERE m.id IN $ids WITH DISTINCT r RETURN sum(r.device_s) AS s",
        {"ids": measurement_ids},
    )
    return float(rows[0]["s"] or 0.0) if rows else 0.0


def _given(store: GraphStore, target: str, previous: str, version: str) -> dict[str, float]:
    """What the fits may take as known: the new version's values, else the old version's."""
    names = {key: name for name, (key, _) in PARAMS.items()}
    out: dict[str, float] = {}
    for toolchain in (previous, version):  # the new version's values win
        for row in store.read(
            "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {id: $t}) WHERE m.status <> 'refuted' "
            "RETURN m.param AS param, m.value AS value ORDER BY m.measured_at, m.id",
            {"t": Toolchain.id_of(target, toolchain)},
        ):
            if row["param"] in names:
                out[names[row["param"]]] = float(row["value"])
    return out


def _recheck(old: Measurement, new: Estimate, outcome: Literal["confirmed", "changed"]) -> Recheck:
    return Recheck(param=old.param, outcome=outcome, before=old.value, before_ci=(old.ci_low, old.ci_high),
                   after=new.value, after_ci=(new.low, new.high))  # fmt: skip


def _confirm(store: GraphStore, target: str, version: str, old: Measurement, new: Estimate, recorder: ProbeRecorder,
             activity: Activity) -> Recheck:  # fmt: skip
    runs = list(recorder.runs)
    check = Check(id=content_sha(f"{old.id}|{version}|{'|'.join(runs)}")[:32], method="measurement",
                  verdict="confirms",
                  detail=f"re-measured under {version}: {new.value:.6g} [{new.low:.6g}, {new.high:.6g}] against "
                         f"{old.value:.6g} [{old.ci_low:.6g}, {old.ci_high:.6g}]")  # fmt: skip
    confirm_measurement(store, old.id, check=check, run_ids=runs, activity=activity, target=target, version=version)
    return _recheck(old, new, "confirmed")


def judge_claims(store: GraphStore, target: str, version: str) -> int:
    """Judge the version's doc claims that no measurement under it has judged yet (claims of changed
    pages, or claims a confirmed measurement never saw) against the measurement that holds now."""
    toolchain = Toolchain.id_of(target, version)
    rows = store.read(
        "MATCH (c:Claim)-[:UNDER]->(:Toolchain {id: $t}) WHERE c.param IS NOT NULL AND c.value IS NOT NULL "
        "MATCH (m:Measurement {param: c.param})-[:UNDER]->(:Toolchain {id: $t}) WHERE m.status = 'current' "
        "AND NOT (m)-[:CONFIRMS|CONTRADICTS]->(c) "
        "RETURN c.id AS claim, c.value AS value, c.unit AS unit, c.text AS text, m.id AS measurement, "
        "m.value AS m_value, m.ci_low AS low, m.ci_high AS high, m.unit AS m_unit ORDER BY claim, measurement",
        {"t": toolchain},
    )
    clock = clock_hz(store, version)
    links = []
    for row in rows:
        claimed = in_unit(float(row["value"]), row["unit"], row["m_unit"], clock)
        if claimed is None:
            continue
        estimate = Estimate(value=row["m_value"], low=row["low"], high=row["high"])
        verdict = "CONFIRMS" if agrees(estimate, claimed, row["text"]) else "CONTRADICTS"
        links.append(Link(Ref("Measurement", row["measurement"]), verdict, Ref("Claim", row["claim"])))
    link(store, links)
    return len(links)
