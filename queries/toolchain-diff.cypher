// name: toolchain-diff
// params: from:str, to:str
// description: What changed between two toolchain versions: rules (confirmed/changed/retired/new) and measurements.
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(t:Toolchain)
WHERE t.version IN [$from, $to]
WITH r.key AS key,
     collect(CASE WHEN t.version = $from THEN r.predicate END) AS before,
     collect(CASE WHEN t.version = $to THEN r.predicate END) AS after
RETURN 'rule' AS kind, key,
       CASE WHEN size(before) = 0 THEN 'new'
            WHEN size(after) = 0 THEN 'retired'
            WHEN before[0] = after[0] THEN 'confirmed'
            ELSE 'changed' END AS change,
       before[0] AS before, after[0] AS after, null AS before_ci, null AS after_ci
ORDER BY key
UNION ALL
MATCH (m:Measurement)-[:UNDER]->(t:Toolchain)
WHERE t.version IN [$from, $to] AND m.status <> 'refuted'
WITH m.param AS key, t.version AS version, m
ORDER BY m.measured_at DESC
WITH key,
     collect(CASE WHEN version = $from THEN m END) AS before,
     collect(CASE WHEN version = $to THEN m END) AS after
RETURN 'measurement' AS kind, key,
       CASE WHEN size(before) = 0 THEN 'new'
            WHEN size(after) = 0 THEN 'unmeasured'
            WHEN before[0].id = after[0].id THEN 'confirmed'
            WHEN after[0].ci_low <= before[0].value AND before[0].value <= after[0].ci_high THEN 'confirmed'
            ELSE 'changed' END AS change,
       before[0].value AS before, after[0].value AS after,
       CASE WHEN size(before) = 0 THEN null ELSE [before[0].ci_low, before[0].ci_high] END AS before_ci,
       CASE WHEN size(after) = 0 THEN null ELSE [after[0].ci_low, after[0].ci_high] END AS after_ci
ORDER BY key
