// name: best-lineage
// params: kernel:str
// description: The path from a kernel's root design to its best design, with each step's change.
// anchors: Kernel
MATCH (:Kernel {name: $kernel})-[:BEST]->(best:DesignNode)
MATCH (best)-[:CHILD_OF*0..]->(d:DesignNode)
OPTIONAL MATCH (d)-[:HAS_VERSION]->(v:KernelVersion)
RETURN d.id AS design, d.depth AS depth, d.role AS role, d.policy AS policy, d.change AS change,
       d.status AS status, v.sha AS sha
ORDER BY depth, design
