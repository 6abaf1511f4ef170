"""Doc pages, chunks and claims as the librarian's ingestion reads them back."""

from __future__ import annotations

from collections.abc import Sequence

from chiplore.kg.store import GraphStore


def page_hashes(store: GraphStore, version: str) -> dict[str, str]:
    """DocPage id -> the hash of the text it was ingested with, for one toolchain version."""
    rows = store.read("MATCH (p:DocPage {version: $version}) RETURN p.id AS id, p.sha AS sha", {"version": version})
    return {row["id"]: row["sha"] for row in rows}


def known_chunks(store: GraphStore, shas: Sequence[str]) -> int:
    """How many of these chunks (by content hash) the graph already holds."""
    rows = store.read("MATCH (c:DocChunk) WHERE c.sha IN $shas RETURN count(c) AS n", {"shas": sorted(set(shas))})
    return int(rows[0]["n"]) if rows else 0


def existing_claims(store: GraphStore, ids: Sequence[str]) -> set[str]:
    """The claim ids of these that the graph already holds."""
    if not ids:
        return set()
    rows = store.read("MATCH (c:Claim) WHERE c.id IN $ids RETURN c.id AS id", {"ids": sorted(set(ids))})
    return {row["id"] for row in rows}


def revive_claim(store: GraphStore, claim_id: str) -> None:
    """A claim a newer version states again is current again (it was stale)."""
    store.write("MATCH (c:Claim {id: $id}) WHERE c.status = 'stale' SET c.status = 'current'", {"id": claim_id})


def search_chunks(store: GraphStore, version: str, terms: Sequence[str], limit: int) -> list[dict[str, object]]:
    """Paragraphs of a version's pages that contain every term (lower case): page, chunk, text."""
    return store.read(
        "MATCH (p:DocPage {version: $v})-[:HAS_CHUNK]->(c:DocChunk) "
        "WHERE all(t IN $terms WHERE toLower(c.text) CONTAINS t) "
        "RETURN DISTINCT p.path AS page, c.sha AS chunk, c.text AS text ORDER BY page, chunk LIMIT $n",
        {"v": version, "terms": list(terms), "n": limit},
    )


def claims_with_verdicts(store: GraphStore, version: str, limit: int) -> list[dict[str, object]]:
    """A version's claims that state a parameter, each with the graph's verdict on it
    (CONTRADICTED, confirmed or unchecked), contradicted first."""
    return store.read(
        "MATCH (c:Claim)-[:UNDER]->(:Toolchain {version: $v}) WHERE c.param IS NOT NULL "
        "OPTIONAL MATCH (e)-[r:CONFIRMS|CONTRADICTS]->(c) "
        "WITH c, collect(DISTINCT type(r)) AS verdicts "
        "RETURN c.text AS text, c.fact_id AS f, CASE WHEN 'CONTRADICTS' IN verdicts THEN 'CONTRADICTED' "
        "WHEN 'CONFIRMS' IN verdicts THEN 'confirmed' ELSE 'unchecked' END AS verdict ORDER BY verdict, f LIMIT $n",
        {"v": version, "n": limit},
    )
