// name: contradicted-claims
// params:
// description: Documented claims that the evidence contradicts: a measurement (with its value and interval) or a compiler diagnostic.
MATCH (e)-[:CONTRADICTS]->(c:Claim)
WHERE e:Measurement OR e:Diagnostic
RETURN c.id AS claim, c.text AS text, c.param AS param, c.value AS documented, c.unit AS unit,
       e.value AS measured, e.ci_low AS ci_low, e.ci_high AS ci_high, e.toolchain AS toolchain,
       coalesce(e.code, e.fit) AS evidence
ORDER BY param, claim, evidence
