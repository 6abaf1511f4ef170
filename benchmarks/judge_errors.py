"""The judge's errors and what its decisions cost, on designs of known true ratios.

    python benchmarks/judge_errors.py [--kernel sliding_attention_output] [--decisions 300 | old=150,sprt=300,...]
                                      [--ratios 1.02,1.01,1.005,1.0,0.995,0.99,0.98,0.95]
                                      [--judges old,sprt,sprt-graded-first] [--sigma 0.03] [--json FILE]

Each decision runs as the loop runs it: a design is BEST (measured by its graded run some minutes
earlier), and a candidate goes through the design lifecycle (`DesignLifecycle.advance`) with the
loop's decider (`JudgeAgainstBest`) on the simulated device, every job recorded in an embedded graph.
The candidate/incumbent pairs come from the kernel's design space (the pack's `design_space(spec)`
under its default facts); the harness knows their true cycles
(`chiplore.simulator.cost.estimate`), and picks, for each true ratio asked, the fastest few pairs
within 0.1 % of it. Each decision's two designs are fresh designs of the graph (their sources carry a
comment the device is not shown, so its caches serve them).

The judges: `old` is the judge before issue 32 (graded run, early look on the graded medians, then
interleaved pairs of median-of-25 jobs and a Bonferroni t-interval that must lie below -0.5 %);
`sprt` the builtin `SequentialJudge` (its SPRT on pairs of 50-run jobs before the graded run, which
only a winner pays for); `sprt-graded-first` the same test after the graded run (no triage).

Printed per true ratio and judge: how often the candidate was accepted, the device jobs (DeviceRun
nodes) and device-seconds its decision used (median and mean; the incumbent's earlier graded run is
not counted), and how many were rejected before their graded run. `--sigma` is the noise the judge is
told (learning measures the default chip's 3 % within a few percent); a lower value shows how it
fares when learning under-measures the noise.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.stats import binomtest
from scipy.stats import t as student_t

from chiplore.agents.acceptance import JudgeAgainstBest
from chiplore.agents.callbacks import Events, RecordRuns
from chiplore.agents.judge import Judge, PairPlan, PairRunner, SequentialJudge, Verdict, early
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import DesignLifecycle
from chiplore.agents.runner import DeviceRunner
from chiplore.agents.screens import Candidate, Screener
from chiplore.core.ids import content_sha
from chiplore.core.pack import points
from chiplore.core.target import DeviceJob, DeviceResult, JobHandle
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import Activity, DesignNode, Kernel, KernelVersion
from chiplore.kg.repo.designs import add_design, get_design, register_kernel, set_best
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.simulator.cost import NotCompiled, estimate
from chiplore.simulator.device.device import DeviceConfig
from chiplore.simulator.target import SimRNGD

VERSION = "0.6.0"
RATIOS = (1.02, 1.01, 1.005, 1.0, 0.995, 0.99, 0.98, 0.95)
WITHIN = 0.001  # a pair's true ratio is within 0.1 % of the one asked
PAIRS_PER_RATIO = 4  # the fastest such pairs (each new program costs a host grading once)
SAMPLE = 240  # designs of the space whose true cycles are computed
TAG = "\n// judge_errors decision "
RESULTS = Path(__file__).parent / "results"
console = Console(width=150)


# ---- the judge before issue 32 (agents/judge.py at 3046240), for comparison --------------------------

OLD_FIRST_LOOK, OLD_LOOK_EVERY, OLD_MAX_PAIRS, OLD_ALPHA, OLD_MIN_GAIN = 6, 3, 24, 0.05, 0.005
OLD_LOOKS = 1 + (OLD_MAX_PAIRS - OLD_FIRST_LOOK) // OLD_LOOK_EVERY


@dataclass(frozen=True)
class OldJudge(Judge):
    """Graded medians first, then median-of-25 pairs and a Bonferroni t-interval below -0.5 %."""

    pair_plan: PairPlan = field(default=PairPlan(repeats=25, statistic=statistics.median, spread=1.2533))

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        first = early(candidate, best, sigma)
        if first.decision == "continue" or (late and first.decision == "accept"):
            return self._ab_test(run_pair)
        return first

    def _ab_test(self, run_pair: PairRunner) -> Verdict:
        logs: list[float] = []
        runs: list[str] = []
        for index in range(OLD_MAX_PAIRS):
            pair = run_pair(index)
            if pair is None:
                break
            logs.append(math.log(pair[0] / pair[1]))
            runs.extend(pair[2])
            if len(logs) >= OLD_FIRST_LOOK and (len(logs) - OLD_FIRST_LOOK) % OLD_LOOK_EVERY == 0:
                verdict = self._look(logs, runs, final=False)
                if verdict.decision != "continue":
                    return verdict
        if len(logs) < 2:
            return Verdict("inconclusive", "paired-t", 1.0, 0.0, math.inf, 1.0, len(logs), tuple(runs), tuple(logs))
        return self._look(logs, runs, final=True)

    @staticmethod
    def _look(logs: list[float], runs: list[str], *, final: bool) -> Verdict:
        values = np.asarray(logs)
        n = len(values)
        mean, spread = float(values.mean()), float(values.std(ddof=1)) / math.sqrt(n)
        half = float(student_t.ppf(1 - OLD_ALPHA / OLD_LOOKS / 2, n - 1)) * spread
        threshold = math.log(1 - OLD_MIN_GAIN)
        decision = "accept" if mean + half < threshold else "reject" if mean - half > threshold else "continue"
        if decision == "continue" and final:
            decision = "inconclusive"
        return Verdict(decision, "paired-t", math.exp(mean), math.exp(mean - half), math.exp(mean + half), 1.0, n,  # type: ignore[arg-type]
                       tuple(runs), tuple(logs))  # fmt: skip


JUDGES: dict[str, Callable[[], object]] = {
    "old": OldJudge,
    "sprt": SequentialJudge,
    "sprt-graded-first": lambda: SequentialJudge(triage_pairs=0),
}


# ---- designs of known true ratios ---------------------------------------------------------------------


def true_cycles(source: str) -> float:
    try:
        return estimate(source, VERSION).cycles
    except NotCompiled:
        return math.inf


def designs(target: SimRNGD, kernel: str, seed: int) -> list[tuple[float, str]]:
    """A seeded sample of the kernel's space with true cycles, fastest first (cached in results/)."""
    cache = RESULTS / f"judge_designs_{kernel}_{seed}.json"
    if cache.exists():
        return [(float(c), s) for c, s in json.loads(cache.read_text())]
    spec = next(k for k in target.kernels() if k.name == kernel)
    space = target.pack().design_space(spec)
    if space is None:
        raise SystemExit(f"{target.name}'s pack has no design space for {kernel}")
    settings = list(points(space, {}))
    random.Random(seed).shuffle(settings)
    sources = sorted({space.source(p, {}, VERSION) for p in settings[:SAMPLE]})
    timed = sorted((c, s) for s in sources if math.isfinite(c := true_cycles(s)))
    RESULTS.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(timed))
    return timed


def pairs_at(timed: Sequence[tuple[float, str]], ratio: float) -> list[tuple[str, str, float]]:
    """(incumbent, candidate, true ratio) of the fastest incumbents with a candidate within WITHIN of `ratio`."""
    found: list[tuple[str, str, float]] = []
    used: set[str] = set()
    for c_inc, inc in timed:
        if inc in used:
            continue
        best = min(((abs(c / c_inc - ratio), c / c_inc, s) for c, s in timed if s != inc and s not in used),
                   default=None)  # fmt: skip
        if best is not None and best[0] <= WITHIN * ratio:
            found.append((inc, best[2], best[1]))
            used |= {inc, best[2]}
        if len(found) == PAIRS_PER_RATIO:
            break
    return found


# ---- the loop's path, on a device that is not shown the tags ------------------------------------------


class Untagged:
    """The simulated chip, with each program's decision tag cut before the device sees it."""

    def __init__(self, target: SimRNGD) -> None:
        self.target = target

    def submit(self, job: DeviceJob) -> JobHandle:
        return self.target.submit(job.model_copy(update={"program": job.program.split(TAG)[0]}))

    def result(self, handle: JobHandle) -> DeviceResult:
        return self.target.result(handle)


@dataclass
class Decision:
    judge: str
    asked: float  # the true ratio asked for
    ratio: float  # the pair's own
    decision: str
    jobs: int
    device_s: float
    before_graded: bool


class Bench:
    """One graph and one device for one judge: decisions one after another, as a kernel's would be."""

    def __init__(self, store: GraphStore, judge: str, kernel: str, seed: int, sigma: float) -> None:
        self.store, self.judge_name, self.kernel, self.sigma = store, judge, kernel, sigma
        self.target = SimRNGD(
            seed=seed, device=DeviceConfig(agent_budget_s_per_day=1e12)
        )  # a day's cap is not the point
        spec = next(k for k in self.target.kernels() if k.name == kernel)
        ensure_schema(store)
        register_target(store, self.target.name, self.target.toolchains(), self.target.default_toolchain())
        self.activity = record_activity(store, Activity(id=f"judge-bench-{judge}", role="runner", policy="builtin"))
        register_kernel(store, Kernel(name=kernel, target=self.target.name, weight_bytes=spec.weight_bytes,
                                      bound_cycles=spec.bound_cycles))  # fmt: skip
        self.jobs = 0

        def record(job: DeviceJob, sha: str, result: DeviceResult) -> str:
            self.jobs += 1
            return RecordRuns(store, self.activity)(job, sha, result)

        self.lease = Lease()
        self.runner = DeviceRunner(Untagged(self.target), record, budget_s=1e12, backoff_s=0.0)  # type: ignore[arg-type]
        self.decider = JudgeAgainstBest(store, kernel, VERSION, self.runner, JUDGES[judge](), sigma,  # type: ignore[arg-type]
                                        self.activity, Events(), self.lease)  # fmt: skip
        self.lifecycle = DesignLifecycle(store, kernel, VERSION, Screener([]), self.runner, self.decider,
                                         lambda node, source, params: Candidate(node.id, kernel, source, {}),
                                         Events(), self.lease)  # fmt: skip
        self.rng = random.Random(seed)
        self.count = 0

    def _design(self, source: str, parent: str | None) -> DesignNode:
        sha = content_sha(source)
        node = DesignNode(id=content_sha(f"{self.kernel}|{sha}")[:24], kernel=self.kernel,
                          role="refiner" if parent else "baseline", policy="builtin", depth=1 if parent else 0,
                          status="queued", owner=self.lease.owner, lease_until=self.lease.until())  # fmt: skip
        add_design(self.store, node, version=KernelVersion(sha=sha, kernel=self.kernel, source=source,
                                                           toolchain=VERSION),
                   parent=parent, activity=self.activity)  # fmt: skip
        return node

    def decide(self, incumbent: str, candidate: str, asked: float, ratio: float) -> Decision:
        self.count += 1
        tag = f"{TAG}{self.count}\n"
        incumbent, candidate = incumbent + tag, candidate + tag
        best = self._design(incumbent, None) if self.count == 1 else self._design(incumbent, self._root)
        if self.count == 1:
            self._root = best.id
        graded = self.runner.run(self.kernel, content_sha(incumbent), incumbent, VERSION)
        while not graded.ok:  # BEST was measured once; a fault here is not the decision's
            graded = self.runner.run(self.kernel, content_sha(incumbent), incumbent, VERSION)
        set_best(self.store, self.kernel, best.id, status="accepted", owner="", lease_until="",
                 measured_cycles=float(graded.result.median_cycles or 0))  # fmt: skip
        self.target.device.advance(self.rng.uniform(5, 600))  # the candidate comes later, as in the loop
        jobs, spent = self.jobs, self.runner.spent_s
        node = self._design(candidate, best.id)
        self.lifecycle.advance(node, candidate, None)
        decided = get_design(self.store, node.id)
        assert decided is not None
        graded_runs = self.store.read(
            "MATCH (:DesignNode {id: $id})-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun {fixtures: 'graded'}) "
            "RETURN count(r) AS n",
            {"id": node.id},
        )[0]["n"]
        verdict = "accept" if decided.status == "accepted" else decided.status
        return Decision(self.judge_name, asked, ratio, verdict, self.jobs - jobs, self.runner.spent_s - spent,
                        graded_runs == 0 and decided.status == "rejected")  # fmt: skip


def wilson(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    return ci.low, ci.high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", default="sliding_attention_output")
    parser.add_argument(
        "--decisions",
        default="300",
        help="per true ratio and judge: N for every judge, or judge=N,... (the old judge is slow)",
    )
    parser.add_argument("--ratios", default=",".join(map(str, RATIOS)))
    parser.add_argument("--judges", default=",".join(JUDGES))
    parser.add_argument("--sigma", type=float, default=0.03, help="the noise the judge is told (learning's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    judges = [j for j in args.judges.split(",") if j]
    if unknown := [j for j in judges if j not in JUDGES]:
        parser.error(f"unknown judge {', '.join(unknown)}; choose from {', '.join(JUDGES)}")
    ratios = [float(r) for r in args.ratios.split(",") if r]
    try:
        counts = (
            {j: int(args.decisions) for j in judges}
            if "=" not in args.decisions
            else {j: int(n) for j, _, n in (item.partition("=") for item in args.decisions.split(",") if item)}
        )
    except ValueError:
        parser.error(f"--decisions {args.decisions!r}: a number, or judge=number,...")
    if missing := [j for j in judges if j not in counts]:
        parser.error(f"--decisions names no count for {', '.join(missing)}")
    target = SimRNGD(seed=args.seed)
    timed = designs(target, args.kernel, args.seed)
    cases = {ratio: pairs_at(timed, ratio) for ratio in ratios}
    for ratio, found in cases.items():
        if not found:
            raise SystemExit(f"{args.kernel}'s sample has no two designs {ratio} apart (within {WITHIN:.1%})")
    results: list[Decision] = []
    start = time.perf_counter()
    for judge in judges:
        with tempfile.TemporaryDirectory() as data, EmbeddedStore(Path(data)) as store:
            bench = Bench(store, judge, args.kernel, args.seed, args.sigma)
            for ratio, found in cases.items():
                rng = random.Random(f"{args.seed}/{ratio}")
                for _ in range(counts[judge]):
                    incumbent, candidate, true_ratio = rng.choice(found)
                    results.append(bench.decide(incumbent, candidate, ratio, true_ratio))
                console.print(f"{judge} at {ratio}: {counts[judge]} decisions ({time.perf_counter() - start:.0f} s)")
    table = Table(title=f"the judge on {args.kernel} (sigma told {args.sigma}, seed {args.seed})")
    for column in ("true ratio", "judge", "decisions", "accepted [95 % CI]", "jobs (median)", "jobs (mean)",
                   "device-s (median)", "device-s (mean)", "rejected before graded"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("judge",) else "right")
    summary: dict[str, dict[str, float]] = {}
    for ratio in ratios:
        for judge in judges:
            rows = [r for r in results if r.judge == judge and r.asked == ratio]
            accepted = sum(r.decision == "accept" for r in rows)
            low, high = wilson(accepted, len(rows))
            true = statistics.mean(r.ratio for r in rows)
            entry = {"true_ratio": true, "accepted": accepted / len(rows), "ci_low": low, "ci_high": high,
                     "jobs_median": statistics.median(r.jobs for r in rows),
                     "jobs_mean": statistics.mean(r.jobs for r in rows),
                     "device_s_median": statistics.median(r.device_s for r in rows),
                     "device_s_mean": statistics.mean(r.device_s for r in rows),
                     "before_graded": sum(r.before_graded for r in rows) / len(rows)}  # fmt: skip
            summary[f"{ratio}/{judge}"] = entry
            table.add_row(f"{true:.4f}", judge, str(len(rows)), f"{entry['accepted']:.1%} [{low:.1%}, {high:.1%}]",
                          f"{entry['jobs_median']:.0f}", f"{entry['jobs_mean']:.1f}",
                          f"{entry['device_s_median']:.1f}", f"{entry['device_s_mean']:.1f}",
                          f"{entry['before_graded']:.0%}")  # fmt: skip
    console.print(table)
    overall = Table(title="every decision above (all true ratios together)")
    for column in ("judge", "decisions", "jobs (median)", "device-s (median)", "device-s (mean)"):
        overall.add_column(column, justify="left" if column == "judge" else "right")
    for judge in judges:
        rows = [r for r in results if r.judge == judge]
        overall.add_row(judge, str(len(rows)), f"{statistics.median(r.jobs for r in rows):.0f}",
                        f"{statistics.median(r.device_s for r in rows):.1f}",
                        f"{statistics.mean(r.device_s for r in rows):.1f}")  # fmt: skip
    console.print(overall)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "decisions": [r.__dict__ for r in results]}, indent=1))


if __name__ == "__main__":
    main()
