// name: rules-in-force
// params: toolchain:str
// description: Legality rules that hold under a toolchain version (HOLDS_UNDER it, not refuted).
// anchors: Toolchain
// WITH DISTINCT starts from the toolchain, not from every rule (Neo4j inlines a bare WITH).
MATCH (t:Toolchain {version: $toolchain})
WITH DISTINCT t
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(t)
WHERE r.status <> 'refuted'
RETURN r.key AS key, r.code AS code, r.predicate AS predicate, r.description AS description,
       r.status AS status, r.id AS rule
ORDER BY code, key, rule
