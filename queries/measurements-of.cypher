// name: measurements-of
// params: param:str
// description: Every measurement of one hardware parameter, oldest first, with how many runs back it.
// anchors: Measurement
MATCH (m:Measurement {param: $param})
OPTIONAL MATCH (m)-[:FROM]->(r:DeviceRun)
WITH m, count(r) AS runs
RETURN m.id AS measurement, m.value AS value, m.ci_low AS ci_low, m.ci_high AS ci_high, m.n AS n,
       m.unit AS unit, m.fit AS fit, m.status AS status, m.toolchain AS toolchain, runs
ORDER BY m.measured_at, measurement
