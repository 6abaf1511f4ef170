"""`chiplore report`: one self-contained HTML page of what the graph holds (figures inlined as SVG):
where each kernel stands, how it converged, its design tree, the judge's decisions, what was
learnt about the chip, and what each toolchain upgrade changed. Every number comes from the graph;
a section with nothing to show says so."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2
import matplotlib

matplotlib.use("Agg")  # no display: figures are rendered to SVG text
import matplotlib.pyplot as plt

import queries as named_queries
from chiplore.core.clock import utc_now
from kg.models import DesignNode
from kg.repo.progress import KernelProgress, design_tree, kernel_progress
from kg.store import GraphStore

SHORT = {"sliding_project_qkv": "QKV", "sliding_attention_output": "O", "decoder_feedforward": "FFN"}


@dataclass
class TreeNode:
    design: DesignNode
    on_path: bool
    children: list[TreeNode] = field(default_factory=list)


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def accepted_changes(store: GraphStore, kernel: str) -> int:
    """Accepted designs other than the baseline (and its ports to new toolchains): the steps the loop,
    or an upgrade's repair of BEST, took."""
    rows = store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) WHERE d.role <> 'baseline' RETURN count(d) AS n",
        {"k": kernel},
    )
    return int(rows[0]["n"]) if rows else 0


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: the SVG sits inside HTML


def convergence(store: GraphStore, kernel: str, bound: float) -> str | None:
    """BEST's cycles against the kernel's cumulative device time, the bound as a line, each accepted
    change marked, each toolchain upgrade a vertical line."""
    runs = store.read(
        "MATCH (r:DeviceRun {kernel: $k}) RETURN r.finished_at AS t, r.device_s AS s ORDER BY t", {"k": kernel}
    )
    if not runs:
        return None
    times, total, cumulative = [], 0.0, []
    for row in runs:
        total += row["s"] or 0.0
        times.append(row["t"])
        cumulative.append(total)

    def device_s_at(moment: str) -> float:
        spent = 0.0
        for t, c in zip(times, cumulative, strict=True):
            if t <= moment:
                spent = c
        return spent

    accepted = store.read(
        "MATCH (d:DesignNode {kernel: $k, status: 'accepted'}) WHERE d.measured_cycles IS NOT NULL "
        "AND (d.role <> 'baseline' OR (:Kernel)-[:ROOT]->(d)) "  # a baseline ported to a new toolchain is no step
        "OPTIONAL MATCH (c:Comparison {decision: 'accept'})-[:CANDIDATE]->(d) "
        "OPTIONAL MATCH (d)-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "WITH d, min(c.decided_at) AS decided, min(r.finished_at) AS first_run "
        "RETURN d.id AS id, d.measured_cycles AS cycles, d.change AS change, coalesce(decided, first_run) AS at "
        "ORDER BY at",
        {"k": kernel},
    )
    points = [(device_s_at(row["at"]), row["cycles"], row["change"]) for row in accepted if row["at"]]
    if not points:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 3.4))
    xs = [p[0] for p in points] + [cumulative[-1]]
    ys = [p[1] for p in points] + [points[-1][1]]
    axes.step(xs, ys, where="post", color="#1f6feb", label="BEST")
    axes.scatter([p[0] for p in points], [p[1] for p in points], color="#1f6feb", zorder=3, label="accepted change")
    axes.axhline(bound, color="#cf222e", linestyle="--", label=f"weight-movement bound ({bound:,.0f})")
    for row in store.read("MATCH (u:Upgrade {status: 'done'}) RETURN u.to_version AS v, u.ended_at AS at"):
        axes.axvline(device_s_at(row["at"]), color="#8250df", linestyle=":", label=f"upgrade to {row['v']}")
    axes.set_yscale("log")
    axes.set_xlabel("device seconds spent on the kernel")
    axes.set_ylabel("cycles (log scale)")
    axes.set_title(f"{SHORT.get(kernel, kernel)}: BEST against device time")
    axes.legend(fontsize=7, loc="upper right")
    return _svg(figure)


def decisions_figure(rows: list[dict[str, Any]]) -> str | None:
    """The judge's accepts as intervals of the candidate/incumbent ratio."""
    shown = [r for r in rows if r["decision"] == "accept" and r["ci_high"] < 10]
    if not shown:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 0.35 * len(shown) + 1.2))
    for i, row in enumerate(shown):
        axes.plot([row["ci_low"], row["ci_high"]], [i, i], color="#1a7f37")
        axes.scatter([row["ratio"]], [i], color="#1a7f37", zorder=3)
    axes.axvline(1.0, color="#57606a", linestyle="--", label="no change")
    axes.set_yticks(range(len(shown)), [f"{SHORT.get(r['kernel'], r['kernel'])} {r['candidate'][:8]}" for r in shown])
    axes.set_xlabel("candidate / incumbent cycles (95 % interval)")
    axes.set_title("accepted changes: the judge's intervals")
    axes.legend(fontsize=7)
    return _svg(figure)


def _tree(store: GraphStore, kernel: str) -> TreeNode | None:
    root, children, best = design_tree(store, kernel)
    if root is None:
        return None
    path: set[str] = set()
    parents = {c.id: parent for parent, kids in children.items() for c in kids}
    node = best
    while node is not None:
        path.add(node)
        node = parents.get(node)

    def grow(design: DesignNode) -> TreeNode:
        return TreeNode(design, design.id in path, [grow(c) for c in children.get(design.id, [])])

    return grow(root)


def report_data(store: GraphStore) -> dict[str, Any]:
    progress: list[KernelProgress] = kernel_progress(store)
    speedups = [k.speedup_vs_baseline for k in progress if k.speedup_vs_baseline]
    comparisons = store.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(d:DesignNode) MATCH (c)-[:INCUMBENT]->(i:DesignNode) "
        "RETURN c.kernel AS kernel, d.id AS candidate, i.id AS incumbent, c.method AS method, c.ratio AS ratio, "
        "c.ci_low AS ci_low, c.ci_high AS ci_high, c.pairs AS pairs, c.decision AS decision ORDER BY c.decided_at"
    )
    active = store.read("MATCH (:Target)-[:ACTIVE]->(t:Toolchain) RETURN t.version AS v, t.target AS target")
    version = active[0]["v"] if active else None
    measured = store.read(
        "MATCH (m:Measurement)-[:UNDER]->(:Toolchain {version: $v}) WHERE m.status <> 'refuted' "
        "OPTIONAL MATCH (m)-[j:CONFIRMS|CONTRADICTS]->(c:Claim) "
        "WITH m, collect(DISTINCT {value: c.value, unit: c.unit, verdict: type(j)}) AS claims "
        "RETURN m.param AS param, m.value AS value, m.ci_low AS ci_low, m.ci_high AS ci_high, m.unit AS unit, "
        "m.status AS status, claims ORDER BY param",
        {"v": version},
    )
    upgrades = []
    for row in store.read("MATCH (u:Upgrade {status: 'done'}) RETURN u.from_version AS a, u.to_version AS b "
                          "ORDER BY u.started_at"):  # fmt: skip
        diff = named_queries.run(store, "toolchain-diff", {"from": row["a"], "to": row["b"]})
        counts: dict[str, int] = {}
        for d in diff:
            counts[f"{d['kind']} {d['change']}"] = counts.get(f"{d['kind']} {d['change']}", 0) + 1
        notable = [d for d in diff if d["change"] not in ("confirmed",) and d["kind"] != "claim"]
        upgrades.append({"from": row["a"], "to": row["b"], "counts": counts, "rows": notable})
    kernels = []
    for k in progress:
        kernels.append({
            "progress": k, "short": SHORT.get(k.kernel, k.kernel), "accepted": accepted_changes(store, k.kernel),
            "figure": convergence(store, k.kernel, k.bound_cycles_true), "tree": _tree(store, k.kernel),
        })  # fmt: skip
    return {
        "generated": utc_now(), "target": active[0]["target"] if active else None, "version": version,
        "kernels": kernels, "geomean": geomean(speedups) if len(speedups) == len(progress) else None,
        "comparisons": comparisons, "decisions_figure": decisions_figure(comparisons), "measured": measured,
        "contradicted": named_queries.run(store, "contradicted-claims", {}) if version else [],
        "rules": named_queries.run(store, "rules-in-force", {"toolchain": version}) if version else [],
        "upgrades": upgrades,
    }  # fmt: skip


def render_report(store: GraphStore) -> str:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["num"] = lambda v, digits=0: "-" if v is None else f"{v:,.{digits}f}"
    template = environment.from_string((resources.files("chiplore") / "templates" / "report.html.j2").read_text())
    data = report_data(store)
    return template.render(**data, markup=jinja2.utils.markupsafe.Markup)
