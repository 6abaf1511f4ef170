// name: llm-usage
// params:
// description: Model calls of the LLM roles: calls, failed calls, tokens, latency and cost estimate per role and model.
// anchors: Activity
MATCH (a:Activity {policy: 'llm'})
WHERE a.model IS NOT NULL
RETURN a.role AS role, a.model AS model, count(a) AS calls,
       sum(CASE WHEN a.outcome = 'ok' THEN 0 ELSE 1 END) AS failed_calls,
       sum(a.prompt_tokens) AS prompt_tokens, sum(a.completion_tokens) AS completion_tokens,
       sum(coalesce(a.latency_s, 0.0)) AS latency_s, sum(coalesce(a.cost_usd, 0.0)) AS cost_usd
ORDER BY role, model
