"""The life of a design, written once for the loop and the upgrade:

    proposed -> (screens) -> screened_out | queued -> (the decider's triage) -> rejected | failed
             -> (graded device run) -> failed | measured -> (the decider) -> accepted | rejected

Every transition is written to the graph before the next step starts, so a killed run resumes a
design from the state it reached (`advance` takes a design in any unfinished state). Each step is
taken only while this process holds the design's claim (`chiplore.agents.lease`), and renews it; a decided
design, or one a budget stopped, is released. What happens to a measured design is the decider's:
the loop's judges it against BEST; an upgrade's accepts a repaired program as its predecessor's
successor. A decider may also end a queued design before its graded run (`triage`): the loop's drops
a loser on a few short A/B jobs against BEST, so that only designs still in the running pay for a
graded run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chiplore.agents.callbacks import Events
from chiplore.agents.lease import Lease
from chiplore.agents.runner import BudgetExhausted, Runner
from chiplore.agents.screens import Candidate, Screener
from chiplore.core.ids import content_sha
from chiplore.core.pack import Params
from chiplore.kg.models import DesignNode
from chiplore.kg.repo.designs import update_design
from chiplore.kg.repo.runs import graded_median
from chiplore.kg.store import GraphStore

RELEASED = {"owner": "", "lease_until": ""}
# why a design stays open, released (its status says how far it got); a decision overwrites it
UNDECIDED = "the budget ended before its decision: the next optimize of the kernel takes it from here"


class Decider:
    """What becomes of a measured design. `decide` is called while the lease holds; it releases the
    design with the decision it writes."""

    def decide(self, node: DesignNode, source: str) -> bool:
        """Decide the design; True when it became BEST."""
        raise NotImplementedError

    def triage(self, node: DesignNode, source: str) -> bool:
        """Called before the design's graded run, while the lease holds: True when the decider ended
        the design already (a loser dropped on short jobs), writing its status and releasing it. By
        default False: every design gets its graded run."""
        return False

    def accepted_already(self, node: DesignNode) -> bool:
        """Whether the design's acceptance is decided and only its own jobs remain (its graded run, its
        check sets): those jobs finish the decision past a spent budget. By default False."""
        return False

    def prejudge(self, node: DesignNode, source: str, incumbent: str) -> None:
        """Called before the design's turn, while `incumbent` is BEST and a device is idle (the designs
        of one round side by side): record a verdict `decide` may apply later. By default nothing."""


@dataclass
class DesignLifecycle:
    """Takes one kernel's designs through the screens, the device and the decider."""

    store: GraphStore
    kernel: str
    version: str
    screener: Screener
    runner: Runner
    decider: Decider
    candidate: Callable[[DesignNode, str, Params | None], Candidate]  # what the screens see of a design
    events: Events
    lease: Lease

    def advance(self, node: DesignNode, source: str, params: Params | None) -> bool:
        """Take a design this process holds from its current state as far as it goes; True when it
        became BEST. ClaimLost when another process took it over meanwhile."""
        try:
            return self._advance(node, source, params)
        except BudgetExhausted:  # the next run, of any process, takes it from here
            self._step(node.id, reason=UNDECIDED, **RELEASED)
            raise

    def _advance(self, node: DesignNode, source: str, params: Params | None) -> bool:
        status = node.status
        if status == "proposed":
            result = self.screener.screen(self.candidate(node, source, params))
            if not result.passed:
                self._end(node.id, "screened_out", f"{result.check}: {result.detail}")
                self.events.note(self.kernel, f"{node.id} screened out at {result.check}: {result.detail}")
                return False
            status = "queued"
            self._step(node.id, status=status, lease_until=self.lease.until())
        if status == "queued" and (recorded := graded_median(self.store, node.id, self.version)) is not None:
            status = "measured"  # measured before a kill: the run is in the graph, and is not repeated
            self._step(node.id, status=status, measured_cycles=recorded, lease_until=self.lease.until())
            node = node.model_copy(update={"measured_cycles": recorded, "status": status})
        if status == "queued" and self.decider.triage(node, source):
            return False
        if status == "queued":
            finishing = self.decider.accepted_already(node)  # the judge's pairs accepted it before its graded run
            outcome = self.runner.run(self.kernel, content_sha(source), source, self.version, finishing=finishing)
            result = outcome.result
            correct = result.correctness is None or result.correctness.passed
            if not outcome.ok or result.median_cycles is None or not correct:
                why = result.message or result.status
                if outcome.quarantined:
                    why = "quarantined: faults deterministically"
                if result.correctness is not None and not result.correctness.passed:
                    why = f"incorrect on the device: {result.correctness.message}"
                self._end(node.id, "failed", why)
                self.events.note(self.kernel, f"{node.id} failed: {why}")
                return False
            cycles = float(result.median_cycles)
            self._step(node.id, status="measured", measured_cycles=cycles, lease_until=self.lease.until())
            node = node.model_copy(update={"measured_cycles": cycles, "status": "measured"})
        return self.decider.decide(node, source)

    def _step(self, design: str, **props: object) -> None:
        update_design(self.store, design, held_by=self.lease.owner, **props)

    def _end(self, design: str, status: str, why: str) -> None:
        self._step(design, status=status, reason=why[:500], **RELEASED)
