"""Query plans, read from the backend's own planner (EXPLAIN on Neo4j, GRAPH.EXPLAIN on FalkorDB),
and the rule every query on a hot path must meet: it starts from an index seek on its anchor label.

Timings drift with the machine; a plan does not. A query whose plan starts from a label scan or an
all-nodes scan, or carries a cartesian product, slows down as the graph grows, so the plan tests
(tests/kg/test_query_plans.py) fail on it with the plan in the message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal[
    "index_seek", "count_store", "argument", "projection", "label_scan", "all_nodes_scan", "index_scan",
    "relationship_scan", "cartesian", "procedure", "load_csv", "admin", "write", "other",
]  # fmt: skip

# Operators that take their right-hand children once per row of their first child (nested loops):
# only the first child drives the query; the others are per-row lookups.
_PER_ROW_NEO4J = re.compile(r"Apply$|^Optional$|^SubqueryForeach$|^Foreach$")
_PER_ROW_FALKOR = {"Apply", "Optional", "Semi Apply", "Anti Semi Apply", "Apply Multiplexer", "Or Apply Multiplexer",
                   "And Apply Multiplexer", "OR Apply Multiplexer", "AND Apply Multiplexer", "Call Subquery",
                   "Foreach", "Merge"}  # fmt: skip

_NEO4J_KINDS: dict[str, Kind] = {
    "NodeIndexSeek": "index_seek",
    "NodeUniqueIndexSeek": "index_seek",
    "NodeIndexSeekByRange": "index_seek",
    "NodeUniqueIndexSeekByRange": "index_seek",
    "MultiNodeIndexSeek": "index_seek",
    "AssertingMultiNodeIndexSeek": "index_seek",
    "NodeByIdSeek": "index_seek",
    "NodeByElementIdSeek": "index_seek",
    "NodeCountFromCountStore": "count_store",
    "RelationshipCountFromCountStore": "count_store",
    "Argument": "argument",
    "Projection": "projection",
    "Unwind": "projection",
    "NodeByLabelScan": "label_scan",
    "UnionNodeByLabelsScan": "label_scan",
    "IntersectionNodeByLabelsScan": "label_scan",
    "SubtractionNodeByLabelsScan": "label_scan",
    "PartitionedNodeByLabelScan": "label_scan",
    "AllNodesScan": "all_nodes_scan",
    "PartitionedAllNodesScan": "all_nodes_scan",
    "NodeIndexScan": "index_scan",
    "NodeIndexContainsScan": "index_scan",
    "NodeIndexEndsWithScan": "index_scan",
    "CartesianProduct": "cartesian",
    "ProcedureCall": "procedure",
    "LoadCSV": "load_csv",
}
_FALKOR_KINDS: dict[str, Kind] = {
    "Node By Index Scan": "index_seek",
    "Node By Id Seek": "index_seek",
    "Argument": "argument",
    "Argument List": "argument",
    "Project": "projection",
    "Unwind": "projection",
    "MergeCreate": "projection",  # MERGE's create branch: writes the row it is given, reads nothing
    "Node By Label Scan": "label_scan",
    "Node By Label and ID Scan": "label_scan",
    "All Node Scan": "all_nodes_scan",
    "Edge By Index Scan": "index_seek",
    "Cartesian Product": "cartesian",
    "ProcedureCall": "procedure",
    "Load CSV": "load_csv",
}


@dataclass
class PlanNode:
    """One operator of a plan, in the backend's own words, with its children (inputs)."""

    operator: str
    detail: str = ""
    children: list[PlanNode] = field(default_factory=list)
    per_row: bool = False  # children after the first run once per input row

    @property
    def kind(self) -> Kind:
        # Neo4j qualifies some operators: NodeUniqueIndexSeek(Locking), Expand(All).
        return _kind(self.operator.split("(")[0])

    def walk(self) -> Iterator[PlanNode]:
        yield self
        for child in self.children:
            yield from child.walk()

    def render(self, indent: int = 0) -> str:
        """The plan as an indented tree, for messages."""
        line = "  " * indent + self.operator + (f" | {self.detail}" if self.detail else "")
        return "\n".join([line, *(child.render(indent + 1) for child in self.children)])

    @property
    def label(self) -> str | None:
        """The label an index seek or a scan reads, when the operator names one."""
        match = re.search(r"\(?`?\w+`?:`?(\w+)`?", self.detail)
        return match.group(1) if match else None


def _kind(operator: str) -> Kind:
    if operator in _NEO4J_KINDS:
        return _NEO4J_KINDS[operator]
    if operator in _FALKOR_KINDS:
        return _FALKOR_KINDS[operator]
    if "RelationshipTypeScan" in operator or "AllRelationshipsScan" in operator or "RelationshipIndex" in operator:
        return "relationship_scan"
    if _ADMIN.match(operator):
        return "admin"
    if _WRITE.match(operator):
        return "write"
    return "other"


_ADMIN = re.compile(
    r"^(Show|Terminate|Drop|Alter|Grant|Deny|Revoke|Rename|Start|Stop|System|Assert|Ensure|DoNothingIf)"
    r"|^Create ?(Index|Constraint|User|Role|Database|Alias|Composite|FulltextIndex|.*Index)"
)
_WRITE = re.compile(r"^(Create|Merge|Delete|DetachDelete|Detach Delete|Update|Set|Remove|Foreach|LockingMerge)")


def leaves(plan: PlanNode, *, driving: bool = True) -> Iterator[tuple[PlanNode, bool]]:
    """Every leaf of the plan with whether it drives the query (False: a per-row lookup)."""
    if not plan.children:
        yield plan, driving
        return
    for index, child in enumerate(plan.children):
        yield from leaves(child, driving=driving and not (plan.per_row and index > 0))


def plan_from_neo4j(plan: Mapping[str, Any]) -> PlanNode:
    """A PlanNode from the driver's `ResultSummary.plan` dictionary."""
    operator = str(plan.get("operatorType", "?")).split("@")[0]
    arguments = plan.get("args") or plan.get("arguments") or {}
    return PlanNode(
        operator=operator,
        detail=" ".join(str(arguments.get("Details", "")).split()),
        children=[plan_from_neo4j(child) for child in plan.get("children", [])],
        per_row=bool(_PER_ROW_NEO4J.search(operator)),
    )


def plan_from_falkordb(lines: list[str]) -> PlanNode:
    """A PlanNode from GRAPH.EXPLAIN's lines (four spaces of indent per level)."""
    root: PlanNode | None = None
    stack: list[tuple[int, PlanNode]] = []
    for raw in lines:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        if not text.strip():
            continue
        depth = (len(text) - len(text.lstrip(" "))) // 4
        operator, _, detail = text.strip().partition(" | ")
        node = PlanNode(operator=operator.strip(), detail=detail.strip(), per_row=operator.strip() in _PER_ROW_FALKOR)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            stack[-1][1].children.append(node)
        else:
            root = node
        stack.append((depth, node))
    if root is None:
        raise ValueError("GRAPH.EXPLAIN returned no plan")
    return root


@dataclass(frozen=True)
class AllowedScan:
    """A documented exception: `label` (or relationship type) may be scanned whole, because `reason`
    keeps it tiny."""

    label: str
    reason: str


def plan_problems(
    plan: PlanNode,
    anchors: tuple[str, ...],
    allowed_scans: tuple[AllowedScan, ...] = (),
    *,
    keyed_products: bool = False,
) -> list[str]:
    """Why a plan does not start from an index seek on an anchor label (empty when it does).

    Driving leaves must be index seeks on one of `anchors` (any label when `anchors` is empty),
    count-store reads or bare projections (no MATCH); per-row leaves must be arguments or index
    seeks of any label; no cartesian product anywhere, except, with `keyed_products`, one whose
    every input starts from an index seek (a statement that looks several nodes up by their keys).
    A scan of a label in `allowed_scans` is accepted wherever it appears.
    """
    problems: list[str] = []
    allowed = {scan.label for scan in allowed_scans}
    for node in plan.walk():
        if node.kind == "cartesian" and not (keyed_products and _all_inputs_seek(node)):
            problems.append(f"cartesian product: {node.operator}")
    for leaf, driving in leaves(plan):
        kind, label = leaf.kind, leaf.label
        where = f"{leaf.operator} | {leaf.detail}".rstrip(" |")
        if kind in ("label_scan", "index_scan", "relationship_scan") and label in allowed:
            continue
        if kind == "index_seek":
            if driving and anchors and label not in anchors:
                problems.append(f"starts from a seek on {label}, not on its anchor {' or '.join(anchors)}: {where}")
            continue
        if kind in ("argument", "projection") and not driving:
            continue
        if kind in ("count_store", "projection") and driving:
            continue
        problems.append(f"{'starts from' if driving else 'per-row'} {kind.replace('_', ' ')}: {where}")
    return problems


def _all_inputs_seek(product: PlanNode) -> bool:
    return all(
        all(leaf.kind in ("index_seek", "argument", "projection") for leaf, _ in leaves(child))
        and any(node.kind == "index_seek" for node in child.walk())
        for child in product.children
    )


def _all_inputs_seek(product: PlanNode) -> bool:
    return all(
        all(leaf.kind in ("index_seek", "argument", "projection") for leaf, _ in leaves(child))
        and any(node.kind == "index_seek" for node in child.walk())
        for child in product.children
    )


def driving_summary(plan: PlanNode) -> str:
    """Where a plan starts, in a few words (e.g. `seek Kernel`, `seek Toolchain x9, seek Revalidation`)."""
    starts: dict[str, int] = {}
    for leaf, driving in leaves(plan):
        if not driving:
            continue
        kind = leaf.kind
        word = {"index_seek": "seek", "count_store": "count store", "projection": "no match"}.get(
            kind, kind.replace("_", " ")
        )
        text = f"{word} {leaf.label}" if leaf.label and kind != "projection" else word
        starts[text] = starts.get(text, 0) + 1
    return ", ".join(f"{text} x{count}" if count > 1 else text for text, count in starts.items())
