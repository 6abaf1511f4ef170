// name: rules-in-force
// params: toolchain:str
// description: Legality rules that hold under a toolchain version (HOLDS_UNDER it, not refuted).
// anchors: Toolchain
// WITH DISTINCT starts from the toolchain, not from every rule (Neo4j inlines a bare WITH).
MATCH (t:Toolchain {version: $toolchain})
WITH DISTINCT t
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(t)
WHERE r.status <> 'refuted'
// in the words of this version's compiler: a rule confirmed under a later version kept the first one's
// description ("not available in toolchain 0.6.0" read under 0.7.0)
OPTIONAL MATCH (r)-[:DERIVED_FROM]->(d:Diagnostic {toolchain: $toolchain})
WITH r, collect(d.message) AS said
RETURN r.key AS key, r.code AS code, r.predicate AS predicate,
       CASE WHEN size(said) > 0 THEN said[0] ELSE r.description END AS description,
       r.status AS status, r.id AS rule
ORDER BY code, key, rule
