// name: stale-facts
// params: limit:int=200
// description: Facts recorded under an old toolchain that nothing under the active one has confirmed or replaced yet, with what each is about.
// anchors: Fact
MATCH (f:Fact)
WHERE f.status = 'stale'
RETURN f.fact_id AS fact, coalesce(f.param, f.key, f.name, f.text) AS about, f.toolchain AS toolchain
ORDER BY fact
LIMIT $limit
