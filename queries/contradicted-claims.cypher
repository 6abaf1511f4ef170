// name: contradicted-claims
// params:
// description: Documented claims that a measurement contradicts, with the measured value and interval.
MATCH (m:Measurement)-[:CONTRADICTS]->(c:Claim)
RETURN c.id AS claim, c.text AS text, c.param AS param, c.value AS documented, c.unit AS unit,
       m.value AS measured, m.ci_low AS ci_low, m.ci_high AS ci_high, m.toolchain AS toolchain
ORDER BY param, claim, m.id
