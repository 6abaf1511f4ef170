"""A toolchain version's docs into the graph: pages -> chunks -> concepts and claims.

Ids are content hashes, so ingesting the same docs again creates nothing, and a paragraph two
versions share is one chunk whose claims hold under both. A page is marked ingested (its DocPage
node with its hash) only after its chunks and claims are written: a run cut short redoes that page
and nothing else.
"""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from chiplore.core.clock import utc_now
from chiplore.core.ids import content_sha
from chiplore.core.target import DocPage as TargetPage
from chiplore.core.target import Target
from chiplore.ingest.chunks import Chunk, chunk_page
from chiplore.ingest.librarian import ExtractedClaim, Librarian, constructs
from chiplore.kg.models import Activity, Claim, Concept, DocChunk, DocPage, Toolchain
from chiplore.kg.repo.docs import existing_claims, known_chunks, page_hashes, revive_claim
from chiplore.kg.repo.knowledge import RUNNING, ended_if_raised, finish_activity, record_activity, record_claim
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.store import GraphStore


class DocsSummary(BaseModel):
    version: str
    pages: int  # pages ingested by this run
    unchanged: int  # pages already in the graph with the same text
    chunks: int  # chunks this run wrote (new or shared with another version)
    reused_chunks: int = 0  # of those, already in the graph from another version (same text, same chunk)
    claims: int  # claims this run found, new or already known from another version
    concepts: int


def page_id(target: str, version: str, path: str) -> str:
    return f"{target}@{version}/{path}"


def claim_id(chunk: Chunk, claim: ExtractedClaim) -> str:
    """The same sentence in the same paragraph states the same claim, whatever the version."""
    return content_sha(f"{chunk.sha}|{claim.param}|{claim.text}")[:32]


def ingest_docs(store: GraphStore, target: Target, version: str, librarian: Librarian,
                ) -> DocsSummary:  # fmt: skip
    """Ingest the version's pages that the graph does not hold yet (or holds with other text)."""
    pages = target.docs(version)
    known = page_hashes(store, version)
    todo = [p for p in pages if known.get(page_id(target.name, version, p.path)) != content_sha(p.text)]
    summary = DocsSummary(version=version, pages=len(todo), unchanged=len(pages) - len(todo), chunks=0, claims=0,
                          concepts=0)  # fmt: skip
    if not todo:
        return summary
    activity = record_activity(store, Activity(id=f"librarian-{uuid.uuid4().hex[:12]}", role="librarian",
                                               policy=librarian.policy, outcome=RUNNING))  # fmt: skip
    with ended_if_raised(store, activity.id):  # Ctrl-C: it reads interrupted, not `ok` with no end
        return _ingest_pages(store, target, version, librarian, todo, summary, activity)


def _ingest_pages(store: GraphStore, target: Target, version: str, librarian: Librarian, todo: list[TargetPage],
                  summary: DocsSummary, activity: Activity) -> DocsSummary:  # fmt: skip
    shas = sorted({chunk.sha for page in todo for chunk in chunk_page(page.text)})
    reused = known_chunks(store, shas)
    chunks = 0
    claims: set[str] = set()  # one sentence of one paragraph on two pages is one claim (it counted twice)
    concepts: set[str] = set()
    for page in todo:
        written = _ingest_page(store, target.name, version, page, librarian, activity)
        chunks += written[0]
        claims |= written[1]
        concepts |= written[2]
    finish_activity(store, activity.id, utc_now(), f"{len(todo)} page(s) read")
    return summary.model_copy(update={"chunks": chunks, "reused_chunks": int(reused), "claims": len(claims),
                                      "concepts": len(concepts)})  # fmt: skip


def _ingest_page(store: GraphStore, target: str, version: str, page: TargetPage, librarian: Librarian,
                 activity: Activity) -> tuple[int, set[str], set[str]]:  # fmt: skip
    toolchain = Ref("Toolchain", Toolchain.id_of(target, version))
    node = DocPage(id=page_id(target, version, page.path), version=version, path=page.path, sha="", title=page.title)
    chunks = chunk_page(page.text)
    upsert(store, [node, *(DocChunk(sha=c.sha, text=c.text, ord=c.ord) for c in chunks)])
    page_ref = Ref.to(node)
    links = [Link(page_ref, "UNDER", toolchain), Link(page_ref, "CREATED_BY", Ref.to(activity))]
    links += [Link(page_ref, "HAS_CHUNK", Ref("DocChunk", c.sha), {"ord": c.ord}) for c in chunks]
    mentioned: dict[str, list[str]] = {}
    for chunk in chunks:
        for key in constructs(chunk.text):
            mentioned.setdefault(key, []).append(chunk.sha)
    upsert(store, [Concept(key=key, kind="construct") for key in mentioned])
    links += [Link(Ref("Concept", key), "MENTIONED_IN", Ref("DocChunk", sha)) for key, shas in mentioned.items()
              for sha in shas]  # fmt: skip
    link(store, links)
    found = librarian.extract_page(chunks, page.title)
    existing = existing_claims(store, [claim_id(chunk, claim) for chunk, claim in found])
    for chunk, claim in found:
        identifier = claim_id(chunk, claim)
        if identifier in existing:  # the same paragraph in an earlier version: it holds here too
            link(store, [Link(Ref("Claim", identifier), "UNDER", toolchain)])
            revive_claim(store, identifier)
            continue
        record_claim(
            store,
            Claim(
                id=identifier, text=claim.text, param=claim.param, value=claim.value, unit=claim.unit, toolchain=version
            ),
            concept=Concept(key=claim.concept, kind="parameter" if claim.param else "topic"),
            chunk_shas=[chunk.sha],
            activity=activity,
            target=target,
        )
    # Last: the page's hash marks it done, so an interrupted run redoes this page and no other.
    upsert(store, [node.model_copy(update={"sha": content_sha(page.text)})])
    ids = {claim_id(chunk, claim) for chunk, claim in found}
    return len(chunks), ids, set(mentioned) | {claim.concept for _, claim in found}
