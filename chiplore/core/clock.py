"""The one time representation in the graph: ISO-8601 UTC strings with a Z, made in Python.

FalkorDB has no datetime(); strings in this form also sort chronologically on both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return to_iso(datetime.now(UTC))


def to_iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware one")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
