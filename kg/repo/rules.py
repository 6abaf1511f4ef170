"""Legality rules across toolchain versions: finding the rule a probe taught before, the rule diff
of an upgrade, superseding and retiring rules."""

from __future__ import annotations

from pydantic import BaseModel

from chiplore.kg.models import Toolchain
from chiplore.kg.store import GraphStore


def same_rule(store: GraphStore, target: str, key: str, code: str, predicate: str) -> str | None:
    """The id of a rule of this target with the same key, code and predicate (under any version)."""
    rows = store.read(
        "MATCH (r:LegalityRule {key: $key, code: $code, predicate: $body})"
        "-[:HOLDS_UNDER]->(:Toolchain {target: $t}) RETURN r.id AS id ORDER BY r.id LIMIT 1",
        {"key": key, "code": code, "body": predicate, "t": target},
    )
    return str(rows[0]["id"]) if rows else None


def supersede_changed_rules(store: GraphStore, target: str, previous: str, version: str) -> int:
    """Link each rule new under `version` to the rule of the same probe under `previous` it replaces
    (SUPERSEDES; the old one becomes `superseded`). Idempotent."""
    rows = store.write(
        "MATCH (n:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) "
        "WHERE NOT (n)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
        "MATCH (o:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
        "WHERE NOT (o)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) AND "
        "CASE WHEN coalesce(o.probe, '') = '' THEN o.key ELSE o.probe END = "
        "CASE WHEN coalesce(n.probe, '') = '' THEN n.key ELSE n.probe END AND NOT (n)-[:SUPERSEDES]->(o) "
        "MERGE (n)-[:SUPERSEDES]->(o) SET o.status = 'superseded' RETURN count(*) AS n",
        _versions(target, previous, version),
    )
    return int(rows[0]["n"]) if rows else 0


def retire_unreplaced_rules(store: GraphStore, target: str, previous: str, version: str) -> int:
    """Rules of `previous` that no probe finds under `version` and nothing supersedes become `retired`."""
    rows = store.write(
        "MATCH (o:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
        "WHERE NOT (o)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) AND NOT ()-[:SUPERSEDES]->(o) "
        "AND o.status <> 'retired' SET o.status = 'retired' RETURN count(*) AS n",
        _versions(target, previous, version),
    )
    return int(rows[0]["n"]) if rows else 0


class RuleDiff(BaseModel):
    confirmed: int
    changed: int
    retired: int
    new: int


def rule_diff(store: GraphStore, target: str, previous: str, version: str) -> RuleDiff:
    """How many rules an upgrade from `previous` to `version` confirmed, changed, retired and found new."""
    params = _versions(target, previous, version)

    def count(query: str) -> int:
        return int(store.read(query, params)[0]["n"])

    return RuleDiff(
        confirmed=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                        "MATCH (r)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) RETURN count(DISTINCT r) AS n"),
        changed=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) "
                      "MATCH (r)-[:SUPERSEDES]->(o:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                      "RETURN count(DISTINCT r) AS n"),
        retired=count("MATCH (r:LegalityRule {status: 'retired'})-[:HOLDS_UNDER]->(:Toolchain {id: $old}) "
                      "WHERE NOT (r)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) RETURN count(DISTINCT r) AS n"),
        new=count("MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {id: $new}) "
                  "WHERE NOT (r)-[:HOLDS_UNDER]->(:Toolchain {id: $old}) AND NOT (r)-[:SUPERSEDES]->(:LegalityRule) "
                  "RETURN count(DISTINCT r) AS n"),
    )  # fmt: skip


def _versions(target: str, previous: str, version: str) -> dict[str, str]:
    return {"old": Toolchain.id_of(target, previous), "new": Toolchain.id_of(target, version)}
