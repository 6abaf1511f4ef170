"""The loop's decider: a design against BEST, by the judge, with A/B pairs on demand.

Before a design's graded run, a judge that triages (`Judge.triage`) compares it with BEST on A/B pairs: a
loser is rejected there, its graded run never made; the comparison is recorded with the jobs it
used. A winner, or a design the pairs left open, gets its graded run and then its decision, which
applies the recorded verdict or continues the test with the same pairs. Every comparison is
recorded with every run it used before its effect is applied, so a run killed in between applies
the recorded decision on resume instead of judging again. BEST's cycles are the median of all its
timed runs: the A/B pairs spread them over the device's drift.
"""

from __future__ import annotations

import math
import statistics
import uuid
from dataclasses import dataclass, field, replace

from chiplore.agents.callbacks import Events
from chiplore.agents.judge import LATE_STEP, Judge, PairRunner, Verdict
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import Decider
from chiplore.agents.runner import Outcome, Runner
from chiplore.core.ids import content_sha
from chiplore.kg.models import Activity, Comparison, DesignNode
from chiplore.kg.repo.designs import BestMoved, best_of, set_best, source_of, update_design
from chiplore.kg.repo.progress import pooled_cycles
from chiplore.kg.repo.runs import (
    graded_runs,
    last_accepted_ratio,
    latest_comparison,
    record_comparison,
    supersede_comparisons,
)
from chiplore.kg.store import GraphStore

TRIAGE = "before the graded run"  # how a comparison made on A/B pairs alone is recorded: "<method>, <TRIAGE>"
PAIR_ATTEMPTS = 2  # a pair whose job needed a retry is run again once: a reset moves the device's drift
Pair = tuple[float, float, tuple[str, ...]]


class CandidateFailed(Exception):
    """The candidate's own job failed in a pair (wrong outputs, or a fault it makes every time)."""


@dataclass
class JudgeAgainstBest(Decider):
    store: GraphStore
    kernel: str
    version: str
    runner: Runner
    judge: Judge
    noise_sigma: float
    activity: Activity
    events: Events
    lease: Lease
    check_sets: tuple[str, ...] = ()  # graded once before a design becomes BEST (KernelSpec.check_sets)
    # the pairs run so far per (candidate, incumbent): a triage's pairs serve the decision after the graded run
    _pairs: dict[tuple[str, str], list[Pair]] = field(default_factory=dict, init=False, repr=False)

    def triage(self, node: DesignNode, source: str) -> bool:
        """Before the graded run: the judge's test on A/B pairs against BEST. True when the design
        ended here (rejected, or failed in its own job), written and released."""
        store = self.store
        best = best_of(store, self.kernel)
        if best is None or best.id == node.id:
            return False
        verdict = self._recorded(node.id, best.id)  # (a killed run recorded the decision but not its effect)
        if verdict is None:
            supersede_comparisons(store, node.id, best.id)
            runner = self._pair_runner(node, source, best, triaging=True)
            try:
                with self.runner.same_device():  # drift is per device: every pair on one
                    triaged = self.judge.triage(self.noise_sigma, runner)
            except CandidateFailed as failed:
                self._pairs.pop((node.id, best.id), None)
                self._end(node, "failed", str(failed))
                return True
            finally:
                self._refresh(best.id)  # the pairs ran BEST too, whatever they decided
            if triaged is None or triaged.decision == "continue":
                return False  # its graded run, then `decide` goes on with these pairs
            verdict = replace(triaged, method=f"{triaged.method}, {TRIAGE}")
            self._record(node, best, verdict)
            self._pairs.pop((node.id, best.id), None)
        if verdict.decision == "accept":
            return False  # its graded run shows it correct first; `decide` applies the recorded accept
        cycles = pooled_cycles(store, node.id, self.version)  # its pairs' runs: the cost model's calibration
        why = f"{_interval(verdict)} ({verdict.method}, {verdict.decision})"
        update_design(store, node.id, held_by=self.lease.owner, status="rejected", reason=why,
                      measured_cycles=statistics.median(cycles) if cycles else None, owner="",
                      lease_until="")  # fmt: skip
        self.events.note(self.kernel, f"rejected {node.id} without its graded run: {why}")
        return True

    def decide(self, node: DesignNode, source: str) -> bool:
        """Judge the design against BEST (a verdict already recorded against it is applied); True when
        it ended accepted. Another process on the graph may accept a design while this one is judged:
        the verdict then decides nothing, and the design is judged again against the new BEST."""
        checked: dict[str, str] = {}  # the check sets' verdict, whichever BEST it is judged against
        while True:
            try:
                return self._decide_against_best(node, source, checked)
            except BestMoved as moved:
                self.events.note(self.kernel, f"{node.id}: another run changed BEST while it was judged "
                                              f"({moved}); judged again")  # fmt: skip

    def _decide_against_best(self, node: DesignNode, source: str, checked: dict[str, str]) -> bool:
        store, me = self.store, self.lease.owner
        best = best_of(store, self.kernel)
        assert best is not None and best.measured_cycles is not None and node.measured_cycles is not None
        if best.id == node.id:  # never judged against itself
            update_design(store, node.id, held_by=me, owner="", lease_until="")
            return True
        verdict = self._recorded(node.id, best.id)  # (a killed run recorded the decision but not its effect)
        if verdict is None:
            supersede_comparisons(store, node.id, best.id)  # verdicts against an earlier BEST are no decision
            verdict = self._judge(node, source, best)
        else:
            self._refresh(best.id)  # the recorded verdict's pairs ran BEST (a killed run refreshed nothing)
        why = _interval(verdict)
        if verdict.decision == "accept" and node.id not in checked:
            checked[node.id] = self._fails_checks(node, source)
        if verdict.decision == "accept" and (wrong := checked[node.id]):
            why = f"{why} ({verdict.method}, accept), but incorrect on the check sets: {wrong}"
            self._end(node, "failed", why)
            return False
        if verdict.decision == "accept":
            why = f"{why} ({verdict.method})"
            cycles = statistics.median(pooled_cycles(store, node.id, self.version))
            set_best(store, self.kernel, node.id, held_by=me, replaces=best.id, status="accepted", reason=why, owner="",
                     lease_until="", measured_cycles=cycles)  # fmt: skip
            self.events.note(self.kernel, f"accepted {node.id}: {node.measured_cycles:,.0f} cycles, {why}")
            return True
        why = f"{why} ({verdict.method}, {verdict.decision})"
        update_design(store, node.id, held_by=me, status="rejected", reason=why, owner="", lease_until="")
        self.events.note(self.kernel, f"rejected {node.id}: {why}")
        return False

    def _refresh(self, best: str) -> None:
        """The incumbent's pairs spread its runs over time: their median is its drift-free cycle count,
        the one status reports (kept current whenever its runs grow, so the graph says it too)."""
        cycles = pooled_cycles(self.store, best, self.version)
        if cycles:
            update_design(self.store, best, measured_cycles=statistics.median(cycles))

    def _end(self, node: DesignNode, status: str, why: str) -> None:
        update_design(self.store, node.id, held_by=self.lease.owner, status=status, reason=why[:500], owner="",
                      lease_until="")  # fmt: skip
        self.events.note(self.kernel, f"{status} {node.id}: {why}")

    def _fails_checks(self, node: DesignNode, source: str) -> str:
        """Why the design is wrong on the kernel's check sets ("" when it is right, or there are none):
        one job on every check set, before the design becomes BEST."""
        if not self.check_sets:
            return ""
        update_design(self.store, node.id, held_by=self.lease.owner, lease_until=self.lease.until())
        # the last job of a decision made: past a spent budget too (the winner was lost to the next run's
        # upgrade, "left unfinished", when the budget ended here)
        outcome = self.runner.run(self.kernel, content_sha(source), source, self.version, fixtures=self.check_sets,
                                  repeats=1, finishing=True)  # fmt: skip
        correctness = outcome.result.correctness
        if correctness is not None and not correctness.passed:
            return correctness.message or "wrong outputs"
        if not outcome.ok and correctness is None:
            return f"{outcome.result.status}: {outcome.result.message}"
        return ""

    def accepted_already(self, node: DesignNode) -> bool:
        best = best_of(self.store, self.kernel)
        if best is None or best.id == node.id:
            return False
        verdict = self._recorded(node.id, best.id)
        return verdict is not None and verdict.decision == "accept"

    def prejudge(self, node: DesignNode, source: str, incumbent: str) -> None:
        """Compare the design with `incumbent` now, while it is BEST, and record the verdict without
        applying it (designs of one round, side by side): `decide` applies it if BEST is still
        `incumbent` then, and judges against the new BEST if not, so every decision stays one against
        the BEST of its time."""
        best = best_of(self.store, self.kernel)
        if (best is None or best.id != incumbent or best.id == node.id or best.measured_cycles is None
                or node.measured_cycles is None):  # fmt: skip
            return
        if self._recorded(node.id, best.id) is None:
            self._judge(node, source, best)

    def _judge(self, node: DesignNode, source: str, best: DesignNode) -> Verdict:
        """The judge's verdict on the design against `best`, with A/B pairs on one device; recorded."""
        assert best.measured_cycles is not None and node.measured_cycles is not None
        run_pair = self._pair_runner(node, source, best, triaging=False)
        try:
            with self.runner.same_device():  # drift is per device: every pair on one
                verdict = self.judge.decide(node.measured_cycles, best.measured_cycles, self.noise_sigma,
                                            late=self._late(), run_pair=run_pair)  # fmt: skip
        finally:
            self._refresh(best.id)  # a judgement a prejudge or a spent budget ends early ran BEST too
        self._record(node, best, verdict)
        self._pairs.pop((node.id, best.id), None)
        return verdict

    def _pair_runner(self, node: DesignNode, source: str, best: DesignNode, *, triaging: bool) -> PairRunner:
        """`run_pair(i)`: the i-th A/B pair of the design against `best` (the pairs run before for the
        same two replayed first). While triaging, the candidate's own failure raises CandidateFailed."""
        store, me, plan = self.store, self.lease.owner, self.judge.pair_plan
        incumbent = source_of(store, best.id)
        sha, incumbent_sha = content_sha(source), content_sha(incumbent)  # a KernelVersion's sha is its hash
        pairs = self._pairs.setdefault((node.id, best.id), [])

        def side(key: str, text: str) -> Outcome:
            outcome = self.runner.run(self.kernel, key, text, self.version, fixtures="smoke", repeats=plan.repeats)
            if triaging and key == sha and (why := _own_failure(outcome)):
                raise CandidateFailed(why)
            return outcome

        def run_pair(index: int) -> Pair | None:
            if index < len(pairs):
                return pairs[index]
            order = [(sha, source), (incumbent_sha, incumbent)]
            if index % 2:  # alternate who goes first, so drift within a pair favours neither
                order.reverse()
            update_design(store, node.id, held_by=me, lease_until=self.lease.until())  # the pairs take a while
            for attempt in range(PAIR_ATTEMPTS):
                outcomes = {key: side(key, text) for key, text in order}
                if any(not o.ok or not _timed(o) for o in outcomes.values()):
                    return None
                retried = any(len(o.run_ids) > 1 for o in outcomes.values())
                if not retried or attempt == PAIR_ATTEMPTS - 1:
                    break
            ids = tuple(run for key, _ in order for run in outcomes[key].run_ids)
            pair = (plan.statistic(_timed(outcomes[sha])), plan.statistic(_timed(outcomes[incumbent_sha])), ids)
            pairs.append(pair)
            return pair

        return run_pair

    def _late(self) -> bool:
        """Late once the last accepted step was under LATE_STEP: the graded medians accept nothing alone."""
        ratio = last_accepted_ratio(self.store, self.kernel)
        return ratio is not None and ratio > 1 - LATE_STEP

    def _recorded(self, candidate: str, incumbent: str) -> Verdict | None:
        c = latest_comparison(self.store, candidate, incumbent)
        return None if c is None else Verdict(c.decision, c.method, c.ratio, c.ci_low, c.ci_high, c.p_value, c.pairs)

    def _record(self, node: DesignNode, best: DesignNode, verdict: Verdict) -> None:
        # an early look that sent the design to A/B pairs was not a decision; only the pairs' is
        decision = "inconclusive" if verdict.decision == "continue" else verdict.decision
        comparison = Comparison(
            id=content_sha(f"{node.id}|{best.id}|{verdict.method}|{verdict.pairs}|{uuid.uuid4().hex}")[:32],
            kernel=self.kernel, ratio=verdict.ratio, ci_low=verdict.ci_low,
            ci_high=verdict.ci_high if math.isfinite(verdict.ci_high) else 1e9,
            p_value=verdict.p_value if math.isfinite(verdict.p_value) else 1.0, pairs=verdict.pairs,
            method=verdict.method, decision=decision,  # type: ignore[arg-type]
        )  # fmt: skip
        # an early look's samples are the graded runs behind the two medians
        runs = list(verdict.run_ids) or graded_runs(self.store, node.id) + graded_runs(self.store, best.id)
        record_comparison(self.store, comparison, candidate=node.id, incumbent=best.id, run_ids=runs,
                          activity=self.activity)  # fmt: skip


def _interval(verdict: Verdict) -> str:
    return f"ratio {verdict.ratio:.3f} [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"


def _timed(outcome: Outcome) -> list[float]:
    return [float(run.cycles) for run in outcome.result.runs if not run.warmup]


def _own_failure(outcome: Outcome) -> str:
    """Why a job failed because of its program ("" when it did not, or the device is to blame)."""
    correctness = outcome.result.correctness
    if correctness is not None and not correctness.passed:
        return f"incorrect on the device: {correctness.message}"
    if outcome.quarantined:
        return "quarantined: faults deterministically"
    return ""
