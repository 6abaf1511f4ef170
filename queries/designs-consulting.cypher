// name: designs-consulting
// params: fact:str, limit:int=200
// description: Designs whose proposal relied on a fact (its fact id, e.g. Measurement:<id>).
// anchors: Fact
// Ordered and cut before the columns are read: a fact can be consulted by most designs of a kernel.
MATCH (:Fact {fact_id: $fact})<-[:CONSULTED]-(d:DesignNode)
WITH d ORDER BY d.kernel, d.id LIMIT $limit
RETURN d.id AS design, d.kernel AS kernel, d.status AS status, d.depth AS depth, d.change AS change
