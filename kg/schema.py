"""The graph schema (docs/graph.md): node keys, hot-lookup indexes, versioned migrations."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.errors import StoreError
from chiplore.kg.store import GraphStore

log = logging.getLogger(__name__)

# Every label and the property that identifies its nodes (unique, indexed).
NODE_KEYS: dict[str, str] = {
    "Target": "name",
    "Toolchain": "id",
    "DocPage": "id",
    "DocChunk": "sha",
    "Concept": "key",
    "Claim": "id",
    "Check": "id",
    "HardwareParam": "key",
    "Measurement": "id",
    "ProbeProgram": "sha",
    "Diagnostic": "id",
    "LegalityRule": "id",
    "Kernel": "name",
    "DesignNode": "id",
    "KernelVersion": "sha",
    "Screening": "id",
    "DeviceRun": "id",
    # Device time charged per consumer (a kernel, or the microbenchmarks): kept with the runs.
    "DeviceLedger": "consumer",
    "Comparison": "id",
    "Activity": "id",
    "Upgrade": "id",
    "Revalidation": "id",
    "Prediction": "id",
    "Device": "id",
    # How one run (`optimize --workers N`) used each device: `<activity>|<device>`.
    "DeviceUse": "id",
    # The DSL summary: one entry per construct and toolchain version, and the programs that show it.
    "LanguageEntry": "id",
    "LanguageExample": "id",
    "SchemaVersion": "name",
}

# Facts a design can consult carry a second label, Fact, with a graph-wide id "<Label>:<key>",
# so "which designs relied on X?" is one index lookup whatever kind of fact X is.
FACT_LABEL = "Fact"
FACT_KEY = "fact_id"
FACT_LABELS = ("Concept", "Claim", "HardwareParam", "Measurement", "LegalityRule", "DocChunk", "LanguageEntry")

# Properties the loop and the named queries filter on.
INDEXES: tuple[tuple[str, str], ...] = (
    ("Toolchain", "version"),
    ("Toolchain", "status"),
    ("DocPage", "version"),
    ("Fact", "status"),
    ("Claim", "status"),
    ("Claim", "param"),
    ("Measurement", "param"),
    ("Measurement", "status"),
    ("LegalityRule", "key"),
    ("LegalityRule", "status"),
    ("DesignNode", "kernel"),
    ("DesignNode", "status"),
    ("KernelVersion", "kernel"),
    ("Screening", "design"),
    ("DeviceRun", "kernel"),
    ("DeviceRun", "status"),
    ("Comparison", "kernel"),
    ("Activity", "role"),
    ("Revalidation", "kernel"),
)

SCHEMA_NAME = "chiplore"


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[GraphStore], None]


def _base_schema(store: GraphStore) -> None:
    for label, key in NODE_KEYS.items():
        store.ensure_unique(label, key)
    store.ensure_unique(FACT_LABEL, FACT_KEY)
    for label, prop in INDEXES:
        store.ensure_index(label, prop)


def _upgrade_schema(store: GraphStore) -> None:
    store.ensure_unique("Upgrade", "id")
    store.ensure_unique("Revalidation", "id")
    store.ensure_index("Revalidation", "kernel")


def _anchor_indexes(store: GraphStore) -> None:
    for label, prop in ANCHOR_INDEXES:
        store.ensure_index(label, prop)


# Added so that the named queries start from an index seek (the plan tests hold them to it).
ANCHOR_INDEXES: tuple[tuple[str, str], ...] = (
    ("Activity", "policy"),  # llm-usage: every model call is an Activity
    ("Revalidation", "to_version"),  # toolchain-diff's kernels
)

# The DSL summary's entries: read per version (the dsl-summary query, the prompts) and per construct.
LANGUAGE_INDEXES: tuple[tuple[str, str], ...] = (("LanguageEntry", "version"), ("LanguageEntry", "name"))


def _language_summary(store: GraphStore) -> None:
    for label in ("LanguageEntry", "LanguageExample"):
        store.ensure_unique(label, NODE_KEYS[label])
    for label, prop in LANGUAGE_INDEXES:
        store.ensure_index(label, prop)


def _predictions(store: GraphStore) -> None:
    store.ensure_unique("Prediction", NODE_KEYS["Prediction"])
    store.ensure_index("Prediction", "kernel")


def _devices(store: GraphStore) -> None:
    store.ensure_unique("Device", NODE_KEYS["Device"])


def _device_use(store: GraphStore) -> None:
    store.ensure_unique("DeviceUse", NODE_KEYS["DeviceUse"])


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "unique keys on every label, the Fact id, and hot-lookup indexes", _base_schema),
    Migration(2, "toolchain upgrades and kernel re-validations", _upgrade_schema),
    Migration(3, "indexes the named queries start from (Activity.policy, Revalidation.to_version)", _anchor_indexes),
    Migration(4, "the DSL summary: keys of LanguageEntry and LanguageExample, entries by version", _language_summary),
    Migration(5, "the cost model's predictions, by kernel (a killed search is not priced again)", _predictions),
    Migration(6, "the devices that ran the jobs (DeviceRun -[:ON]-> Device)", _devices),
    Migration(7, "each run's use of each device (DeviceUse), a schema label graph files carry", _device_use),
)
LATEST_VERSION = MIGRATIONS[-1].version


class SchemaReport(BaseModel):
    version_before: int
    version_after: int
    applied: list[str]


def schema_version(store: GraphStore) -> int:
    rows = store.read("MATCH (s:SchemaVersion {name: $name}) RETURN s.version AS version", {"name": SCHEMA_NAME})
    return int(rows[0]["version"]) if rows else 0


def ensure_schema(store: GraphStore) -> SchemaReport:
    """Apply the migrations the graph has not seen yet, in order; a no-op when it is current."""
    before = schema_version(store)
    if before > LATEST_VERSION:
        raise StoreError(
            f"the graph's schema is version {before}, newer than this chiplore knows ({LATEST_VERSION}); "
            "upgrade chiplore"
        )
    applied: list[str] = []
    for migration in MIGRATIONS:
        if migration.version <= before:
            continue
        log.info("applying schema migration %d: %s", migration.version, migration.description)
        migration.apply(store)
        store.write(
            "MERGE (s:SchemaVersion {name: $name}) SET s.version = $version, s.applied_at = $now",
            {"name": SCHEMA_NAME, "version": migration.version, "now": utc_now()},
        )
        applied.append(f"{migration.version}: {migration.description}")
    if applied:
        store.compact()
    return SchemaReport(version_before=before, version_after=max(before, LATEST_VERSION), applied=applied)


def fact_id(label: str, key: str) -> str:
    """The graph-wide id of a fact node."""
    if label not in FACT_LABELS:
        raise ValueError(f"{label} is not a kind of fact")
    return f"{label}:{key}"
