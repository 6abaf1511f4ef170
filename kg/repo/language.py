"""The DSL summary in the graph: LanguageEntry (one construct under one toolchain version), the
LanguageExample programs behind it and their compile and host Checks, with the links that make each
entry a fact with provenance: UNDER its toolchain, CITES the doc chunks, CHECKED_BY the checks of its
examples (each Check USED its example and is UNDER the version it ran under), CONSTRAINED_BY the
legality rules, STATES the doc claims about it, SUPERSEDES the entry of the version before when the
construct changed, CREATED_BY the summarising activity."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chiplore.kg.models import Activity, Check, LanguageEntry, LanguageExample, Toolchain
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.store import GraphStore


@dataclass(frozen=True)
class ExampleCheck:
    """A Check of one example under one version."""

    check: Check
    example: str  # LanguageExample id
    version: str


@dataclass
class EntryLinks:
    """What one entry is linked to, besides its toolchain and activity."""

    chunks: set[str] = field(default_factory=set)  # DocChunk shas it cites
    checks: set[str] = field(default_factory=set)  # Check ids of its examples under its version
    rules: set[str] = field(default_factory=set)  # LegalityRule ids that constrain it
    claims: set[str] = field(default_factory=set)  # Claim ids it states
    supersedes: str | None = None  # the previous version's entry, when the construct changed


def record_examples(store: GraphStore, examples: Sequence[LanguageExample], cites: Sequence[tuple[str, str]],
                    checks: Sequence[ExampleCheck], *, target: str, activity: Activity) -> None:  # fmt: skip
    """Examples (content-addressed: written once), the doc chunks they come from, and their checks."""
    upsert(store, [*examples, *(c.check for c in checks)])
    links = [Link(Ref("LanguageExample", example), "CITES", Ref("DocChunk", sha)) for example, sha in cites]
    for item in checks:
        ref = Ref.to(item.check)
        links += [Link(ref, "USED", Ref("LanguageExample", item.example)),
                  Link(ref, "UNDER", Ref("Toolchain", Toolchain.id_of(target, item.version))),
                  Link(ref, "CREATED_BY", Ref.to(activity))]  # fmt: skip
    link(store, links)


def record_entries(store: GraphStore, entries: Sequence[tuple[LanguageEntry, EntryLinks]], *, target: str,
                   activity: Activity) -> None:  # fmt: skip
    """Entries and their links; an entry written again is updated in place (MERGE by id), and the
    entry it supersedes becomes `superseded`."""
    upsert(store, [entry for entry, _ in entries])
    links: list[Link] = []
    for entry, found in entries:
        ref = Ref.to(entry)
        links += [Link(ref, "UNDER", Ref("Toolchain", Toolchain.id_of(target, entry.version))),
                  Link(ref, "CREATED_BY", Ref.to(activity))]  # fmt: skip
        links += [Link(ref, "CITES", Ref("DocChunk", sha)) for sha in sorted(found.chunks)]
        links += [Link(ref, "CHECKED_BY", Ref("Check", check)) for check in sorted(found.checks)]
        links += [Link(ref, "CONSTRAINED_BY", Ref("LegalityRule", rule)) for rule in sorted(found.rules)]
        links += [Link(ref, "STATES", Ref("Claim", claim)) for claim in sorted(found.claims)]
        if found.supersedes:
            links.append(Link(ref, "SUPERSEDES", Ref("LanguageEntry", found.supersedes)))
    link(store, links)
    superseded = sorted({found.supersedes for _, found in entries if found.supersedes})
    if superseded:
        store.write("UNWIND $ids AS id MATCH (e:LanguageEntry {id: id}) SET e.status = 'superseded'",
                    {"ids": superseded})  # fmt: skip


def entries_under(store: GraphStore, version: str) -> list[LanguageEntry]:
    """The summary's entries under a version, by construct name."""
    rows = store.read("MATCH (e:LanguageEntry {version: $v}) RETURN e AS node ORDER BY e.name", {"v": version})
    return [LanguageEntry.from_properties(row["node"]) for row in rows]


def entry_examples(store: GraphStore, version: str) -> dict[str, list[LanguageExample]]:
    """Each entry's doc and pack examples under a version (what an upgrade re-checks), by construct."""
    rows = store.read(
        "MATCH (e:LanguageEntry {version: $v}) MATCH (e)-[:CHECKED_BY]->(:Check)-[:USED]->(x:LanguageExample) "
        "WHERE x.origin IN ['doc', 'pack'] RETURN e.name AS name, x AS node ORDER BY name, x.id",
        {"v": version},
    )
    out: dict[str, list[LanguageExample]] = defaultdict(list)
    for row in rows:
        example = LanguageExample.from_properties(row["node"])
        if all(known.id != example.id for known in out[row["name"]]):
            out[row["name"]].append(example)
    return dict(out)


def previous_with_entries(store: GraphStore, target: str, version: str) -> str | None:
    """The latest version before `version` whose summary the graph holds (what its changes are against)."""
    rows = store.read(
        "MATCH (now:Toolchain {id: $t}) MATCH (t:Toolchain {target: now.target}) WHERE t.ordinal < now.ordinal "
        "AND (:LanguageEntry)-[:UNDER]->(t) RETURN t.version AS v ORDER BY t.ordinal DESC LIMIT 1",
        {"t": Toolchain.id_of(target, version)},
    )
    return str(rows[0]["v"]) if rows else None


def claims_under(store: GraphStore, version: str) -> list[dict[str, Any]]:
    """A version's doc claims with the compiler's verdict on each: id, text, and the diagnostic that
    contradicts it ("" when none does)."""
    return store.read(
        "MATCH (c:Claim)-[:UNDER]->(:Toolchain {version: $v}) "
        "OPTIONAL MATCH (d:Diagnostic)-[:CONTRADICTS]->(c) "
        "WITH c, collect(d.code + ': ' + d.message) AS refusals "
        "RETURN c.id AS id, c.text AS text, CASE WHEN size(refusals) = 0 THEN '' ELSE refusals[0] END AS refused "
        "ORDER BY id",
        {"v": version},
    )


def rules_under(store: GraphStore, version: str) -> list[dict[str, Any]]:
    """The legality rules in force under a version: id, key, code, predicate (JSON)."""
    return store.read(
        "MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $v}) WHERE r.status <> 'refuted' "
        "RETURN r.id AS id, r.key AS key, r.code AS code, r.predicate AS predicate ORDER BY id",
        {"v": version},
    )


def refresh_verdicts(store: GraphStore, version: str) -> int:
    """Entries of a version whose stated doc claims the compiler has since contradicted become
    `contradicted` (a rule learnt after the summary was written); how many changed."""
    rows = store.read(
        "MATCH (e:LanguageEntry {version: $v}) WHERE e.verdict <> 'contradicted' "
        "MATCH (e)-[:STATES]->(c:Claim)<-[:CONTRADICTS]-(d:Diagnostic) "
        "WITH e, collect([d.code, d.message, c.text]) AS why RETURN e.id AS id, why[0] AS why ORDER BY id",
        {"v": version},
    )
    if not rows:
        return 0
    # the reason is written whole from Python: FalkorDB's `+` cuts a string whose left side is 512 bytes
    changed = [
        {"id": row["id"], "why": f"{row['why'][0]}: {row['why'][1]} (the docs: {row['why'][2]})"} for row in rows
    ]
    done = store.write(
        "UNWIND $rows AS row MATCH (e:LanguageEntry {id: row.id}) WHERE e.verdict <> 'contradicted' "
        "SET e.verdict = 'contradicted', e.why = row.why RETURN count(e) AS n",
        {"rows": changed},
    )
    return int(done[0]["n"]) if done else 0


def summary_counts(store: GraphStore, version: str) -> dict[str, int]:
    """A version's summary in numbers: entries, contradicted entries, and examples compiled."""
    rows = store.read(
        "MATCH (e:LanguageEntry {version: $v}) "
        "RETURN count(e) AS entries, sum(CASE WHEN e.verdict = 'contradicted' THEN 1 ELSE 0 END) AS contradicted, "
        "sum(e.examples) AS examples",
        {"v": version},
    )
    row = rows[0] if rows else {}
    return {key: int(row.get(key) or 0) for key in ("entries", "contradicted", "examples")}
