"""The loop's decider: a measured design against BEST, by the judge, with A/B pairs on demand.

The comparison is recorded with every run it used before its effect is applied, so a run killed in
between applies the recorded decision on resume instead of judging again. BEST's cycles are the
median of all its timed runs: the A/B pairs spread them over the device's drift.
"""

from __future__ import annotations

import math
import statistics
import uuid
from dataclasses import dataclass

from chiplore.agents.callbacks import Events
from chiplore.agents.judge import AB_REPEATS, LATE_STEP, Judge, Verdict
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import Decider
from chiplore.agents.runner import Runner
from chiplore.core.ids import content_sha
from chiplore.kg.models import Activity, Comparison, DesignNode
from chiplore.kg.repo.designs import best_of, set_best, source_of, update_design
from chiplore.kg.repo.progress import pooled_cycles
from chiplore.kg.repo.runs import (
    graded_runs,
    last_accepted_ratio,
    latest_comparison,
    record_comparison,
    supersede_comparisons,
)
from chiplore.kg.store import GraphStore


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

    def decide(self, node: DesignNode, source: str) -> bool:
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
        # the incumbent's pairs spread its runs over time: their median is its drift-free cycle count
        update_design(store, best.id, measured_cycles=statistics.median(pooled_cycles(store, best.id, self.version)))
        interval = f"ratio {verdict.ratio:.3f} [{verdict.ci_low:.3f}, {verdict.ci_high:.3f}]"
        if verdict.decision == "accept" and (wrong := self._fails_checks(node, source)):
            why = f"{interval} ({verdict.method}, accept), but incorrect on the check sets: {wrong}"
            update_design(store, node.id, held_by=me, status="failed", reason=why[:500], owner="", lease_until="")
            self.events.note(self.kernel, f"failed {node.id}: {why}")
            return False
        if verdict.decision == "accept":
            why = f"{interval} ({verdict.method})"
            set_best(store, self.kernel, node.id, held_by=me, status="accepted", reason=why, owner="", lease_until="",
                     measured_cycles=statistics.median(pooled_cycles(store, node.id, self.version)))  # fmt: skip
            self.events.note(self.kernel, f"accepted {node.id}: {node.measured_cycles:,.0f} cycles, {why}")
            return True
        why = f"{interval} ({verdict.method}, {verdict.decision})"
        update_design(store, node.id, held_by=me, status="rejected", reason=why, owner="", lease_until="")
        self.events.note(self.kernel, f"rejected {node.id}: {why}")
        return False

    def _fails_checks(self, node: DesignNode, source: str) -> str:
        """Why the design is wrong on the kernel's check sets ("" when it is right, or there are none):
        one job on every check set, before the design becomes BEST."""
        if not self.check_sets:
            return ""
        update_design(self.store, node.id, held_by=self.lease.owner, lease_until=self.lease.until())
        outcome = self.runner.run(self.kernel, content_sha(source), source, self.version, fixtures=self.check_sets,
                                  repeats=1)  # fmt: skip
        correctness = outcome.result.correctness
        if correctness is not None and not correctness.passed:
            return correctness.message or "wrong outputs"
        if not outcome.ok and correctness is None:
            return f"{outcome.result.status}: {outcome.result.message}"
        return ""

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
        store, me = self.store, self.lease.owner
        incumbent = source_of(store, best.id)
        sha, incumbent_sha = content_sha(source), content_sha(incumbent)  # a KernelVersion's sha is its hash

        def run_pair(index: int) -> tuple[float, float, tuple[str, ...]] | None:
            order = [(sha, source), (incumbent_sha, incumbent)]
            if index % 2:  # alternate who goes first, so drift within a pair favours neither
                order.reverse()
            update_design(store, node.id, held_by=me, lease_until=self.lease.until())  # the pairs take a while
            medians: dict[str, float] = {}
            ids: list[str] = []
            for key, text in order:
                outcome = self.runner.run(self.kernel, key, text, self.version, fixtures="smoke", repeats=AB_REPEATS)
                if not outcome.ok or outcome.result.median_cycles is None:
                    return None
                medians[key] = float(outcome.result.median_cycles)
                ids.extend(outcome.run_ids)
            return medians[sha], medians[incumbent_sha], tuple(ids)

        with self.runner.same_device():  # drift is per device: every pair on one
            verdict = self.judge.decide(node.measured_cycles, best.measured_cycles, self.noise_sigma,
                                        late=self._late(), run_pair=run_pair)  # fmt: skip
        self._record(node, best, verdict)
        return verdict

    def _late(self) -> bool:
        """Late once the last accepted step was under LATE_STEP: every decision is then an A/B test."""
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
