// name: measurements-of
// params: param:str
// description: Every measurement of one hardware parameter, oldest first: how many device runs its fit used (0 for a value the compiler's probes found, which runs nothing) and the later versions whose re-measurement agreed with it (toolchain-diff gives what each found).
// anchors: Measurement
MATCH (m:Measurement {param: $param})
OPTIONAL MATCH (m)-[:FROM]->(r:DeviceRun)
WITH m, count(r) AS runs
OPTIONAL MATCH (m)-[:CHECKED_BY]->(:Check {method: 'measurement'})-[:UNDER]->(t:Toolchain)
WITH m, runs, t ORDER BY t.ordinal
WITH m, runs, collect(DISTINCT t.version) AS confirmed_under
RETURN m.id AS measurement, m.value AS value, m.ci_low AS ci_low, m.ci_high AS ci_high, m.n AS n,
       m.unit AS unit, m.fit AS fit, m.status AS status, m.toolchain AS toolchain, runs, confirmed_under
ORDER BY m.measured_at, measurement
