"""How a run used its devices (`optimize --workers N`): per device, the jobs it served, the device
seconds they were charged, how long one of the run's jobs was on it (queued behind other tenants or
running) and its clock at the end of its last job. `chiplore status` shows the last run's."""

from __future__ import annotations

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.kg.store import GraphStore


class DeviceUsage(BaseModel):
    """One device in one run: `utilisation` is the share of the run's calendar (its longest device
    clock) that the device held one of the run's jobs; the rest it stood idle, waiting for work."""

    activity: str
    device: str
    kind: str
    jobs: int
    failed_jobs: int
    device_s: float
    held_s: float
    clock_s: float
    utilisation: float


def record_device_job(store: GraphStore, *, activity: str, device: str, kind: str, device_s: float, held_s: float,
                      clock_s: float, failed: bool) -> None:  # fmt: skip
    """Add one served job to a device's use in a run (one statement, after the job's DeviceRun)."""
    store.write(
        "MATCH (a:Activity {id: $activity}) MERGE (u:DeviceUse {id: $id}) "
        "ON CREATE SET u.activity = $activity, u.device = $device, u.kind = $kind, u.jobs = 0, u.failed_jobs = 0, "
        "u.device_s = 0.0, u.held_s = 0.0, u.clock_s = 0.0 "
        "MERGE (u)-[:CREATED_BY]->(a) "
        "SET u.jobs = u.jobs + 1, u.failed_jobs = u.failed_jobs + $failed, u.device_s = u.device_s + $device_s, "
        "u.held_s = u.held_s + $held_s, u.clock_s = CASE WHEN $clock_s > u.clock_s THEN $clock_s ELSE u.clock_s END, "
        "u.updated_at = $now",
        {"activity": activity, "id": f"{activity}|{device}", "device": device, "kind": kind,
         "failed": int(failed), "device_s": device_s, "held_s": held_s, "clock_s": clock_s,
         "now": utc_now()},
    )  # fmt: skip


def device_usage(store: GraphStore, activity: str | None = None) -> list[DeviceUsage]:
    """Each device's use in one run (the last run that used devices, when `activity` is None)."""
    if activity is None:
        last = store.read("MATCH (u:DeviceUse) RETURN u.activity AS activity ORDER BY u.updated_at DESC LIMIT 1")
        if not last:
            return []
        activity = str(last[0]["activity"])
    rows = store.read(
        "MATCH (u:DeviceUse {activity: $activity}) RETURN u.device AS device, u.kind AS kind, u.jobs AS jobs, "
        "u.failed_jobs AS failed_jobs, u.device_s AS device_s, u.held_s AS held_s, u.clock_s AS clock_s "
        "ORDER BY device",
        {"activity": activity},
    )
    calendar = max((float(row["clock_s"]) for row in rows), default=0.0)
    return [
        DeviceUsage(activity=activity, device=row["device"], kind=row["kind"], jobs=row["jobs"],
                    failed_jobs=row["failed_jobs"], device_s=row["device_s"], held_s=row["held_s"],
                    clock_s=row["clock_s"], utilisation=min(float(row["held_s"]) / calendar, 1.0) if calendar else 0.0)
        for row in rows
    ]  # fmt: skip
