// name: dsl-summary
// params: toolchain:str, construct:str=
// description: The checked summary of the language under a toolchain version: per construct its syntax, meaning, availability (and what to write instead), verdict with why, the shortest example that compiles as stated, the rules that constrain it, the docs' claims about it the evidence contradicts, an LLM librarian's statements with whether their examples held, and how it changed since the version before.
// anchors: LanguageEntry
// One entry per construct and version, found by the indexed version; construct= narrows it to one.
// Each OPTIONAL MATCH is collapsed (ORDER BY, then collect) before the next, so rows never multiply.
MATCH (e:LanguageEntry {version: $toolchain})
WHERE $construct = '' OR e.name = $construct
OPTIONAL MATCH (e)-[:CHECKED_BY]->(:Check {method: 'compile', verdict: 'confirms'})-[:USED]->(x:LanguageExample)
WHERE x.expects = '' AND x.origin <> 'llm'
WITH e, x ORDER BY size(x.source), x.id
WITH e, collect(x.source) AS shown
OPTIONAL MATCH (e)-[:CONSTRAINED_BY]->(r:LegalityRule)
WITH e, shown, r ORDER BY r.code, r.key, r.id
WITH e, shown, collect(r.code + ' ' + r.key + ': ' + r.description) AS constraints
OPTIONAL MATCH (e)-[:STATES]->(c:Claim)<-[:CONTRADICTS]-(evidence)
WHERE evidence:Measurement OR evidence:Diagnostic
WITH e, shown, constraints, c ORDER BY c.id
WITH e, shown, constraints, collect(DISTINCT c.text) AS contradicted_claims
OPTIONAL MATCH (e)-[:CHECKED_BY]->(k:Check {method: 'compile'})-[:USED]->(l:LanguageExample {origin: 'llm'})
WITH e, shown, constraints, contradicted_claims, l, k ORDER BY l.id
WITH e, shown, constraints, contradicted_claims,
     collect(CASE WHEN l IS NULL THEN null
                  ELSE {text: l.statement, kept: k.verdict = 'confirms', example: l.source} END) AS statements
RETURN e.name AS construct, e.kind AS kind, e.syntax AS syntax, e.availability AS availability, e.instead AS instead,
       e.verdict AS verdict, e.why AS why, e.meaning AS meaning, e.policy AS written_by, e.examples AS examples,
       CASE WHEN size(shown) = 0 THEN null ELSE shown[0] END AS example, constraints, contradicted_claims,
       statements, e.change AS change, e.change_detail AS change_detail, e.fact_id AS fact
ORDER BY kind, construct
