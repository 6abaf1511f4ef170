// name: designs-consulting
// params: fact:str, limit:int=200
// description: Designs whose proposal relied on a fact (its fact id, e.g. Measurement:<id>).
// anchors: Fact
MATCH (:Fact {fact_id: $fact})<-[:CONSULTED]-(d:DesignNode)
RETURN d.id AS design, d.kernel AS kernel, d.status AS status, d.depth AS depth, d.change AS change
ORDER BY kernel, design
LIMIT $limit
