"""The one exception hierarchy of chiplore; the CLI turns each into one red line."""

from __future__ import annotations


class ChiploreError(Exception):
    """Base of every error chiplore raises on purpose."""


class ConfigError(ChiploreError):
    """Settings are missing or contradictory."""


class StoreError(ChiploreError):
    """The graph store failed."""


class StoreUnavailable(StoreError):
    """The database cannot be reached (down, wrong address, crashed server)."""


class StoreAuthError(StoreError):
    """The database refused the credentials."""


class StoreBusy(StoreError):
    """Another process holds the embedded store in a way this one cannot attach to."""


class QueryError(ChiploreError):
    """A Cypher query is malformed, failed, or timed out."""


class WriteRefused(QueryError):
    """A write was attempted on a read-only path."""


class UnknownQuery(QueryError):
    """No named query has that name."""


class QueryParameterError(QueryError):
    """A named query was called with a missing, unknown or ill-typed parameter."""


class OutputError(ChiploreError):
    """A file chiplore was asked to write could not be written (a full disk, a read-only folder)."""


class TargetError(ChiploreError):
    """The target (compiler, device, docs) failed."""


class KernelStop(ChiploreError):
    """What ends one kernel's optimization while the others go on: its budget, its baseline, the devices."""


class BudgetExhausted(KernelStop):
    """The device-time budget is spent."""


class Terminated(SystemExit):
    """The process was told to stop (SIGTERM): not an error of whatever code was running then, a
    kernel pack's reference included, so nothing that reports a pack's own exceptions catches it."""
