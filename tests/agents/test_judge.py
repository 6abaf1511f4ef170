"""The judge: its sequential test on A/B pairs of known true ratios (runs drawn from the simulated
device's noise model), and, in the graph, a loser dropped before its graded run and a winner that
still gets one before it becomes BEST."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chiplore.agents.acceptance import TRIAGE, JudgeAgainstBest
from chiplore.agents.callbacks import Events, RecordRuns
from chiplore.agents.judge import (
    AB_REPEATS,
    LIMIT_METHOD,
    MAX_PAIRS,
    MIN_ACCEPT_PAIRS,
    PAIR_PLAN,
    PairRunner,
    SequentialJudge,
    Verdict,
    early,
    gain_shown,
    pair_spread,
    sequential,
    triage,
    trimmed_cycles,
)
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import DesignLifecycle
from chiplore.agents.runner import DeviceRunner
from chiplore.agents.screens import Candidate, Screener
from chiplore.core.ids import content_sha
from chiplore.core.pack import points
from chiplore.kg.models import Activity, DesignNode, Kernel, KernelVersion
from chiplore.kg.repo.designs import add_design, best_of, get_design, register_kernel, set_best
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.repo.progress import best_history
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD

VERSION = "0.6.0"
SIGMA = 0.03  # the simulated device's run-to-run noise, as learning measures it
O_PROJ = "sliding_attention_output"


def _pairs(true_ratio: float, seed: int, *, job_noise: float = 0.0) -> PairRunner:
    """Pairs of jobs of AB_REPEATS runs each: log-normal runs with 2 % slow outliers, a drift both
    sides share, and (`job_noise`) a spread between jobs that learning's noise does not show."""
    rng = np.random.default_rng(seed)

    def job(scale: float) -> float:
        runs = scale * np.exp(rng.normal(0, SIGMA, AB_REPEATS) + rng.normal(0, job_noise))
        runs *= np.where(rng.random(AB_REPEATS) < 0.02, rng.uniform(1.1, 1.6, AB_REPEATS), 1.0)
        return trimmed_cycles(runs)

    def run_pair(index: int) -> tuple[float, float, tuple[str, ...]]:
        drift = math.exp(rng.normal(0, 0.02))
        return job(100_000 * true_ratio * drift), job(100_000 * drift), (f"c{index}", f"i{index}")

    return run_pair


def test_the_early_look_decides_only_clear_differences() -> None:
    assert early(70_000, 100_000, SIGMA).decision == "accept"
    assert early(110_000, 100_000, SIGMA).decision == "reject"
    assert early(98_000, 100_000, SIGMA).decision == "continue"


def test_a_real_gain_is_accepted_and_no_loss_ever_is() -> None:
    gains = [sequential(_pairs(0.98, seed), SIGMA).decision for seed in range(40)]
    assert gains.count("accept") >= 39
    losses = [sequential(_pairs(1.005, seed), SIGMA).decision for seed in range(200)]
    assert "accept" not in losses
    verdict = sequential(_pairs(0.99, 3), SIGMA)
    assert len(verdict.run_ids) == 2 * verdict.pairs and len(verdict.samples) == verdict.pairs


def test_a_true_one_percent_gain_is_accepted_most_of_the_time_in_a_few_pairs() -> None:
    verdicts = [sequential(_pairs(0.99, seed), SIGMA) for seed in range(100)]
    assert sum(v.decision == "accept" for v in verdicts) >= 80
    assert float(np.median([v.pairs for v in verdicts])) <= 6


def test_a_clear_loss_is_dropped_on_its_first_pair_and_a_win_needs_two() -> None:
    lost = triage(_pairs(1.05, 0), SIGMA)
    assert (lost.decision, lost.pairs) == ("reject", 1) and lost.ratio > 1.03
    won = sequential(_pairs(0.80, 0), SIGMA)
    assert (won.decision, won.pairs) == ("accept", MIN_ACCEPT_PAIRS)
    assert won.ci_high < 1.0  # the recorded interval of an accept lies below 1


def test_pairs_noisier_than_the_measured_noise_widen_the_test_and_never_narrow_it() -> None:
    prior = PAIR_PLAN.pair_sigma(SIGMA)
    assert pair_spread([0.0, 0.0, 0.0], prior) == prior
    assert pair_spread([0.03, -0.03, 0.03, -0.03], prior) > 2 * prior
    # equal designs on a device with as much noise between jobs as a pair's: rarely accepted
    accepted = sum(sequential(_pairs(1.0, seed, job_noise=0.0045), SIGMA).decision == "accept" for seed in range(200))
    assert accepted <= 6


def test_a_gain_the_pairs_show_at_their_limit_is_taken_and_no_gain_rarely_is() -> None:
    """A 0.5 % gain sits between the SPRT's hypotheses: after 12 pairs it was left open, then dropped,
    though its interval lay below 1 (a user saw 0.993 [0.990, 0.997], p = 0.003, rejected). Run to its
    own limit, the test takes a gain the pairs show beyond a one-sided bound at half the accept error,
    under a method of its own; equal designs are so accepted at about that rate, and a triage cut to
    fewer pairs leaves the candidate to the decision after its graded run."""
    prior = PAIR_PLAN.pair_sigma(SIGMA)
    half = [sequential(_pairs(0.995, seed), SIGMA) for seed in range(400)]
    at_limit = [v for v in half if v.method == LIMIT_METHOD]
    assert sum(v.decision == "accept" for v in half) >= 140 and len(at_limit) >= 40
    assert all(v.decision == "accept" and v.pairs == MAX_PAIRS and v.ci_high < 1 for v in at_limit)
    assert all(gain_shown(v.samples, prior) for v in at_limit)
    equal = [sequential(_pairs(1.0, seed), SIGMA) for seed in range(2000)]
    assert sum(v.method == LIMIT_METHOD for v in equal) <= 12  # 0.5 % of 2,000 is 10
    assert not any(triage(_pairs(0.995, seed), SIGMA, max_pairs=4).method == LIMIT_METHOD for seed in range(200))
    assert not gain_shown([-0.01], 0.001)  # one pair never shows a gain


def test_a_chip_whose_runs_never_vary_is_judged_without_dividing_by_zero() -> None:
    """Learning measures a sigma of 0 on such a chip; pairs that agree exactly must not crash the SPRT."""
    same = sequential(lambda index: (100_000.0, 100_000.0, (f"c{index}", f"i{index}")), 0.0)
    assert same.decision == "reject" and math.isfinite(same.ci_high)
    faster = sequential(lambda index: (98_000.0, 100_000.0, (f"c{index}", f"i{index}")), 0.0)
    assert faster.decision == "accept" and faster.pairs == MIN_ACCEPT_PAIRS
    assert early(99_000, 100_000, 0.0).decision == "continue"  # 1 % is within even a quiet chip's drift


def test_the_test_stops_when_the_budget_does() -> None:
    verdict = sequential(lambda index: None, SIGMA)
    assert verdict.decision == "inconclusive" and verdict.pairs == 0
    assert triage(lambda index: None, SIGMA).decision == "continue"  # the graded run and `decide` go on


def test_a_triage_cut_short_leaves_the_rest_to_the_decision_after_the_graded_run() -> None:
    judge = SequentialJudge(triage_pairs=1)
    verdict = judge.triage(SIGMA, _pairs(0.995, 1))
    assert verdict.pairs == 1 and verdict.decision in ("continue", "reject")
    assert SequentialJudge(triage_pairs=0).triage(SIGMA, _pairs(0.5, 1)).pairs == 0


# ---- in the graph: the lifecycle with the judge on the simulated device -------------------------------


def _design(store: GraphStore, kernel: str, source: str, activity: Activity, lease: Lease, parent: str | None,
            status: str) -> DesignNode:  # fmt: skip
    sha = content_sha(source)
    node = DesignNode(id=content_sha(f"{kernel}|{sha}")[:24], kernel=kernel, role="architect" if parent else "baseline",
                      policy="builtin", depth=1 if parent else 0, status=status, owner=lease.owner,
                      lease_until=lease.until())  # type: ignore[arg-type]  # fmt: skip
    add_design(store, node, version=KernelVersion(sha=sha, kernel=kernel, source=source, toolchain=VERSION),
               parent=parent, activity=activity)  # fmt: skip
    return node


def _decide(graph: GraphStore, incumbent: str, candidate: str) -> tuple[DesignNode, DesignNode]:
    """`incumbent` measured and BEST, then `candidate` taken through the lifecycle as the loop does."""
    target = SimRNGD(seed=8)
    spec = next(k for k in target.kernels() if k.name == O_PROJ)
    activity = record_activity(graph, Activity(id="judge-test", role="runner", policy="builtin"))
    register_kernel(graph, Kernel(name=O_PROJ, target=target.name, weight_bytes=spec.weight_bytes,
                                  bound_cycles=spec.bound_cycles))  # fmt: skip
    lease = Lease()
    runner = DeviceRunner(target, RecordRuns(graph, activity), budget_s=600.0, backoff_s=0.0)
    best = _design(graph, O_PROJ, incumbent, activity, lease, None, "queued")
    graded = runner.run(O_PROJ, content_sha(incumbent), incumbent, VERSION)
    set_best(graph, O_PROJ, best.id, status="accepted", measured_cycles=float(graded.result.median_cycles or 0),
             owner="", lease_until="")  # fmt: skip
    judge = JudgeAgainstBest(graph, O_PROJ, VERSION, runner, SequentialJudge(), SIGMA, activity, Events(), lease)
    lifecycle = DesignLifecycle(graph, O_PROJ, VERSION, Screener([]), runner, judge,
                                lambda node, source, params: Candidate(node.id, O_PROJ, source, {}), Events(),
                                lease)  # fmt: skip
    node = _design(graph, O_PROJ, candidate, activity, lease, best.id, "queued")
    lifecycle.advance(node, candidate, None)
    decided = get_design(graph, node.id)
    assert decided is not None
    return decided, best


def _runs(graph: GraphStore, design: str) -> list[dict[str, object]]:
    return graph.read(
        "MATCH (:DesignNode {id: $id})-[:HAS_VERSION]->(:KernelVersion)<-[:RAN]-(r:DeviceRun) "
        "RETURN r.fixtures AS fixtures, r.id AS id",
        {"id": design},
    )


def _comparison(graph: GraphStore, design: str) -> dict[str, object]:
    [row] = graph.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(:DesignNode {id: $id}) OPTIONAL MATCH (c)-[:USED]->(r:DeviceRun) "
        "RETURN c.method AS method, c.decision AS decision, c.pairs AS pairs, collect(r.id) AS used",
        {"id": design},
    )
    return row


@pytest.fixture(scope="module")
def programs() -> tuple[str, str]:
    """The official baseline of the O projection and a design of its space over 5x faster."""
    target = SimRNGD()
    spec = next(k for k in target.kernels() if k.name == O_PROJ)
    space = target.pack().design_space(spec)
    assert space is not None
    setting = next(iter(points(space, {})))
    return spec.baseline_source, space.source(setting, {}, VERSION)


def test_a_loser_is_rejected_without_its_graded_run_and_the_jobs_it_used_are_recorded(
    graph: GraphStore, programs: tuple[str, str]
) -> None:
    slow, fast = programs
    decided, best = _decide(graph, incumbent=fast, candidate=slow)
    assert decided.status == "rejected" and "before the graded run" in decided.reason
    assert decided.measured_cycles is not None  # its pairs' runs calibrate the cost model all the same
    runs = _runs(graph, decided.id)
    assert runs and all(run["fixtures"] == "smoke" for run in runs)  # no graded run was paid for
    comparison = _comparison(graph, decided.id)
    assert comparison["method"] == f"sprt, {TRIAGE}" and comparison["decision"] == "reject"
    assert comparison["pairs"] == 1 and {run["id"] for run in runs} <= set(comparison["used"])  # type: ignore[arg-type]
    current = best_of(graph, O_PROJ)
    assert current is not None and current.id == best.id


def test_a_winner_gets_its_graded_run_before_it_becomes_best(graph: GraphStore, programs: tuple[str, str]) -> None:
    slow, fast = programs
    decided, root = _decide(graph, incumbent=slow, candidate=fast)
    assert decided.status == "accepted"
    assert {run["fixtures"] for run in _runs(graph, decided.id)} == {"smoke", "graded"}
    comparison = _comparison(graph, decided.id)
    assert comparison["decision"] == "accept" and comparison["pairs"] == MIN_ACCEPT_PAIRS
    current = best_of(graph, O_PROJ)
    assert current is not None and current.id == decided.id
    # the anytime curve: BEST from the root's graded run on, the winner once its graded run is in
    history = best_history(graph, O_PROJ)
    assert [design for _, design, _ in history] == [root.id, decided.id]
    assert 0 < history[0][0] < history[1][0] and history[1][2] == fast


class _AnotherRunAcceptsMeanwhile(SequentialJudge):
    """The sequential judge, beside another run on the graph: no early triage, and while the first
    decision's pairs run, the other run makes `other` BEST."""

    def __init__(self, graph: GraphStore, other: DesignNode, cycles: float) -> None:
        super().__init__()
        self.graph, self.other, self.cycles, self.decisions = graph, other, cycles, 0

    def triage(self, sigma: float, run_pair: PairRunner) -> Verdict | None:
        return None

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        verdict = super().decide(candidate, best, sigma, late=late, run_pair=run_pair)
        self.decisions += 1
        if self.decisions == 1:
            set_best(self.graph, O_PROJ, self.other.id, status="accepted", measured_cycles=self.cycles)
        return verdict


def test_a_verdict_against_a_best_another_run_replaced_meanwhile_is_judged_again(
    graph: GraphStore, programs: tuple[str, str]
) -> None:
    """Two runs on one graph: a design accepted against BEST after another run had replaced it was made
    BEST all the same (a design accepted against a stale BEST). Its verdict now decides nothing, it is
    judged again against the new BEST, and its check sets run once."""
    slow, fast = programs
    target = SimRNGD(seed=8)
    spec = next(k for k in target.kernels() if k.name == O_PROJ)
    activity = record_activity(graph, Activity(id="judge-test", role="runner", policy="builtin"))
    register_kernel(graph, Kernel(name=O_PROJ, target=target.name, weight_bytes=spec.weight_bytes,
                                  bound_cycles=spec.bound_cycles))  # fmt: skip
    lease, runner = Lease(), DeviceRunner(target, RecordRuns(graph, activity), budget_s=900.0, backoff_s=0.0)
    baseline = _design(graph, O_PROJ, slow, activity, lease, None, "queued")
    cycles = float(runner.run(O_PROJ, content_sha(slow), slow, VERSION).result.median_cycles or 0)
    set_best(graph, O_PROJ, baseline.id, status="accepted", measured_cycles=cycles, owner="", lease_until="")
    other_source = slow + "\n// the other run's design: the baseline's program, one comment longer\n"
    other = _design(graph, O_PROJ, other_source, activity, lease, baseline.id, "measured")
    judge = _AnotherRunAcceptsMeanwhile(graph, other, cycles)
    decider = JudgeAgainstBest(graph, O_PROJ, VERSION, runner, judge, SIGMA, activity, Events(), lease,
                               check_sets=spec.check_sets)  # fmt: skip
    lifecycle = DesignLifecycle(graph, O_PROJ, VERSION, Screener([]), runner, decider,
                                lambda node, source, params: Candidate(node.id, O_PROJ, source, {}), Events(),
                                lease)  # fmt: skip
    node = _design(graph, O_PROJ, fast, activity, lease, baseline.id, "queued")
    assert spec.check_sets and lifecycle.advance(node, fast, None)  # accepted in the end, against the new BEST
    comparisons = graph.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(:DesignNode {id: $id}) MATCH (c)-[:INCUMBENT]->(i:DesignNode) "
        "RETURN i.id AS against, c.decision AS decision ORDER BY c.decided_at", {"id": node.id})  # fmt: skip
    assert comparisons == [{"against": baseline.id, "decision": "superseded"},
                           {"against": other.id, "decision": "accept"}]  # fmt: skip
    assert judge.decisions == 2 and best_of(graph, O_PROJ).id == node.id  # type: ignore[union-attr]
    checks = [r for r in _runs(graph, node.id) if r["fixtures"] not in ("graded", "smoke")]
    assert len(checks) == 1, checks  # the check sets do not depend on which BEST it beat
