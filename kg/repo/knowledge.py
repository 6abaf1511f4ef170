"""What the loop learns: activities, claims, measurements and legality rules, with provenance."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from chiplore.core.clock import utc_now
from chiplore.kg.models import (
    Activity,
    Check,
    Claim,
    Concept,
    Diagnostic,
    HardwareParam,
    LegalityRule,
    Measurement,
    ProbeProgram,
    Toolchain,
)
from chiplore.kg.processes import owner_runs, this_process
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.schema import NODE_KEYS
from chiplore.kg.store import GraphStore


def record_activity(store: GraphStore, activity: Activity) -> Activity:
    """Write an activity; one under way (`running`) names the process it runs in, so that a later run
    can tell it from one whose process is gone (`close_orphaned_activities`)."""
    if activity.outcome == RUNNING and activity.owner is None:
        activity = activity.model_copy(update={"owner": this_process()})
    upsert(store, [activity])
    return activity


def renew_activity(store: GraphStore, activity_id: str, until: str) -> None:
    """Extend a running activity's lease to `until` (its run's heartbeat; a finished one keeps its end)."""
    store.write("MATCH (a:Activity {id: $id, outcome: $running}) SET a.lease_until = $until",
                {"id": activity_id, "running": RUNNING, "until": until})  # fmt: skip


def _provenance(node: Ref, activity: Activity, target: str, toolchain: str) -> list[Link]:
    return [
        Link(node, "CREATED_BY", Ref.to(activity)),
        Link(node, "UNDER", Ref("Toolchain", Toolchain.id_of(target, toolchain))),
    ]


def record_claim(
    store: GraphStore,
    claim: Claim,
    *,
    concept: Concept,
    chunk_shas: Sequence[str],
    activity: Activity,
    target: str,
) -> Claim:
    """A documented statement about a concept, citing the doc chunks it came from."""
    upsert(store, [concept, claim])
    ref = Ref.to(claim)
    links = [Link(ref, "ABOUT", Ref.to(concept))]
    links += [Link(ref, "CITES", Ref("DocChunk", sha)) for sha in chunk_shas]
    links += _provenance(ref, activity, target, claim.toolchain)
    link(store, links)
    return claim


def record_measurement(
    store: GraphStore,
    measurement: Measurement,
    *,
    param: HardwareParam,
    run_ids: Sequence[str],
    activity: Activity,
    target: str,
    confirms: Sequence[str] = (),
    contradicts: Sequence[str] = (),
) -> Measurement:
    """A fitted hardware parameter, linked to the device runs it came from and the claims it judges."""
    if measurement.param != param.key:
        raise ValueError(f"measurement of {measurement.param!r} linked to parameter {param.key!r}")
    upsert(store, [param, measurement])
    ref = Ref.to(measurement)
    links = [Link(ref, "OF", Ref.to(param))]
    links += [Link(ref, "FROM", Ref("DeviceRun", run)) for run in run_ids]
    links += [Link(ref, "CONFIRMS", Ref("Claim", claim)) for claim in confirms]
    links += [Link(ref, "CONTRADICTS", Ref("Claim", claim)) for claim in contradicts]
    links += _provenance(ref, activity, target, measurement.toolchain)
    link(store, links)
    return measurement


def record_rule(
    store: GraphStore,
    rule: LegalityRule,
    *,
    diagnostic: Diagnostic,
    probe: ProbeProgram,
    activity: Activity,
    target: str,
    supersedes: str | None = None,
) -> LegalityRule:
    """A legality rule derived from the diagnostic a probe program drew from the compiler."""
    upsert(store, [probe, diagnostic, rule])
    ref = Ref.to(rule)
    toolchain = Ref("Toolchain", Toolchain.id_of(target, rule.toolchain))
    links = [
        Link(ref, "DERIVED_FROM", Ref.to(diagnostic)),
        Link(Ref.to(diagnostic), "EMITTED_FOR", Ref.to(probe)),
        Link(ref, "HOLDS_UNDER", toolchain),
        Link(ref, "CREATED_BY", Ref.to(activity)),
    ]
    if supersedes is not None:
        links.append(Link(ref, "SUPERSEDES", Ref("LegalityRule", supersedes)))
    link(store, links)
    return rule


def confirm_rule(store: GraphStore, rule_id: str, *, diagnostic: Diagnostic, probe: ProbeProgram, target: str,
                 version: str, slot: str) -> None:  # fmt: skip
    """A rule already known holds under `version` too: link it there, with the diagnostic that says so."""
    upsert(store, [probe, diagnostic])
    rule = Ref("LegalityRule", rule_id)
    link(store, [
        Link(rule, "DERIVED_FROM", Ref.to(diagnostic)),
        Link(Ref.to(diagnostic), "EMITTED_FOR", Ref.to(probe)),
        Link(rule, "HOLDS_UNDER", Ref("Toolchain", Toolchain.id_of(target, version))),
    ])  # fmt: skip
    store.write(
        "MATCH (r:LegalityRule {id: $id}) "
        "SET r.status = CASE WHEN r.status = 'stale' THEN 'current' ELSE r.status END, "
        "r.probe = CASE WHEN coalesce(r.probe, '') = '' THEN $slot ELSE r.probe END",
        {"id": rule_id, "slot": slot},
    )


def measurements_of(store: GraphStore, param: str) -> list[Measurement]:
    rows = store.read(
        "MATCH (m:Measurement {param: $param}) RETURN m AS node ORDER BY m.measured_at, m.id",
        {"param": param},
    )
    return [Measurement.from_properties(row["node"]) for row in rows]


def confirm_measurement(store: GraphStore, measurement_id: str, *, check: Check, run_ids: Sequence[str],
                        activity: Activity, target: str, version: str) -> None:  # fmt: skip
    """A re-measurement under `version` agrees with a measurement: no twin is written; the measurement
    holds under `version` too (UNDER), and the check with its runs says why."""
    upsert(store, [check])
    ref, under = Ref("Measurement", measurement_id), Ref("Toolchain", Toolchain.id_of(target, version))
    links = [
        Link(ref, "UNDER", under),
        Link(Ref.to(check), "UNDER", under),
        Link(ref, "CHECKED_BY", Ref.to(check)),
        Link(Ref.to(check), "CREATED_BY", Ref.to(activity)),
    ]
    links += [Link(Ref.to(check), "USED", Ref("DeviceRun", run)) for run in run_ids]
    link(store, links)  # fmt: skip
    store.write("MATCH (m:Measurement {id: $id}) WHERE m.status = 'stale' SET m.status = 'current'",
                {"id": measurement_id})  # fmt: skip


def supersede(store: GraphStore, label: str, new_key: str, old_key: str) -> None:
    """`new` replaces `old` (a re-measurement outside the old interval, a changed rule)."""
    link(store, [Link(Ref(label, new_key), "SUPERSEDES", Ref(label, old_key))])
    if label not in ("Measurement", "LegalityRule", "Claim"):
        raise ValueError(f"{label} facts are not superseded")
    store.write(f"MATCH (n:{label} {{{NODE_KEYS[label]}: $key}}) SET n.status = 'superseded'", {"key": old_key})


def learnt_counts(store: GraphStore, version: str) -> dict[str, int]:
    """What the graph holds under a version: claims, claims the evidence contradicts (a measurement
    or a diagnostic), parameters measured, rules in force."""

    def count(query: str) -> int:
        return int(store.read(query, {"v": version})[0]["n"])

    return {
        "claims": count("MATCH (c:Claim)-[:UNDER]->(:Toolchain {version: $v}) RETURN count(DISTINCT c) AS n"),
        "contradicted_claims": count(
            "MATCH (e)-[:CONTRADICTS]->(c:Claim)-[:UNDER]->(:Toolchain {version: $v}) "
            "WHERE e:Measurement OR e:Diagnostic RETURN count(DISTINCT c) AS n"
        ),
        "measured_params": count(
            "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $v}) RETURN count(DISTINCT m.param) AS n"
        ),
        "rules_in_force": count(
            "MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $v}) RETURN count(DISTINCT r) AS n"
        ),
    }


RUNNING = "running"  # the outcome of an activity under way (one killed outright keeps it, with no end)


def ended_by(error: BaseException) -> str:
    """The outcome of an activity an exception ended: Ctrl-C or a signal interrupted it; an error stopped it."""
    if not isinstance(error, Exception):
        return f"interrupted ({type(error).__name__})"
    return f"stopped: {type(error).__name__}: {' '.join(str(error).split())[:300]}"


@contextmanager
def ended_if_raised(store: GraphStore, activity_id: str) -> Iterator[None]:
    """Work of an activity: an exception that ends it (Ctrl-C, a signal, an error) ends the activity with
    `ended_by` before it goes on, so a run's record stays `running` only after a kill -9."""
    try:
        yield
    except BaseException as error:
        with contextlib.suppress(Exception):  # the store may be what failed
            finish_activity(store, activity_id, utc_now(), ended_by(error))
        raise


ORPHANED = "interrupted (its process ended without a word: killed, or its store went away)"


def close_orphaned_activities(store: GraphStore) -> int:
    """Mark `running` activities whose process (on this machine) has ended: a kill -9, or a store that
    went away before the run could say how it ended. Another machine's are left (nothing here can tell).
    Their `ended_at` stays unset: when they ended is not known."""
    rows = store.read("MATCH (a:Activity {outcome: $running}) WHERE a.owner IS NOT NULL RETURN a.id AS id, "
                      "a.owner AS owner", {"running": RUNNING})  # fmt: skip
    gone = [row["id"] for row in rows if not owner_runs(row["owner"])]
    if gone:
        store.write("MATCH (a:Activity) WHERE a.id IN $ids AND a.outcome = $running SET a.outcome = $why",
                    {"ids": gone, "running": RUNNING, "why": ORPHANED})  # fmt: skip
    return len(gone)


def finish_activity(store: GraphStore, activity_id: str, ended_at: str, outcome: str) -> None:
    """An activity ended, with what it came to."""
    store.write(
        "MATCH (a:Activity {id: $id}) SET a.ended_at = $now, a.outcome = $outcome",
        {"id": activity_id, "now": ended_at, "outcome": outcome},
    )


def activity_ended(store: GraphStore, activity_id: str) -> bool:
    """Whether an activity was recorded as ended (a finished step of a resumable workflow)."""
    rows = store.read("MATCH (a:Activity {id: $id}) RETURN a.ended_at AS e", {"id": activity_id})
    return bool(rows and rows[0]["e"])


def existing_fact_ids(store: GraphStore, ids: list[str]) -> list[str]:
    """Those of these fact ids the graph holds (ids a model made up are not)."""
    rows = store.read(
        "MATCH (f:Fact) WHERE f.fact_id IN $ids RETURN f.fact_id AS f ORDER BY f", {"ids": sorted(set(ids))}
    )
    return [row["f"] for row in rows]
