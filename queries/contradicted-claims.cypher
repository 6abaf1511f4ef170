// name: contradicted-claims
// params:
// description: Documented claims that the evidence contradicts: a measurement (with its value, its unit, which may not be the docs', and interval) or a compiler diagnostic; with the page and the docs' version that state the claim.
// anchors: Claim
// Every claim has one of the fact statuses (kg.models.FactStatus): the IN list is the index-backed way
// to start from all claims, where a bare MATCH (c:Claim) would scan the label. WITH DISTINCT keeps the
// planners from starting at the CONTRADICTS relationships instead (Neo4j inlines a bare WITH).
MATCH (c:Claim)
WHERE c.status IN ['current', 'stale', 'refuted', 'superseded', 'retired']
WITH DISTINCT c
MATCH (e)-[:CONTRADICTS]->(c)
WHERE e:Measurement OR e:Diagnostic
// the page of the claim's own version that states it (one sentence on two pages is two claims)
OPTIONAL MATCH (c)-[:CITES]->(:DocChunk)<-[:HAS_CHUNK]-(p:DocPage)
WHERE p.version = c.toolchain
WITH c, e, min(p.path) AS page
RETURN c.id AS claim, c.text AS text, c.param AS param, c.value AS documented, c.unit AS unit,
       e.value AS measured, e.unit AS measured_unit, e.ci_low AS ci_low, e.ci_high AS ci_high, e.toolchain AS toolchain,
       coalesce(e.code, e.fit) AS evidence, page, c.toolchain AS claimed_under
ORDER BY param, claim, evidence, toolchain, measured
