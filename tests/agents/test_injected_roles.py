"""A judge and screens of one's own, through Session and the CLI; and the check sets acceptance grades
before a design becomes BEST (SimRNGD's `exact` and `cancel`, built to catch bf16 partial sums and
cancellation), which a judge of any kind cannot skip."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.agents.judge import Judge, PairRunner, Verdict
from chiplore.agents.proposers import DesignProposal, KernelView
from chiplore.agents.schedule import Roles
from chiplore.agents.screens import Candidate, Screen, ScreenResult
from chiplore.cli import main
from chiplore.kg.store import GraphStore
from chiplore.session import Session
from chiplore.simulator.target import SimRNGD
from tests.helpers import QUICK_SEARCH

VERSION = "0.6.0"
O_PROJ = "sliding_attention_output"
PROGRAMS = Path(__file__).resolve().parents[1] / "simulator" / "programs"
# o_opt's 512-wide dot products summed as two bf16 halves: right on the random sets, wrong on `cancel`,
# and as fast as o_opt (so the estimate screen lets it through to the check sets)
BF16_SUMS = PROGRAMS / "bugs" / "o_opt_bf16_halves.fe"
CORRECT = PROGRAMS / "examples" / "o_opt.fe"
SLOW = PROGRAMS / "bugs" / "o_bf16_accumulation.fe"  # shaped like the official baseline: about 15x o_opt's cycles


class AcceptEverything(Judge):
    """A judge that accepts every design it sees (so only the check sets stand in a wrong one's way)."""

    def decide(self, candidate: float, best: float, sigma: float, *, late: bool, run_pair: PairRunner) -> Verdict:
        return Verdict("accept", "accept-everything", candidate / best, 0.0, 0.0, 0.0, 0)


class RefuseEverything(Screen):
    name = "refuse-everything"

    def check(self, candidate: Candidate) -> ScreenResult:
        return ScreenResult(False, self.name, "this screen refuses every design")


@dataclass
class Programs:
    """An architect that proposes the given programs, one a round, then nothing."""

    sources: list[str]
    role: str = "architect"
    name: str = "scripted"
    proposed: list[str] = field(default_factory=list)

    def propose(self, view: KernelView, count: int) -> list[DesignProposal]:
        if not self.sources:
            return []
        source = self.sources.pop(0)
        self.proposed.append(source)
        return [DesignProposal(role="architect", policy=self.name, source=source, rationale="a test's program",
                               change="whole design")]  # fmt: skip

    def why_empty(self, view: KernelView) -> str:
        return "the test's programs are spent"


class Nothing(Programs):
    def __init__(self) -> None:
        super().__init__([], role="refiner")


def always_accept() -> Judge:
    return AcceptEverything()


def refuse_everything() -> Screen:
    return RefuseEverything()


def not_a_judge() -> object:
    return object()


def designs(store: GraphStore) -> dict[str, tuple[str, str]]:
    rows = store.read("MATCH (d:DesignNode {kernel: $k, policy: 'scripted'})-[:HAS_VERSION]->(v:KernelVersion) "
                      "RETURN v.source AS source, d.status AS status, d.reason AS reason", {"k": O_PROJ})  # fmt: skip
    return {row["source"]: (row["status"], row["reason"] or "") for row in rows}


@pytest.mark.slow
def test_a_design_wrong_only_on_the_check_sets_never_becomes_best(embedded_graph: GraphStore) -> None:
    graph = embedded_graph  # the subject is acceptance, which records the same on both stores
    session = Session(graph, SimRNGD(seed=11))
    session.prepare()
    session.learn(toolchain=VERSION)
    wrong, right, slow = BF16_SUMS.read_text(), CORRECT.read_text(), SLOW.read_text()
    again = wrong.replace("\n", "\n// the same bug, written again\n", 1)
    roles = Roles(architect=Programs([wrong, again, right, slow]), refiner=Nothing(), judge=AcceptEverything())
    session.optimize([O_PROJ], toolchain=VERSION, roles=roles, patience=1)
    decided = designs(graph)
    status, reason = decided[wrong]
    assert status == "failed" and "check sets" in reason and "cancel" in reason, reason
    # once one design ran wrong on them, the kernel's designs are tested on the check sets on the host
    # (free) before any device time: the same bug again is stopped there, with no device run
    status, reason = decided[again]
    assert status == "screened_out" and reason.startswith("check_sets: wrong on the host"), reason
    assert "cancel" in reason
    ran = graph.read("MATCH (v:KernelVersion {source: $s})<-[:RAN]-(r:DeviceRun) RETURN count(r) AS n", {"s": again})
    assert ran == [{"n": 0}]
    assert decided[right][0] == "accepted"  # a correct design passes the same checks and becomes BEST
    # a program written whole (an LLM's, here a script's) is priced from its text like a design of the
    # space: one predicted far slower than BEST never reaches the device
    status, reason = decided[slow]
    assert status == "screened_out" and reason.startswith("estimate: predicted"), reason
    ran = graph.read("MATCH (v:KernelVersion {source: $s})<-[:RAN]-(r:DeviceRun) RETURN count(r) AS n", {"s": slow})
    assert ran == [{"n": 0}]
    best = graph.read("MATCH (:Kernel {name: $k})-[:BEST]->(:DesignNode)-[:HAS_VERSION]->(v:KernelVersion) "
                      "RETURN v.source AS source", {"k": O_PROJ})  # fmt: skip
    assert best == [{"source": right}]
    # each check was one device job on the check sets, recorded as such
    checks = graph.read("MATCH (r:DeviceRun {fixtures: 'checks'}) RETURN count(r) AS n")
    assert checks[0]["n"] >= 2


@pytest.mark.slow
def test_the_cli_takes_a_judge_and_a_screen_of_ones_own(tmp_path: Path) -> None:
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data"), "CHIPLORE_SEED": "3",
           **QUICK_SEARCH}  # fmt: skip
    runner = CliRunner()
    assert runner.invoke(main, ["init"], env=env).exit_code == 0
    assert runner.invoke(main, ["learn", "--budget", "60"], env=env).exit_code == 0
    module = __name__
    screened = runner.invoke(main, ["optimize", O_PROJ, "--patience", "1", "--judge", f"{module}:always_accept",
                                    "--screen", f"{module}:refuse_everything", "--json"], env=env)  # fmt: skip
    assert screened.exit_code == 0, screened.output
    assert json.loads(screened.stdout)["accepted"] == 0  # every design stopped at the screen of one's own
    why = runner.invoke(main, ["cypher", "MATCH (d:DesignNode) WHERE d.reason CONTAINS 'refuse-everything' "
                                         "RETURN count(d) AS n", "--json"], env=env)  # fmt: skip
    assert why.exit_code == 0 and json.loads(why.stdout)[0]["n"] >= 1, why.output
    refused = runner.invoke(main, ["optimize", O_PROJ, "--judge", f"{module}:not_a_judge"], env=env)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "not a chiplore.agents.judge.Judge" in refused.output
