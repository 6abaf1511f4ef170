"""The devices' table of `optimize --workers N` and `status`: each device's jobs, device time and
utilisation in the last run with `--workers` above 1 (one device or many)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from chiplore.kg.repo.devices import DeviceUsage


def devices_table(devices: Sequence[DeviceUsage]) -> Table:
    """One row per device; utilisation is the share of the run's calendar a job of the run held it."""
    noun = "device" if len(devices) == 1 else "devices"
    table = Table(title=f"{len(devices)} {noun} of the last run with --workers above 1")
    for column in ("device", "kind", "jobs", "failed", "device-s", "held-s", "clock-s", "utilisation"):
        table.add_column(column, justify="left" if column in ("device", "kind") else "right")
    for d in devices:
        table.add_row(d.device, d.kind, str(d.jobs), str(d.failed_jobs), f"{d.device_s:,.0f}", f"{d.held_s:,.0f}",
                      f"{d.clock_s:,.0f}", f"{d.utilisation:.0%}")  # fmt: skip
    return table
