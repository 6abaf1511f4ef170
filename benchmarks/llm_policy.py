"""What the knowledge is worth to a model: chiplore's LLM architect and refiner on any OpenAI-compatible
endpoint, given all the knowledge the graph holds, and given it with each kind withheld in turn.

    python benchmarks/llm_policy.py --base-url URL --model openai:NAME [--api-key-env VAR]
        [--kernels K,...] [--proposals 2] [--conditions all,no-summary,no-rules,no-measurements,no-docs]
        [--seed 0] [--toolchain 0.6.0] [--prompt-tokens N] [--max-tokens N] [--attempts 3] [--timeout S]
        [--usd-per-mtok IN OUT] [--out DIR]

SimRNGD is learnt once (the builtin librarian, seeded) into OUT/learnt, each kernel's baseline is
measured there, and the endpoint's structured output is discovered there (agents/llm/output.py).
Each condition then optimizes its own copy of that graph with the LLM architect and refiner, each
held to `--proposals` proposals per kernel; the loop's screens and judge decide, as in any run.
Conditions: `all` (every kind of knowledge), `no-summary` (the checked language summary),
`no-rules` (the rules in force), `no-measurements` (the measurements and the measured bound),
`no-docs` (the docs' checked claims, and the docs search): what is withheld leaves the prompt and
the tools (LLMConfig.withhold). With `--prompt-tokens` the prompt keeps within that many tokens, so
what one kind leaves free the others may fill (a small model's context leaves no other choice).

Per condition, role and kernel: the proposals; the answers that parse (a program came back), that
compile (the compile screen passed), that pass the host test, that the judge accepted; the model
calls behind them with their tokens, latency and cost estimate (`--usd-per-mtok`). Seeded (the
chip, the loop, and the endpoint's sampling where it takes a seed). Resumable: OUT/results.json
keeps every finished condition, which a rerun does not repeat; an interrupted condition goes on from
its graph (the loop finishes half-done designs, and the proposals already made count). Prints the
table and writes OUT/llm_policy.png.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from rich.console import Console
from rich.table import Table

from chiplore.agents.llm.config import KNOWLEDGE_KINDS, LLMConfig
from chiplore.agents.llm.output import output_mode
from chiplore.agents.llm.policy import LLMPolicy, chat_model
from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.proposers import DesignProposal, KernelView, Role
from chiplore.agents.schedule import OptimizeConfig, Roles
from chiplore.ingest.learn import learn
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD

console = Console(width=200)
CONDITIONS = ("all", *(f"no-{kind}" for kind in KNOWLEDGE_KINDS))
STAGES = ("parse", "compile", "host test", "accepted")
NOT_PARSED = ("malformed answer", "the endpoint refused the request", "no answer within")


@dataclass
class Nothing:
    """A role that proposes nothing (the baseline is measured before the conditions copy the graph)."""

    role: Role
    name: str = "none"

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        return []

    def why_empty(self, view: KernelView) -> str:
        return "the benchmark measures the baseline only"


@dataclass
class Limited:
    """The LLM policy held to `limit` proposals per kernel (counting those an interrupted run made)."""

    policy: LLMPolicy
    limit: int
    store: GraphStore
    made: dict[str, int] = field(default_factory=dict)
    name: str = "llm"

    @property
    def role(self) -> Role:
        return self.policy.role

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        if view.kernel not in self.made:
            rows = self.store.read("MATCH (d:DesignNode {kernel: $k, role: $r, policy: 'llm'}) RETURN count(d) AS n",
                                   {"k": view.kernel, "r": self.role})  # fmt: skip
            self.made[view.kernel] = int(rows[0]["n"])
        room = min(count, self.limit - self.made[view.kernel])
        out = self.policy.propose(view, room) if room > 0 else []
        self.made[view.kernel] += len(out)
        return out

    def why_empty(self, view: KernelView) -> str:
        return self.policy.why_empty(view) or f"{self.limit} proposals made"


def config_of(args: argparse.Namespace, condition: str) -> LLMConfig:
    withheld = () if condition == "all" else (condition.removeprefix("no-"),)
    return LLMConfig(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env, seed=args.seed,
                     temperature=args.temperature, timeout_s=args.timeout, attempts=args.attempts, token_budget=0,
                     prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens, withhold=withheld,
                     usd_per_mtok_in=args.usd_per_mtok[0], usd_per_mtok_out=args.usd_per_mtok[1])  # fmt: skip


def prepare(args: argparse.Namespace, kernels: tuple[str, ...]) -> Path:
    """The learnt graph with each kernel's baseline measured and the endpoint's mode found (once)."""
    learnt = args.out / "learnt"
    done = learnt / ".prepared"
    if done.exists():
        return learnt
    target = SimRNGD(seed=args.seed)
    began = time.perf_counter()
    with EmbeddedStore(learnt) as store:
        ensure_schema(store)
        register_target(store, target.name, target.toolchains(), args.toolchain)
        learn(store, target, args.toolchain)
        optimize(OptimizeContext(store, target, args.toolchain), OptimizeConfig(kernels=kernels, seed=args.seed),
                 Roles(architect=Nothing("architect"), refiner=Nothing("refiner")))  # fmt: skip
        config = config_of(args, "all")
        mode = output_mode(chat_model(config), config, store)
    done.write_text(json.dumps({"mode": mode, "prepare_s": round(time.perf_counter() - began, 1)}))
    console.print(f"learnt SimRNGD {args.toolchain}, measured the baselines, the endpoint answers in {mode} "
                  f"({time.perf_counter() - began:,.0f} s)")  # fmt: skip
    return learnt


def run_condition(args: argparse.Namespace, condition: str, kernels: tuple[str, ...], learnt: Path) -> list[dict]:
    """One condition on its own copy of the learnt graph; its rows."""
    graph = args.out / "graphs" / condition
    if not graph.exists():
        shutil.copytree(learnt, graph)
    target = SimRNGD(seed=args.seed)
    config = config_of(args, condition)
    began = time.perf_counter()
    with EmbeddedStore(graph) as store:
        model = chat_model(config)
        architect = LLMPolicy("architect", config, store, target, model=model)
        refiner = LLMPolicy("refiner", config, store, target, architect.budget, model=model)
        roles = Roles(
            architect=Limited(architect, args.proposals, store), refiner=Limited(refiner, args.proposals, store)
        )
        optimize(OptimizeContext(store, target, args.toolchain),
                 OptimizeConfig(kernels=kernels, seed=args.seed, patience=2 * args.proposals + 1), roles)  # fmt: skip
        rows = collect(store, condition, kernels)
    console.print(f"  {condition}: {time.perf_counter() - began:,.0f} s")
    return rows


def collect(store: GraphStore, condition: str, kernels: tuple[str, ...]) -> list[dict]:
    """Per role and kernel: the LLM designs, how far each got, and the model calls behind them."""
    designs = store.read(
        "MATCH (d:DesignNode {policy: 'llm'}) OPTIONAL MATCH (d)-[:CREATED_BY]->(a:Activity {policy: 'llm'}) "
        "WITH d, count(a) AS calls, sum(coalesce(a.prompt_tokens, 0)) AS p, "
        "sum(coalesce(a.completion_tokens, 0)) AS c, sum(coalesce(a.latency_s, 0.0)) AS l, "
        "sum(coalesce(a.cost_usd, 0.0)) AS usd "
        "RETURN d.id AS id, d.kernel AS kernel, d.role AS role, d.status AS status, d.reason AS reason, "
        "calls, p, c, l, usd"
    )
    passed = store.read("MATCH (s:Screening) WHERE s.design IN $ids AND s.passed RETURN s.design AS d, s.check AS c",
                        {"ids": [d["id"] for d in designs]})  # fmt: skip
    checks: dict[str, set[str]] = {}
    for row in passed:
        checks.setdefault(row["d"], set()).add(row["c"])
    rows = []
    for role in ("architect", "refiner"):
        for kernel in kernels:
            mine = [d for d in designs if d["role"] == role and d["kernel"] == kernel]
            rows.append({
                "condition": condition, "role": role, "kernel": kernel, "proposals": len(mine),
                "parse": sum(not (d["status"] == "failed" and str(d["reason"]).startswith(NOT_PARSED)) for d in mine),
                "compile": sum("compile" in checks.get(d["id"], set()) for d in mine),
                "host test": sum("host_test" in checks.get(d["id"], set()) for d in mine),
                "accepted": sum(d["status"] == "accepted" for d in mine),
                "calls": sum(int(d["calls"]) for d in mine), "prompt_tokens": sum(int(d["p"]) for d in mine),
                "completion_tokens": sum(int(d["c"]) for d in mine),
                "latency_s": round(sum(float(d["l"]) for d in mine), 1),
                "cost_usd": round(sum(float(d["usd"]) for d in mine), 6),
                "reasons": sorted({str(d["reason"])[:80] for d in mine if d["status"] in ("failed", "screened_out")}),
            })  # fmt: skip
    return rows


def show(rows: list[dict], title: str) -> None:
    table = Table(title=title)
    for column in ("condition", "role", "kernel", "proposals", *STAGES, "calls", "prompt tok", "completion tok",
                   "latency s", "USD"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("condition", "role", "kernel") else "right")
    for r in rows:
        table.add_row(r["condition"], r["role"], r["kernel"], str(r["proposals"]), *(str(r[s]) for s in STAGES),
                      str(r["calls"]), f"{r['prompt_tokens']:,}", f"{r['completion_tokens']:,}",
                      f"{r['latency_s']:,.0f}", f"{r['cost_usd']:.4f}")  # fmt: skip
    console.print(table)


def totals(rows: list[dict]) -> list[dict]:
    """One row per condition and role, over the kernels."""
    out = []
    for condition in dict.fromkeys(r["condition"] for r in rows):
        for role in ("architect", "refiner"):
            mine = [r for r in rows if r["condition"] == condition and r["role"] == role]
            summed: dict[str, Any] = {"condition": condition, "role": role, "kernel": "(all)"}
            for key in ("proposals", *STAGES, "calls", "prompt_tokens", "completion_tokens", "latency_s", "cost_usd"):
                summed[key] = sum(r[key] for r in mine)
            out.append(summed)
    return out


def figure(rows: list[dict], path: Path, title: str) -> None:
    """Each stage's share of the proposals, per condition, one panel per role."""
    summed = totals(rows)
    conditions = list(dict.fromkeys(r["condition"] for r in summed))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    width = 0.8 / len(STAGES)
    for ax, role in zip(axes, ("architect", "refiner"), strict=True):
        for i, stage in enumerate(STAGES):
            shares = []
            for condition in conditions:
                row = next(r for r in summed if r["condition"] == condition and r["role"] == role)
                shares.append(row[stage] / row["proposals"] if row["proposals"] else 0.0)
            ax.bar([c + i * width for c in range(len(conditions))], shares, width, label=stage)
        ax.set_xticks([c + 0.4 - width / 2 for c in range(len(conditions))], conditions, rotation=20)
        ax.set_title(role)
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("share of the proposals")
    axes[1].legend(loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="an OpenAI-compatible endpoint (…/v1)")
    parser.add_argument("--model", required=True, help="LangChain's provider:model, e.g. openai:my-model")
    parser.add_argument("--api-key-env", default=None, help="the variable holding the endpoint's key")
    parser.add_argument("--kernels", default="sliding_attention_output")
    parser.add_argument("--proposals", type=int, default=2, help="per role and kernel")
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--toolchain", default="0.6.0")
    parser.add_argument("--temperature", type=float, default=0.2)
    parser.add_argument("--prompt-tokens", type=int, default=0, help="the prompt's budget (0: all of it)")
    parser.add_argument("--max-tokens", type=int, default=0, help="the most one answer may take (0: the endpoint's)")
    parser.add_argument(
        "--attempts", type=int, default=3, help="answers per proposal (malformed or illegal ones go back)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one model call may take")
    parser.add_argument("--usd-per-mtok", type=float, nargs=2, default=(0.0, 0.0), metavar=("IN", "OUT"))
    parser.add_argument("--out", type=Path, default=Path("llm-policy-bench"))
    args = parser.parse_args()
    conditions = [c for c in args.conditions.split(",") if c]
    unknown = sorted(set(conditions) - set(CONDITIONS))
    if unknown:
        parser.error(f"unknown condition {unknown[0]!r}; known: {', '.join(CONDITIONS)}")
    kernels = tuple(k for k in args.kernels.split(",") if k)
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "results.json"
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.exists() else {}
    learnt = prepare(args, kernels)
    for condition in conditions:
        if condition in results:
            continue
        results[condition] = run_condition(args, condition, kernels, learnt)
        results_path.write_text(json.dumps(results, indent=1))
    rows = [row for condition in conditions for row in results[condition]]
    mode = json.loads((learnt / ".prepared").read_text())["mode"]
    title = (
        f"{args.model} at {args.base_url} ({mode}), seed {args.seed}, {args.proposals} proposals per role and kernel"
    )
    show(rows, title)
    show(totals(rows), "over the kernels")
    figure(rows, args.out / "llm_policy.png", title)
    console.print(f"figure: {args.out / 'llm_policy.png'}; rows with each failure's reasons: {results_path}")


if __name__ == "__main__":
    main()
