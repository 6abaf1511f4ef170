// name: toolchain-diff
// params: from:str, to:str
// description: What changed from one toolchain version to another: rules (confirmed/changed/retired/new), measurements (confirmed/changed/stale/new, with intervals; a confirmed one's after is its re-measurement, which agreed with it), doc claims (new/dropped, and their verdict), kernels (survived/repaired/broken, cycles before and after), language constructs (added/removed/renamed/deprecated/changed, with their standing before and after).
// anchors: Toolchain, Revalidation, LanguageEntry
// Each branch starts from a toolchain by its indexed version, and finds the other one through their target
// (a version the graph does not have gives no rows, not every fact 'dropped'; nor does a `from` that is not older
// than `to`: FalkorDB matched one version against itself; nor a `from` the graph learnt nothing under, whose
// diff read as every fact 'new'); WITH DISTINCT keeps the planners from
// starting at the facts' labels instead (Neo4j inlines a bare WITH). A claim is new or dropped by its text: the same
// sentence in a paragraph that changed around it is another claim node, and one sentence in two paragraphs is one row.
MATCH (old:Toolchain {version: $from})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(later:Toolchain {version: $to})
WHERE old.ordinal < later.ordinal AND (old)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT old
MATCH (r:LegalityRule)-[:HOLDS_UNDER]->(old)
MATCH (r)-[:HOLDS_UNDER]->(:Toolchain {version: $to})
RETURN 'rule' AS kind, r.key AS key, 'confirmed' AS change, r.code + ' ' + r.predicate AS before,
       r.code + ' ' + r.predicate AS after, null AS before_ci, null AS after_ci, r.description AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (new:Toolchain {version: $to})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(earlier:Toolchain {version: $from})
WHERE earlier.ordinal < new.ordinal AND (earlier)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT new
MATCH (n:LegalityRule)-[:HOLDS_UNDER]->(new)
MATCH (n)-[:SUPERSEDES]->(o:LegalityRule)-[:HOLDS_UNDER]->(:Toolchain {version: $from})
WHERE NOT (n)-[:HOLDS_UNDER]->(:Toolchain {version: $from})
RETURN 'rule' AS kind, n.key AS key, 'changed' AS change, o.code + ' ' + o.predicate AS before,
       n.code + ' ' + n.predicate AS after, null AS before_ci, null AS after_ci, n.description AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (old:Toolchain {version: $from})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(later:Toolchain {version: $to})
WHERE old.ordinal < later.ordinal AND (old)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT old
MATCH (o:LegalityRule)-[:HOLDS_UNDER]->(old)
WHERE NOT (o)-[:HOLDS_UNDER]->(:Toolchain {version: $to}) AND o.status = 'retired'
RETURN 'rule' AS kind, o.key AS key, 'retired' AS change, o.code + ' ' + o.predicate AS before, null AS after,
       null AS before_ci, null AS after_ci, o.description AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (new:Toolchain {version: $to})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(earlier:Toolchain {version: $from})
WHERE earlier.ordinal < new.ordinal AND (earlier)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT new
MATCH (n:LegalityRule)-[:HOLDS_UNDER]->(new)
WHERE NOT (n)-[:HOLDS_UNDER]->(:Toolchain {version: $from}) AND NOT (n)-[:SUPERSEDES]->(:LegalityRule)
RETURN 'rule' AS kind, n.key AS key, 'new' AS change, null AS before, n.code + ' ' + n.predicate AS after,
       null AS before_ci, null AS after_ci, n.description AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (old:Toolchain {version: $from})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(later:Toolchain {version: $to})
WHERE old.ordinal < later.ordinal AND (old)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT old
MATCH (m:Measurement)-[:UNDER]->(old)
MATCH (m)-[:UNDER]->(:Toolchain {version: $to})
OPTIONAL MATCH (m)-[:CHECKED_BY]->(c:Check {method: 'measurement'})-[:UNDER]->(:Toolchain {version: $to})
WITH m, c ORDER BY c.id
WITH m, collect(c)[0] AS c
RETURN 'measurement' AS kind, m.param AS key, 'confirmed' AS change, m.value AS before,
       coalesce(c.value, m.value) AS after, [m.ci_low, m.ci_high] AS before_ci,
       CASE WHEN c.value IS NULL THEN [m.ci_low, m.ci_high] ELSE [c.ci_low, c.ci_high] END AS after_ci,
       CASE WHEN c IS NULL THEN 'holds under both' ELSE c.detail END AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (new:Toolchain {version: $to})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(earlier:Toolchain {version: $from})
WHERE earlier.ordinal < new.ordinal AND (earlier)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT new
MATCH (n:Measurement)-[:UNDER]->(new)
MATCH (n)-[:SUPERSEDES]->(o:Measurement)-[:UNDER]->(:Toolchain {version: $from})
RETURN 'measurement' AS kind, n.param AS key, 'changed' AS change, o.value AS before, n.value AS after,
       [o.ci_low, o.ci_high] AS before_ci, [n.ci_low, n.ci_high] AS after_ci, n.fit AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (old:Toolchain {version: $from})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(later:Toolchain {version: $to})
WHERE old.ordinal < later.ordinal AND (old)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT old
MATCH (o:Measurement)-[:UNDER]->(old)
WHERE o.status = 'stale'
RETURN 'measurement' AS kind, o.param AS key, 'stale' AS change, o.value AS before, null AS after,
       [o.ci_low, o.ci_high] AS before_ci, null AS after_ci, 'not re-measured yet: the old value serves' AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (new:Toolchain {version: $to})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(earlier:Toolchain {version: $from})
WHERE earlier.ordinal < new.ordinal AND (earlier)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT new
MATCH (n:Measurement)-[:UNDER]->(new)
WHERE NOT (n)-[:UNDER]->(:Toolchain {version: $from}) AND NOT (n)-[:SUPERSEDES]->(:Measurement)
RETURN 'measurement' AS kind, n.param AS key, 'new' AS change, null AS before, n.value AS after, null AS before_ci,
       [n.ci_low, n.ci_high] AS after_ci, n.fit AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (new:Toolchain {version: $to})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(earlier:Toolchain {version: $from})
WHERE earlier.ordinal < new.ordinal AND (earlier)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT new
MATCH (c:Claim)-[:UNDER]->(new)
WHERE NOT (c)-[:UNDER]->(:Toolchain {version: $from})
OPTIONAL MATCH (same:Claim)-[:UNDER]->(:Toolchain {version: $from})
WHERE same.text = c.text AND coalesce(same.param, '') = coalesce(c.param, '')
WITH c, count(same) AS said_before
WHERE said_before = 0
OPTIONAL MATCH (e)-[v:CONFIRMS|CONTRADICTS]->(c)
WITH c.text AS text, min(coalesce(c.param, c.id)) AS key, collect(DISTINCT type(v)) AS verdicts
RETURN 'claim' AS kind, key, 'new' AS change, null AS before, text AS after,
       null AS before_ci, null AS after_ci,
       CASE WHEN 'CONTRADICTS' IN verdicts THEN 'contradicted' WHEN 'CONFIRMS' IN verdicts THEN 'confirmed'
            ELSE 'unchecked' END AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (old:Toolchain {version: $from})<-[:HAS_TOOLCHAIN]-(:Target)-[:HAS_TOOLCHAIN]->(later:Toolchain {version: $to})
WHERE old.ordinal < later.ordinal AND (old)<-[:UNDER|HOLDS_UNDER]-()
WITH DISTINCT old
MATCH (c:Claim)-[:UNDER]->(old)
WHERE NOT (c)-[:UNDER]->(:Toolchain {version: $to})
OPTIONAL MATCH (same:Claim)-[:UNDER]->(:Toolchain {version: $to})
WHERE same.text = c.text AND coalesce(same.param, '') = coalesce(c.param, '')
WITH c, count(same) AS still_said
WHERE still_said = 0
WITH c.text AS text, min(coalesce(c.param, c.id)) AS key
RETURN 'claim' AS kind, key, 'dropped' AS change, text AS before, null AS after,
       null AS before_ci, null AS after_ci, 'the new docs no longer say it' AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (v:Revalidation {to_version: $to})
WHERE v.from_version = $from
RETURN 'kernel' AS kind, v.kernel + ' ' + v.role AS key, v.outcome AS change, v.cycles_before AS before,
       v.cycles_after AS after, null AS before_ci, null AS after_ci,
       CASE WHEN v.repaired_design IS NULL THEN v.detail
            ELSE v.detail + ' -> ' + v.repaired_design END AS detail
ORDER BY key, before, after, detail
UNION ALL
MATCH (n:LanguageEntry {version: $to})
WHERE n.change_from = $from AND n.change IN ['added', 'removed', 'renamed', 'deprecated', 'changed']
RETURN 'construct' AS kind, n.name AS key, n.change AS change, n.before AS before, n.fingerprint AS after,
       null AS before_ci, null AS after_ci, n.change_detail AS detail
ORDER BY key, before, after, detail
