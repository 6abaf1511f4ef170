"""The loop's parts on their own: the builtin architect's programs (from the pack's design space)
compile, the screener's rule predicates, the runner's fault handling, and the capabilities the rules
decide (the judge's tests are in test_judge.py)."""

from __future__ import annotations

import json

import pytest

from chiplore.agents.callbacks import RecordRuns
from chiplore.agents.knowledge import read_knowledge
from chiplore.agents.proposers import BuiltinArchitect
from chiplore.agents.proposers.search import SearchBudget
from chiplore.agents.runner import DeviceRunner
from chiplore.core.errors import BudgetExhausted
from chiplore.core.ids import content_sha
from chiplore.core.rules import predicate_of
from chiplore.ingest.rules import learn_rules
from chiplore.kg.models import BUDGET_END, Activity, KernelVersion
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.repo.nodes import upsert
from chiplore.kg.store import GraphStore
from chiplore.simulator.device.device import DeviceConfig
from chiplore.simulator.target import SimRNGD
from tests.helpers import kernel_view

VERSION = "0.6.0"


KERNELS = ("decoder_feedforward", "sliding_attention_output", "sliding_project_qkv")
QUICK = SearchBudget(predictions=24)  # designs that compile and pass, not the best ones: the loop's tests hold quality


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_architects_first_designs_compile_and_the_best_passes_the_host_test(kernel: str) -> None:
    target = SimRNGD()
    proposals = BuiltinArchitect(QUICK).propose(kernel_view(target, kernel, VERSION), 3)
    assert len(proposals) == 3 and len({p.sha for p in proposals}) == 3
    for proposal in proposals:
        checked = target.check(proposal.source, VERSION)
        assert checked.ok, [d.message for d in checked.diagnostics]
    tested = target.host_test(proposals[0].source, kernel, VERSION)
    assert tested.correctness is not None and tested.correctness.passed, tested.message


@pytest.mark.parametrize(
    ("predicate", "features", "broken"),
    [
        ({"quantity": "dm.bytes_per_slice", "op": "<=", "value": 491520}, {"dm.bytes_per_slice": 600_000}, True),
        ({"quantity": "dm.bytes_per_slice", "op": "<=", "value": 491520}, {"dm.bytes_per_slice": 60_000}, False),
        ({"quantity": "contract.stream_dtype", "op": "not_in", "value": ["f8e4m3"]},
         {"contract.stream_dtype": ("f8e4m3",)}, True),
        ({"quantity": "contract.stream_dtype", "op": "not_in", "value": ["i8"]},
         {"contract.stream_dtype": ("f8e4m3",)}, False),
        ({"quantity": "construct.cast", "op": "unavailable", "instead": "widen"},
         {"constructs": frozenset({"cast", "fetch"})}, True),
        ({"quantity": "construct.widen", "op": "unavailable"}, {"constructs": frozenset({"cast"})}, False),
        ({"quantity": "vector.chain_ops", "op": "<=", "value": 6}, {}, False),  # nothing to check it against
    ],
)  # fmt: skip
def test_rule_predicates(predicate: dict[str, object], features: dict[str, object], broken: bool) -> None:
    # as the graph keeps them: JSON, read back typed
    assert (predicate_of(json.dumps(predicate)).violated_by(features) is not None) is broken


def test_a_predicate_keeps_its_json_so_a_rule_is_recognised_across_versions() -> None:
    for body in (
        '{"op": "<=", "quantity": "dm.bytes_per_slice", "stated": 491520, "value": 491520}',
        '{"op": "not_in", "quantity": "contract.stream_dtype", "value": ["i8"]}',
        '{"instead": "widen", "op": "unavailable", "quantity": "construct.cast"}',
        '{"op": "avoid", "quantity": "fetch.packet_bytes/E0312"}',
        '{"op": "divides", "quantity": "tile.rows", "value": "rows"}',
    ):  # a pack's own stated constraint
        assert predicate_of(body).json_body() == body


def test_the_runner_quarantines_a_program_that_faults_every_time_and_records_each_job(graph: GraphStore) -> None:
    """On 0.5.0 a long same-bank run under DMA is a NOC_TIMEOUT on every run: the design's fault,
    not the device's, so the runner stops after the second identical fault."""
    target = SimRNGD(seed=3)
    probe = next(p for p in target.microbenchmarks() if p.id == "MB16")
    source = probe.instantiate({"RUN": "128", "SPAN": "16384"}, "0.5.0")
    activity = Activity(id="runner-test", role="runner", policy="builtin")
    record_activity(graph, activity)
    sha = content_sha(source)
    upsert(graph, [KernelVersion(sha=sha, kernel=probe.kernel, source=source, toolchain="0.5.0")])
    runner = DeviceRunner(target, RecordRuns(graph, activity), budget_s=600.0, backoff_s=0.0)
    outcome = runner.run(probe.kernel, sha, source, "0.5.0", fixtures="smoke", repeats=3)
    assert outcome.result.status == "fault" and outcome.quarantined and len(outcome.run_ids) == 2
    runs = graph.read("MATCH (r:DeviceRun)-[:RAN]->(:KernelVersion {sha: $sha}) RETURN r.faults AS f", {"sha": sha})
    assert len(runs) == 2 and all("NOC_TIMEOUT" in row["f"] for row in runs)
    assert runner.spent_s == pytest.approx(sum(
        row["s"] for row in graph.read("MATCH (r:DeviceRun) RETURN r.device_s AS s")))  # fmt: skip


def test_the_runner_submits_nothing_past_its_budget(graph: GraphStore) -> None:
    target = SimRNGD(seed=4)
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    activity = Activity(id="runner-budget", role="runner", policy="builtin")
    record_activity(graph, activity)
    runner = DeviceRunner(target, RecordRuns(graph, activity), budget_s=10.0, spent_s=10.0)
    with pytest.raises(BudgetExhausted):
        runner.run(spec.name, content_sha(spec.baseline_source), spec.baseline_source, VERSION)
    assert graph.read("MATCH (r:DeviceRun) RETURN count(r) AS n") == [{"n": 0}]


def test_a_job_that_finishes_a_decision_runs_past_a_spent_budget(graph: GraphStore) -> None:
    """A design the judge accepted on its pairs still needs its graded run and its check sets: those
    jobs run past the budget (as a started job does), or the winner is left "measured" and a later
    upgrade closes it unfinished."""
    target = SimRNGD(seed=4)
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    activity = Activity(id="runner-finishing", role="runner", policy="builtin")
    record_activity(graph, activity)
    upsert(graph, [KernelVersion(sha=content_sha(spec.baseline_source), kernel=spec.name, source=spec.baseline_source,
                                 toolchain=VERSION)])  # fmt: skip
    runner = DeviceRunner(target, RecordRuns(graph, activity), budget_s=10.0, spent_s=10.0)
    outcome = runner.run(spec.name, content_sha(spec.baseline_source), spec.baseline_source, VERSION, finishing=True)
    assert outcome.ok and outcome.result.median_cycles and runner.spent_s > 10.0
    assert graph.read("MATCH (r:DeviceRun) RETURN count(r) AS n") == [{"n": 1}]
    with pytest.raises(BudgetExhausted):  # anything else stops there
        runner.run(spec.name, content_sha(spec.baseline_source), spec.baseline_source, VERSION)


def test_a_job_that_hangs_is_stopped_where_the_budget_ends(graph: GraphStore) -> None:
    """Every job hangs (the device kills one at its 70 s cap): with 5 s of budget left, the runner's job
    carries that as its limit, the device stops it there, and the runner reports the budget spent, not
    a fault of the design; the run is recorded with the 5 s it took."""
    target = SimRNGD(seed=4, device=DeviceConfig(p_hang=1.0))
    spec = next(k for k in target.kernels() if k.name == "sliding_attention_output")
    activity = Activity(id="runner-hang", role="runner", policy="builtin")
    record_activity(graph, activity)
    upsert(graph, [KernelVersion(sha=content_sha(spec.baseline_source), kernel=spec.name, source=spec.baseline_source,
                                 toolchain=VERSION)])  # fmt: skip
    runner = DeviceRunner(target, RecordRuns(graph, activity), budget_s=25.0, spent_s=20.0, backoff_s=0.0)
    with pytest.raises(BudgetExhausted, match="stopped at its end"):
        runner.run(spec.name, content_sha(spec.baseline_source), spec.baseline_source, VERSION)
    runs = graph.read("MATCH (r:DeviceRun) RETURN r.status AS status, r.device_s AS s, r.faults AS faults")
    assert runs == [{"status": "timeout", "s": pytest.approx(5.0), "faults": ["HANG", BUDGET_END]}]
    assert runner.spent_s == pytest.approx(25.0)
    # the budget's end is no failed run: status's column counts none (a user read "1 timeout" as a device problem)
    assert graph.read("MATCH (l:DeviceLedger) RETURN l.runs AS runs, l.failed_runs AS failed") == [
        {"runs": 1, "failed": 0}
    ]


def test_capabilities_come_from_the_rules_in_force_under_each_version(graph: GraphStore) -> None:
    target = SimRNGD()
    for version in ("0.6.0", "0.7.0"):
        learn_rules(graph, target, version)
    capabilities = target.pack().capabilities
    old, new = read_knowledge(graph, "0.6.0", capabilities), read_knowledge(graph, "0.7.0", capabilities)
    assert (old.facts["vocab.widen"], new.facts["vocab.widen"]) == (0.0, 1.0)  # `cast` split in 0.7.0
    assert (old.facts["vocab.allreduce_slices"], new.facts["vocab.allreduce_slices"]) == (0.0, 1.0)
    assert old.facts["contract.f8_stream"] == 1.0 and old.facts["contract.f4_stream"] == 0.0
    assert new.facts["contract.f4_stream"] == 1.0
    assert all(fact.startswith("LegalityRule:") for fact in old.fact_ids())
    assert {rule.code for rule in new.rules} >= {"E0103", "E0301"}
