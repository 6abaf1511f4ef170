"""Units a document states values in, and their conversion to a measurement's unit: sizes, rates per
second and times (the last two through the documented clock)."""

from __future__ import annotations

BYTES = {"B": 1.0, "KB": 1024.0, "KiB": 1024.0, "MB": 1024.0**2, "MiB": 1024.0**2, "GB": 1024.0**3}
PER_SECOND = {"B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12}  # vendors' rates are decimal
TIME = {"cycles": None, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def in_unit(value: float, unit: str | None, wanted: str, clock_hz: float | None) -> float | None:
    """A claimed value in the measurement's unit (sizes, rates and times in the usual units); rates
    per second and times need the documented clock. None when the two units do not convert."""
    if unit in (None, wanted):
        return value
    if unit in BYTES and wanted in BYTES:
        return value * BYTES[unit] / BYTES[wanted]
    if unit in PER_SECOND and wanted == "B/cycle":
        return value * PER_SECOND[unit] / clock_hz if clock_hz else None
    if unit in TIME and wanted == "cycles" and TIME[unit] is not None:
        return value * TIME[unit] * clock_hz if clock_hz else None  # type: ignore[operator]
    return None


def converts_by_clock(unit: str, wanted: str) -> bool:
    """Whether a value stated in `unit` reaches `wanted` only through the chip's clock."""
    return in_unit(1.0, unit, wanted, None) is None and in_unit(1.0, unit, wanted, 1.0) is not None
