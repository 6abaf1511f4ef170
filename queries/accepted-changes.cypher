// name: accepted-changes
// params: kernel:str
// description: Accepted designs of a kernel with the comparison that accepted each (ratio, interval, p).
// anchors: DesignNode
MATCH (d:DesignNode {kernel: $kernel})
WHERE d.status = 'accepted'
OPTIONAL MATCH (c:Comparison)-[:CANDIDATE]->(d)
WHERE c.decision = 'accept'
RETURN d.id AS design, d.depth AS depth, d.change AS change, d.rationale AS rationale,
       c.ratio AS ratio, c.ci_low AS ci_low, c.ci_high AS ci_high, c.p_value AS p_value,
       c.pairs AS pairs
ORDER BY depth, design
