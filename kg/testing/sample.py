"""A synthetic but coherent knowledge graph, deterministic from a seed (test and benchmark data).

Used by the conformance tests (small) and benchmarks/graph_store.py (100k designs): every node
type and relationship of the schema appears, written through the repository layer's batched paths,
so both exercise the code the loop itself uses.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from chiplore.core.clock import to_iso
from chiplore.core.ids import content_sha
from chiplore.kg.models import (
    Activity,
    Check,
    Claim,
    Comparison,
    Concept,
    DesignNode,
    DeviceRun,
    Diagnostic,
    DocChunk,
    DocPage,
    HardwareParam,
    Kernel,
    KernelVersion,
    LegalityRule,
    Measurement,
    ProbeProgram,
    Revalidation,
    Screening,
)
from chiplore.kg.repo.design_counts import recount
from chiplore.kg.repo.nodes import Link, Ref, link, upsert
from chiplore.kg.repo.runs import record_device_runs
from chiplore.kg.repo.targets import register_target, set_active_toolchain
from chiplore.kg.repo.upgrades import record_revalidation
from chiplore.kg.schema import fact_id
from chiplore.kg.store import GraphStore
from chiplore.kg.testing.sample_language import language_summary

TARGET = "simrngd"
VERSIONS = ("0.5.0", "0.6.0", "0.7.0")
OLD, NEW = "0.6.0", "0.7.0"
KERNELS = ("sliding_project_qkv", "sliding_attention_output", "decoder_feedforward")
PARAMS = (
    ("hbm_bytes_per_cycle", "B/cycle"),
    ("dma_startup_cycles", "cycles"),
    ("dm_capacity_bytes", "B"),
    ("switch_bytes_per_cycle", "B/cycle"),
    ("contraction_macs_per_cycle", "MAC/cycle"),
    ("vector_chain_max", "ops"),
)
RULE_CODES = ("E0201", "E0202", "E0301", "E0302", "E0401", "E0402", "E0501", "W0601")
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class SampleSummary:
    """What was built, so callers can pick parameters for queries."""

    kernels: list[str] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    consulted_fact: str = ""
    designs: int = 0


def build_sample_graph(store: GraphStore, *, designs_per_kernel: int = 40, seed: int = 0) -> SampleSummary:
    """Write the sample graph into an empty store (schema already set up)."""
    rng = random.Random(seed)
    clock = _Clock()
    summary = SampleSummary(kernels=list(KERNELS), params=[p for p, _ in PARAMS])
    register_target(store, TARGET, VERSIONS, OLD, "sample target")
    actors = _actors(clock)
    nodes: list = list(actors)
    links: list[Link] = []
    claims_by_param, chunks = _docs(nodes, links, actors.librarian)
    probe_runs = _measurements(nodes, links, clock, claims_by_param, actors.prober)
    rules = _rules(nodes, links, actors.prober)
    language_summary(nodes, links, target=TARGET, versions=(OLD, NEW), chunks=chunks,
                     rule=f"rule-{OLD}-{RULE_CODES[0]}", claims={v: f"claim-{v}-{PARAMS[1][0]}" for v in (OLD, NEW)},
                     librarian=actors.librarian)  # fmt: skip

    upsert(store, nodes)
    record_device_runs(store, probe_runs, activity=actors.prober)
    link(store, links)

    facts = [fact_id("Measurement", f"meas-{OLD}-{p}") for p, _ in PARAMS]
    facts += [fact_id("LegalityRule", r.id) for r in rules]
    summary.consulted_fact = facts[0]
    for kernel in KERNELS:
        _design_tree(store, rng, clock, kernel, designs_per_kernel, facts, actors)
        summary.designs += designs_per_kernel
    store.write(
        "MATCH (d:DesignNode) WHERE d.id ENDS WITH '-d1' MATCH (f:Fact {fact_id: $fact}) MERGE (d)-[:CONSULTED]->(f)",
        {"fact": summary.consulted_fact},
    )
    _revalidations(store, actors.runner)
    set_active_toolchain(store, TARGET, NEW)
    recount(store)  # the designs above were written in bulk, past the statements that count them
    return summary


class _Actors(NamedTuple):
    """The activities every node of the sample graph is created by."""

    librarian: Activity
    prober: Activity
    architect: Activity
    refiner: Activity
    runner: Activity
    judge: Activity


def _actors(clock: _Clock) -> _Actors:
    return _Actors(
        librarian=Activity(id="act-librarian", role="librarian", policy="builtin", started_at=clock.tick()),
        prober=Activity(id="act-prober", role="librarian", policy="builtin", started_at=clock.tick()),
        architect=Activity(id="act-architect", role="architect", policy="builtin", started_at=clock.tick()),
        refiner=Activity(id="act-refiner", role="refiner", policy="llm", model="scripted", prompt_tokens=1200,
                         completion_tokens=300, latency_s=2.5, cost_usd=0.004, started_at=clock.tick()),
        runner=Activity(id="act-runner", role="runner", policy="builtin", started_at=clock.tick()),
        judge=Activity(id="act-judge", role="judge", policy="builtin", started_at=clock.tick()),
    )  # fmt: skip


def _docs(nodes: list, links: list[Link], librarian: Activity) -> tuple[dict[str, list[Claim]], dict[str, str]]:
    """Docs, concepts and claims, one page per parameter per version. Returns the claims by parameter and
    each version's first chunk, which the language summary's examples cite."""
    claims_by_param: dict[str, list[Claim]] = {}
    chunks: dict[str, str] = {}
    for version in (OLD, NEW):
        for index, (param, unit) in enumerate(PARAMS):
            text = f"The {param.replace('_', ' ')} is {100 + index * 7} {unit} under toolchain {version}."
            page = DocPage(id=f"{version}/{param}.md", version=version, path=f"{param}.md", sha=content_sha(text))
            chunk = DocChunk(sha=content_sha(f"{version}:{text}"), text=text, ord=0)
            chunks.setdefault(version, chunk.sha)
            concept = Concept(key=param.replace("_", "."), kind="hardware")
            claim = Claim(
                id=f"claim-{version}-{param}",
                text=text,
                param=param,
                value=float(100 + index * 7),
                unit=unit,
                toolchain=version,
                status="stale" if version == OLD and index % 3 == 0 else "current",
            )
            claims_by_param.setdefault(param, []).append(claim)
            nodes += [page, chunk, concept, claim]
            links += [
                Link(Ref.to(page), "HAS_CHUNK", Ref.to(chunk)),
                Link(Ref.to(page), "UNDER", Ref("Toolchain", f"{TARGET}@{version}")),
                Link(Ref.to(concept), "MENTIONED_IN", Ref.to(chunk)),
                Link(Ref.to(claim), "ABOUT", Ref.to(concept)),
                Link(Ref.to(claim), "CITES", Ref.to(chunk)),
                Link(Ref.to(claim), "UNDER", Ref("Toolchain", f"{TARGET}@{version}")),
                Link(Ref.to(claim), "CREATED_BY", Ref.to(librarian)),
            ]
    return claims_by_param, chunks


def _measurements(
    nodes: list, links: list[Link], clock: _Clock, claims_by_param: dict[str, list[Claim]], prober: Activity
) -> list[tuple[DeviceRun, str]]:
    """Microbenchmark runs and measurements, as an upgrade from OLD to NEW leaves them: most were
    confirmed (one node under both versions, with the check), one changed (the NEW measurement
    SUPERSEDES the OLD one), one is still stale (OLD only); some contradict the docs. Returns the
    probe runs with their sweep's KernelVersion sha, recorded once the nodes are written."""
    probe_runs: list[tuple[DeviceRun, str]] = []
    for index, (param, unit) in enumerate(PARAMS):
        hardware = HardwareParam(key=param, unit=unit, description=f"measured {param}")
        nodes.append(hardware)
        changed, stale = index == 1, index == 3
        previous: Measurement | None = None
        for version in (OLD, NEW) if changed else (OLD,):
            run, sweep, measurement, true_value = _measurement(clock, index, param, unit, version, changed, stale)
            verdict = "CONTRADICTS" if index % 2 else "CONFIRMS"
            nodes += [sweep, measurement]
            probe_runs.append((run, sweep.sha))
            links += [
                Link(Ref.to(measurement), "OF", Ref.to(hardware)),
                Link(Ref.to(measurement), "FROM", Ref.to(run)),
                Link(Ref.to(measurement), "UNDER", Ref("Toolchain", f"{TARGET}@{version}")),
                Link(Ref.to(measurement), "CREATED_BY", Ref.to(prober)),
            ]
            links += [Link(Ref.to(measurement), verdict, Ref.to(c)) for c in claims_by_param[param]
                      if c.toolchain == version or not changed]  # fmt: skip
            if previous is not None:
                links.append(Link(Ref.to(measurement), "SUPERSEDES", Ref.to(previous)))
            elif not changed and not stale:
                again = true_value + 0.25
                check = Check(id=f"check-{param}", method="measurement", verdict="confirms", value=again,
                              ci_low=again - 0.5, ci_high=again + 0.5,
                              detail=f"re-measured under {NEW}: {again}")  # fmt: skip
                nodes.append(check)
                links += [
                    Link(Ref.to(measurement), "UNDER", Ref("Toolchain", f"{TARGET}@{NEW}")),
                    Link(Ref.to(check), "UNDER", Ref("Toolchain", f"{TARGET}@{NEW}")),
                    Link(Ref.to(measurement), "CHECKED_BY", Ref.to(check)),
                    Link(Ref.to(check), "USED", Ref.to(run)),
                ]
            previous = measurement
    return probe_runs


def _measurement(
    clock: _Clock, index: int, param: str, unit: str, version: str, changed: bool, stale: bool
) -> tuple[DeviceRun, KernelVersion, Measurement, int]:
    """One parameter's sweep under `version`: its run, the sweep program, the measurement and its value."""
    sweep_source = f"// sweep of {param}\nkernel mb_{index} {{ repeat = 5 }}"
    sweep = KernelVersion(
        sha=content_sha(f"{version}:{sweep_source}"),
        kernel="microbenchmark",
        source=sweep_source,
        toolchain=version,
    )
    true_value = 100 + index * 7 + (9 if index % 2 else 0) + (3 if version == NEW and changed else 0)
    run = DeviceRun(
        id=f"probe-run-{version}-{param}",
        kernel="microbenchmark",
        job_id=f"job-probe-{version}-{index}",
        cycles=[float(1000 + index + k) for k in range(5)],
        median_cycles=float(1002 + index),
        status="ok",
        device_s=round(0.5 + 0.25 * index, 3),
        fixtures="smoke",
        toolchain=version,
        finished_at=clock.tick(),
    )
    half_width = 0.5 + 0.1 * index
    measurement = Measurement(
        id=f"meas-{version}-{param}",
        param=param,
        value=float(true_value),
        ci_low=true_value - half_width,
        ci_high=true_value + half_width,
        n=5,
        fit="theil-sen",
        unit=unit,
        toolchain=version,
        status="superseded" if changed and version == OLD else "stale" if stale else "current",
        measured_at=clock.tick(),
    )
    return run, sweep, measurement, true_value


def _rules(nodes: list, links: list[Link], prober: Activity) -> list[LegalityRule]:
    """Legality rules as an upgrade leaves them: confirmed (one rule under both versions), changed
    (a NEW rule SUPERSEDES the OLD one), retired (OLD only) and new (NEW only)."""
    rules: list[LegalityRule] = []
    for index, code in enumerate(RULE_CODES):
        changed = index == 2
        versions = (OLD,) if index == 6 else (NEW,) if index == 7 else (OLD, NEW) if changed else (OLD,)
        for version in versions:
            limit = 4096 if not (version == NEW and changed) else 8192
            predicate = json.dumps({"op": "<=", "field": f"limit_{index}", "value": limit}, sort_keys=True)
            probe_source = f"// probe {code}\nkernel probe_{index} {{ limit = {limit + 1} }}"
            probe = ProbeProgram(sha=content_sha(probe_source), source=probe_source, purpose=f"push {code}")
            diagnostic = Diagnostic(
                id=f"diag-{version}-{code}",
                code=code,
                severity="error",
                message=f"{code}: limit {limit}",
                toolchain=version,
            )
            status = "retired" if index == 6 else "superseded" if changed and version == OLD else "current"
            rule = LegalityRule(
                id=f"rule-{version}-{code}",
                key=f"rule.{code.lower()}",
                code=code,
                predicate=predicate,
                description=f"limit {index} at most {limit}",
                probe=f"rule.{code.lower()}|push {code}",
                toolchain=version,
                status=status,  # type: ignore[arg-type]
            )
            rules.append(rule)
            nodes += [probe, diagnostic, rule]
            holds = (version,) if changed or index in (6, 7) else (OLD, NEW)
            links += [
                Link(Ref.to(rule), "DERIVED_FROM", Ref.to(diagnostic)),
                Link(Ref.to(diagnostic), "EMITTED_FOR", Ref.to(probe)),
                Link(Ref.to(rule), "CREATED_BY", Ref.to(prober)),
            ]
            links += [Link(Ref.to(rule), "HOLDS_UNDER", Ref("Toolchain", f"{TARGET}@{v}")) for v in holds]
            if changed and version == NEW:
                links.append(Link(Ref.to(rule), "SUPERSEDES", Ref("LegalityRule", f"rule-{OLD}-{code}")))
    return rules


def _revalidations(store: GraphStore, runner: Activity) -> None:
    """The upgrade re-validated each kernel's baseline: the first survived, the others were repaired."""
    for index, kernel in enumerate(KERNELS):
        root = f"{kernel}-d0"
        repaired = f"{kernel}-d1" if index else None
        record_revalidation(
            store,
            Revalidation(id=Revalidation.id_of(kernel, root, NEW), kernel=kernel, design=root, role="baseline",
                         from_version=OLD, to_version=NEW, outcome="repaired" if repaired else "survived",
                         repaired_design=repaired, cycles_before=100_000.0 + index, cycles_after=99_000.0 + index,
                         detail="header -> 0.7.0" if repaired else ""),
            activity=runner, target=TARGET,
        )  # fmt: skip


@dataclass
class _Tree:
    """One kernel's design tree while it is built: what goes to the store, and what later designs look up."""

    kernel: str
    bound: float
    count: int
    nodes: list = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    designs: list[DesignNode] = field(default_factory=list)
    runs: list[tuple[DeviceRun, str]] = field(default_factory=list)
    depth_of: dict[str, int] = field(default_factory=dict)
    best_chain: list[str] = field(default_factory=list)
    cycles_of: dict[str, float] = field(default_factory=dict)


def _design_tree(
    store: GraphStore,
    rng: random.Random,
    clock: _Clock,
    kernel: str,
    count: int,
    facts: list[str],
    actors: _Actors,
) -> None:
    bound = 50_000.0 + 10_000 * KERNELS.index(kernel)
    tree = _Tree(kernel, bound, count)
    tree.nodes.append(Kernel(name=kernel, target=TARGET, weight_bytes=int(bound * 64), bound_cycles=bound))
    for index in range(count):
        design, version, parent = _design(tree, rng, clock, index, actors)
        if design.status in ("accepted", "rejected", "measured", "failed"):
            _measured(tree, rng, clock, index, design, version, parent, actors.judge)
    upsert(store, tree.nodes)
    record_device_runs(store, tree.runs, activity=actors.runner)
    link(store, tree.links)
    consulted = [
        {"design": d.id, "fact": facts[rng.randrange(len(facts))]} for d in tree.designs if d.id.split("-d")[-1] != "1"
    ]
    store.write_rows(
        "UNWIND $rows AS row MATCH (d:DesignNode {id: row.design}) MATCH (f:Fact {fact_id: row.fact}) "
        "MERGE (d)-[:CONSULTED]->(f)",
        consulted,
    )
    link(store, [Link(Ref("Kernel", kernel), "BEST", Ref("DesignNode", tree.best_chain[-1]))])


def _design(
    tree: _Tree, rng: random.Random, clock: _Clock, index: int, actors: _Actors
) -> tuple[DesignNode, KernelVersion, str | None]:
    """Design `index` of the tree with its program, its place in the tree and its screening. Returns the
    design, its KernelVersion and its parent's id (None for the root)."""
    kernel = tree.kernel
    design_id = f"{kernel}-d{index}"
    if index == 0:
        parent = None
    elif index < 8:
        # A spine of accepted refinements: the best lineage.
        parent = tree.best_chain[-1]
    else:
        parent = tree.designs[rng.randrange(len(tree.designs))].id
    depth = 0 if parent is None else tree.depth_of[parent] + 1
    tree.depth_of[design_id] = depth
    status = "accepted" if index < 8 else rng.choice(["rejected", "screened_out", "failed", "measured", "queued"])
    role = "architect" if index == 0 or index % 5 == 0 else "refiner"
    # Every seventh design repeats its parent's source: one KernelVersion, two designs.
    source_seed = index - 1 if index % 7 == 6 else index
    source = f"// {kernel} design {source_seed}\nkernel {kernel} {{ tile = {16 << (source_seed % 5)} }}"
    version = KernelVersion(sha=content_sha(source), kernel=kernel, source=source, toolchain=OLD)
    design = DesignNode(
        id=design_id,
        kernel=kernel,
        role=role,
        policy="builtin" if role == "architect" else "llm",
        rationale=f"try tile {16 << (source_seed % 5)}",
        change=f"change {index}",
        status=status,
        depth=depth,
        created_at=clock.tick(),
    )
    tree.designs.append(design)
    if status == "accepted":
        tree.best_chain.append(design_id)
    actor = actors.architect if role == "architect" else actors.refiner
    tree.nodes += [version, design]
    tree.links += [
        Link(Ref.to(design), "HAS_VERSION", Ref.to(version)),
        Link(Ref.to(design), "CREATED_BY", Ref.to(actor)),
    ]
    tree.links.append(
        Link(Ref("Kernel", kernel), "ROOT", Ref.to(design))
        if parent is None
        else Link(Ref.to(design), "CHILD_OF", Ref("DesignNode", parent))
    )
    screening = Screening(
        id=f"{design_id}-screen",
        design=design_id,
        check="legality",
        passed=status != "screened_out",
        detail="" if status != "screened_out" else "E0301 predicted",
        predicted_cycles=tree.bound * (3.0 - index / tree.count),
    )
    tree.nodes.append(screening)
    tree.links += [
        Link(Ref.to(screening), "OF", Ref.to(design)),
        Link(Ref.to(screening), "CREATED_BY", Ref.to(actors.runner)),
    ]
    return design, version, parent


def _measured(
    tree: _Tree,
    rng: random.Random,
    clock: _Clock,
    index: int,
    design: DesignNode,
    version: KernelVersion,
    parent: str | None,
    judge: Activity,
) -> None:
    """A design that reached the device: its run and, where its parent was measured too and the run
    did not fail, the judge's comparison against the parent."""
    status = design.status
    median = tree.bound * (3.0 - 1.8 * min(index, 8) / 8) * (1.0 + rng.random() * 0.2 * (status != "accepted"))
    tree.cycles_of[design.id] = median
    run = DeviceRun(
        id=f"{design.id}-run",
        kernel=tree.kernel,
        job_id=f"job-{design.id}",
        cycles=[round(median * (1 + 0.01 * k), 1) for k in range(-2, 3)],
        median_cycles=round(median, 1),
        status="fault" if status == "failed" else "ok",
        device_s=round(0.25 + (index % 11) * 0.125, 3),
        toolchain=OLD,
        finished_at=clock.tick(),
    )
    tree.runs.append((run, version.sha))
    if parent is None or parent not in tree.cycles_of or status == "failed":
        return
    ratio = round(median / tree.cycles_of[parent], 6)
    comparison = Comparison(
        id=f"{design.id}-cmp",
        kernel=tree.kernel,
        ratio=ratio,
        ci_low=round(ratio * 0.98, 6),
        ci_high=round(ratio * 1.02, 6),
        p_value=0.001 if status == "accepted" else 0.4,
        pairs=8,
        method="paired-log-ratio",
        decision="accept" if status == "accepted" else "reject",
        decided_at=clock.tick(),
    )
    tree.nodes.append(comparison)
    tree.links += [
        Link(Ref.to(comparison), "CANDIDATE", Ref.to(design)),
        Link(Ref.to(comparison), "INCUMBENT", Ref("DesignNode", parent)),
        Link(Ref.to(comparison), "USED", Ref.to(run)),
        Link(Ref.to(comparison), "CREATED_BY", Ref.to(judge)),
    ]


class _Clock:
    """Deterministic timestamps, one second apart, so both backends hold identical data."""

    def __init__(self) -> None:
        self._now = EPOCH

    def tick(self) -> str:
        self._now += timedelta(seconds=1)
        return to_iso(self._now)


def sample_query_params(summary: SampleSummary) -> dict[str, dict[str, str]]:
    """Parameters that make every named query return rows on the sample graph."""
    return {
        "rules-in-force": {"toolchain": NEW},
        "measurements-of": {"param": summary.params[1]},
        "best-lineage": {"kernel": summary.kernels[2]},
        "accepted-changes": {"kernel": summary.kernels[0]},
        "designs-consulting": {"fact": summary.consulted_fact},
        "toolchain-diff": {"from": OLD, "to": NEW},
        "dsl-summary": {"toolchain": NEW},
    }
