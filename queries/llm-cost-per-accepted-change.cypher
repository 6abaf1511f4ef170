// name: llm-cost-per-accepted-change
// params:
// description: The model calls behind each accepted design an LLM role proposed: tokens and cost estimate.
// anchors: DesignNode
// WITH DISTINCT makes the accepted designs the start (Neo4j inlines a bare WITH): one activity can
// have created most of the designs.
MATCH (d:DesignNode {status: 'accepted'})
WITH DISTINCT d
MATCH (d)-[:CREATED_BY]->(a:Activity {policy: 'llm'})
WHERE a.model IS NOT NULL
RETURN d.id AS design, d.kernel AS kernel, d.role AS role, d.change AS change, count(a) AS calls,
       sum(a.prompt_tokens) AS prompt_tokens, sum(a.completion_tokens) AS completion_tokens,
       sum(coalesce(a.cost_usd, 0.0)) AS cost_usd
ORDER BY kernel, design
