"""Evidence about designs: screenings, device runs, and the judge's comparisons."""

from __future__ import annotations

from collections.abc import Sequence

from kg.models import Activity, Comparison, DeviceRun, Screening
from kg.repo.nodes import Link, Ref, link, upsert
from kg.store import GraphStore


def record_screening(store: GraphStore, screening: Screening, *, activity: Activity) -> Screening:
    upsert(store, [screening])
    ref = Ref.to(screening)
    link(
        store,
        [
            Link(ref, "OF", Ref("DesignNode", screening.design)),
            Link(ref, "CREATED_BY", Ref.to(activity)),
        ],
    )
    return screening


def record_device_run(store: GraphStore, run: DeviceRun, *, kernel_version: str, activity: Activity) -> DeviceRun:
    upsert(store, [run])
    ref = Ref.to(run)
    link(
        store,
        [
            Link(ref, "RAN", Ref("KernelVersion", kernel_version)),
            Link(ref, "CREATED_BY", Ref.to(activity)),
        ],
    )
    return run


def record_comparison(
    store: GraphStore,
    comparison: Comparison,
    *,
    candidate: str,
    incumbent: str,
    run_ids: Sequence[str],
    activity: Activity,
) -> Comparison:
    upsert(store, [comparison])
    ref = Ref.to(comparison)
    links = [
        Link(ref, "CANDIDATE", Ref("DesignNode", candidate)),
        Link(ref, "INCUMBENT", Ref("DesignNode", incumbent)),
        Link(ref, "CREATED_BY", Ref.to(activity)),
    ]
    links += [Link(ref, "USED", Ref("DeviceRun", run)) for run in run_ids]
    link(store, links)
    return comparison
