"""`chiplore report`: one self-contained HTML page of what the graph holds (figures inlined as SVG):
where each kernel stands, how it converged, its design tree, the judge's decisions, what was
learnt about the chip, what each toolchain upgrade changed, and each kernel's BEST program,
highlighted with the target's lexer, with its diff against the baseline. Every number comes from
the graph; a section with nothing to show says so."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2
import matplotlib
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import DiffLexer, TextLexer

matplotlib.use("Agg")  # no display: figures are rendered to SVG text
import matplotlib.pyplot as plt

from chiplore import queries as named_queries
from chiplore.core.clock import utc_now
from chiplore.kg.models import DesignNode
from chiplore.kg.repo.progress import KernelProgress, design_tree, geomean, kernel_progress
from chiplore.kg.repo.reporting import (
    accepted_changes,
    accepted_steps,
    active_toolchains,
    comparisons,
    finished_upgrades,
    kernel_runs,
    measurements_with_claims,
)
from chiplore.kg.repo.results import baseline_under, program_of
from chiplore.kg.store import GraphStore
from chiplore.results import unified_diff

CODE_CLASS = "hl"  # the CSS class of highlighted programs


@dataclass
class TreeNode:
    design: DesignNode
    on_path: bool
    children: list[TreeNode] = field(default_factory=list)


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: the SVG sits inside HTML


def convergence(store: GraphStore, kernel: str, label: str, bound: float) -> str | None:
    """BEST's cycles against the kernel's cumulative device time, the bound as a line, each accepted
    change marked, each toolchain upgrade a vertical line."""
    runs = kernel_runs(store, kernel)
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

    accepted = accepted_steps(store, kernel)
    points = [(device_s_at(row["at"]), row["cycles"], row["change"]) for row in accepted if row["at"]]
    if not points:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 3.4))
    xs = [p[0] for p in points] + [cumulative[-1]]
    ys = [p[1] for p in points] + [points[-1][1]]
    axes.step(xs, ys, where="post", color="#1f6feb", label="BEST")
    axes.scatter([p[0] for p in points], [p[1] for p in points], color="#1f6feb", zorder=3, label="accepted change")
    axes.axhline(bound, color="#cf222e", linestyle="--", label=f"weight-movement bound ({bound:,.0f})")
    for row in finished_upgrades(store):
        axes.axvline(device_s_at(row["at"]), color="#8250df", linestyle=":", label=f"upgrade to {row['to_version']}")
    axes.set_yscale("log")
    axes.set_xlabel("device seconds spent on the kernel")
    axes.set_ylabel("cycles (log scale)")
    axes.set_title(f"{label}: BEST against device time")
    axes.legend(fontsize=7, loc="upper right")
    return _svg(figure)


def decisions_figure(rows: list[dict[str, Any]], labels: dict[str, str]) -> str | None:
    """The judge's accepts as intervals of the candidate/incumbent ratio."""
    shown = [r for r in rows if r["decision"] == "accept" and r["ci_high"] < 10]
    if not shown:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 0.35 * len(shown) + 1.2))
    for i, row in enumerate(shown):
        axes.plot([row["ci_low"], row["ci_high"]], [i, i], color="#1a7f37")
        axes.scatter([row["ratio"]], [i], color="#1a7f37", zorder=3)
    axes.axvline(1.0, color="#57606a", linestyle="--", label="no change")
    axes.set_yticks(range(len(shown)), [f"{labels.get(r['kernel'], r['kernel'])} {r['candidate'][:8]}" for r in shown])
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


def best_program(store: GraphStore, kernel: str, best: str | None, version: str | None,
                 lexer: Any | None) -> dict[str, Any] | None:  # fmt: skip
    """A kernel's BEST program as highlighted HTML, and its diff against the baseline as it runs
    under `version` (None before the kernel has a BEST)."""
    program = program_of(store, best) if best else None
    if program is None:
        return None
    formatter = HtmlFormatter(cssclass=CODE_CLASS)
    baseline_id = baseline_under(store, kernel, version)
    baseline = program_of(store, baseline_id) if baseline_id and baseline_id != program.design.id else None
    diff = (unified_diff(baseline.source, program.source, f"baseline {baseline.design.id[:10]} ({baseline.toolchain})",
                         f"BEST {program.design.id[:10]} ({program.toolchain})") if baseline else "")  # fmt: skip
    return {
        "design": program.design.id, "toolchain": program.toolchain, "lines": program.source.count("\n") + 1,
        "html": highlight(program.source, lexer or TextLexer(), formatter),
        "baseline": baseline.design.id if baseline else None,
        "diff_html": highlight(diff, DiffLexer(), formatter) if diff else None,
        "added": sum(line.startswith("+") and not line.startswith("+++") for line in diff.splitlines()),
        "removed": sum(line.startswith("-") and not line.startswith("---") for line in diff.splitlines()),
    }  # fmt: skip


def report_data(store: GraphStore, roof: str, labels: dict[str, str], lexer: Any | None = None) -> dict[str, Any]:
    """Everything the report shows; `roof` is the parameter key of the measured roof, `labels` the
    kernels' short names, `lexer` the Pygments lexer of the target's language (plain text without)."""
    progress: list[KernelProgress] = kernel_progress(store, roof)
    speedups = [k.speedup_vs_baseline for k in progress if k.speedup_vs_baseline]
    judged = comparisons(store)
    active = active_toolchains(store)
    version = active[0]["v"] if active else None
    measured = measurements_with_claims(store, version) if version else []
    upgrades = []
    for row in finished_upgrades(store):
        diff = named_queries.run(store, "toolchain-diff", {"from": row["from_version"], "to": row["to_version"]})
        counts: dict[str, int] = {}
        for d in diff:
            counts[f"{d['kind']} {d['change']}"] = counts.get(f"{d['kind']} {d['change']}", 0) + 1
        notable = [d for d in diff if d["change"] not in ("confirmed",) and d["kind"] != "claim"]
        upgrades.append({"from": row["from_version"], "to": row["to_version"], "counts": counts, "rows": notable})
    kernels = []
    for k in progress:
        kernels.append({
            "progress": k, "short": labels.get(k.kernel, k.kernel), "accepted": accepted_changes(store, k.kernel),
            "figure": convergence(store, k.kernel, labels.get(k.kernel, k.kernel), k.bound_cycles_true),
            "tree": _tree(store, k.kernel),
            "program": best_program(store, k.kernel, k.best_design, version, lexer),
        })  # fmt: skip
    return {
        "generated": utc_now(), "target": active[0]["target"] if active else None, "version": version,
        "kernels": kernels, "geomean": geomean(speedups) if len(speedups) == len(progress) else None,
        "comparisons": judged, "decisions_figure": decisions_figure(judged, labels), "measured": measured,
        "contradicted": named_queries.run(store, "contradicted-claims", {}) if version else [],
        "rules": named_queries.run(store, "rules-in-force", {"toolchain": version}) if version else [],
        "upgrades": upgrades,
    }  # fmt: skip


def render_report(store: GraphStore, roof: str, labels: dict[str, str], *, lexer: Any | None = None) -> str:
    """The report page as one self-contained HTML string; programs are highlighted with `lexer`
    (the target pack's `lexer()`) when there is one."""
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["num"] = lambda v, digits=0: "-" if v is None else f"{v:,.{digits}f}"
    environment.filters["sig"] = significant
    template = environment.from_string((resources.files("chiplore") / "templates" / "report.html.j2").read_text())
    data = report_data(store, roof, labels, lexer)
    code_style = HtmlFormatter(cssclass=CODE_CLASS).get_style_defs(f".{CODE_CLASS}")
    return template.render(**data, code_style=code_style, markup=jinja2.utils.markupsafe.Markup)


def significant(value: float | None, digits: int = 4) -> str:
    """`digits` significant digits (and every whole one), thousands separated: a measured 491,520 B and
    217.5 B/cycle, not 491,520.0000 and 217.5115."""
    if value is None:
        return "-"
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    if abs(round(value, digits - 1 - magnitude)) >= 10 ** (magnitude + 1):  # 0.99995 rounds up to 1.000
        magnitude += 1
    return f"{value:,.{max(0, digits - 1 - magnitude)}f}"  # whole digits are kept: 491,520, not 491,500
