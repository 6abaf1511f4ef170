// name: rules-in-force
// params: toolchain:str
// description: Legality rules that hold under a toolchain version (HOLDS_UNDER it, not refuted).
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $toolchain})
WHERE r.status <> 'refuted'
RETURN r.key AS key, r.code AS code, r.predicate AS predicate, r.description AS description,
       r.status AS status, r.id AS rule
ORDER BY code, key, rule
