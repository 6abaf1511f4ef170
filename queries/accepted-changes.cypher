// name: accepted-changes
// params: kernel:str
// description: Accepted designs of a kernel, each with its role (baseline, architect, refiner), and the comparison that accepted it (method, ratio, interval, p; none for a root or an upgrade's repair).
// anchors: DesignNode
MATCH (d:DesignNode {kernel: $kernel})
WHERE d.status = 'accepted'
OPTIONAL MATCH (c:Comparison)-[:CANDIDATE]->(d)
WHERE c.decision = 'accept'
RETURN d.id AS design, d.depth AS depth, d.role AS role, d.change AS change, d.rationale AS rationale,
       c.method AS method, c.ratio AS ratio, c.ci_low AS ci_low, c.ci_high AS ci_high, c.p_value AS p_value,
       c.pairs AS pairs
ORDER BY depth, design
