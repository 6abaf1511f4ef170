"""The demo workflow, chiplore's main job end to end: learn the chip under the graph's toolchain,
optimize every kernel, upgrade to the newest toolchain, optimize again, and gather the results.

Resumable: a finished optimize round is marked in the graph (an ended Activity) and not repeated,
and every step below it is idempotent, so a rerun after Ctrl-C or a kill continues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.kg.models import Activity
from chiplore.kg.repo.knowledge import activity_ended, record_activity
from chiplore.kg.repo.progress import geomean
from chiplore.kg.repo.reporting import accepted_changes
from chiplore.kg.repo.upgrades import upgrade_to
from chiplore.session import Session

Step = Callable[[str], Callable[[str], None]]  # start a step with a title -> a way to note its progress


class DemoResult(BaseModel):
    kernels: list[dict[str, Any]]  # what `status --json` says of each kernel, and its accepted changes
    geomean_speedup: float | None


def run_demo(session: Session, config: Mapping[str, Any] | None = None, *, step: Step | None = None) -> DemoResult:
    """Learn, optimize, upgrade to the newest toolchain, optimize again; the results of every kernel.
    `config`: OptimizeConfig's fields for each optimize round (`budget_s`, `seed`, `patience`, ...).
    A rerun after an interruption continues where the last one stopped."""
    step = step or (lambda title: lambda note: None)
    version = session.toolchain()
    upgrade = upgrade_to(session.store, session.target.name, version)
    if upgrade is not None and _done(session, upgrade.from_version):
        # a rerun after this demo learnt and optimized under the toolchain its upgrade then left: it goes on
        # from there (an upgrade by hand, before any demo round, leaves the active toolchain to learn)
        version = upgrade.from_version
        step(f"learn {session.target.name} {version}")("done in an earlier run")
    else:
        note = step(f"learn {session.target.name} {version}")
        learnt = session.learn(toolchain=version, on_probe=lambda probe, s: note(f"{probe} ({s:.0f} device-s)"))
        note(f"{learnt.claims} claims, {learnt.rules_in_force} rules, {learnt.measured_params} parameters")
    newest = session.target.toolchains()[-1]
    for round_version in dict.fromkeys([version, newest]):
        _round(session, round_version, step, dict(config or {}))
    return results(session)


def results(session: Session) -> DemoResult:
    """Each kernel's standing and accepted changes, and the geomean speedup over the baselines."""
    rows = [{**k.model_dump(), "accepted_changes": accepted_changes(session.store, k.kernel)}
            for k in session.status()]  # fmt: skip
    speedups = [r["speedup_vs_baseline"] for r in rows if r["speedup_vs_baseline"]]
    mean = geomean(speedups) if rows and len(speedups) == len(rows) else None
    return DemoResult(kernels=rows, geomean_speedup=mean)


def _round(session: Session, version: str, step: Step, config: dict[str, Any]) -> None:
    """Upgrade to `version` when it is not the active toolchain (or when an upgrade to it was interrupted
    before this round ran), then optimize under it (once)."""
    versions, active = session.target.toolchains(), session.active_toolchain()
    ahead = active not in versions or versions.index(version) > versions.index(active)
    # an upgrade left open once its round ran (kernels its budget did not reach) is the user's to finish
    # with more --budget: rerunning it on every demo would repeat it and leave the same kernels pending
    if ahead or (version == active and not _done(session, version) and _unfinished(session, version)):
        note = step(f"toolchain upgrade to {version}")
        done = session.upgrade(version, on_event=note)
        repaired = sum(k.outcome == "repaired" for k in done.kernels)
        note(f"{done.rules.changed} rules and {len(done.measurements.changed)} measurements changed, "
             f"{repaired} programs repaired")  # fmt: skip
    note = step(f"optimize under {version}")
    if _done(session, version):
        note("done in an earlier run")
        return
    summary = session.optimize(toolchain=version, on_event=lambda kernel, message: note(f"{kernel}: {message}"),
                               **config)  # fmt: skip
    record_activity(session.store, Activity(id=_round_id(version), role="demo", policy="builtin", ended_at=utc_now()))
    note(f"{summary.proposals} proposals, {summary.accepted} accepted, {summary.device_s:.0f} device-s")


def _unfinished(session: Session, version: str) -> bool:
    """Whether an upgrade to `version` began and did not finish (Ctrl-C or a kill during it): the active
    toolchain is already `version`, but its kernels are not re-validated yet."""
    upgrade = upgrade_to(session.store, session.target.name, version)
    return upgrade is not None and upgrade.status != "done"


def _round_id(version: str) -> str:
    return f"demo-optimize-{version}"


def _done(session: Session, version: str) -> bool:
    return activity_ended(session.store, _round_id(version))
