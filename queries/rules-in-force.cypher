// name: rules-in-force
// params: toolchain:str
// description: Legality rules that hold under a toolchain version (not superseded or refuted).
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $toolchain})
WHERE NOT r.status IN ['superseded', 'refuted']
RETURN r.key AS key, r.code AS code, r.predicate AS predicate, r.description AS description,
       r.status AS status, r.id AS rule
ORDER BY code, key, rule
