// name: stale-facts
// params: limit:int=200
// description: Facts recorded under an old toolchain and not yet rechecked under the active one.
// anchors: Fact
MATCH (f:Fact)
WHERE f.status = 'stale'
RETURN f.fact_id AS fact, f.toolchain AS toolchain
ORDER BY fact
LIMIT $limit
