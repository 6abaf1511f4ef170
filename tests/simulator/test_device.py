"""The shared, noisy device (docs/simrngd.md §8): the noise model against its definition, replays,
budgets, the queue and every fault mode."""

from __future__ import annotations

import json
import math
import re
import statistics

import numpy as np
import pytest
from scipy import stats

from chiplore.simulator._truth import load_truth
from chiplore.simulator.cost import estimate
from chiplore.simulator.device import DeviceConfig, DeviceJob, InvalidJob, InvalidState, SimDevice
from chiplore.simulator.device.noise import MeasurementModel, noise_cdf
from tests.simulator.programs import baseline

O_BASELINE = baseline("o")
O_TRUE = estimate(O_BASELINE, "0.6.0").cycles
KERNEL = "sliding_attention_output"


def job(**fields: object) -> DeviceJob:
    return DeviceJob(kernel=KERNEL, program=O_BASELINE, **fields)  # type: ignore[arg-type]


def quiet(**fields: object) -> DeviceConfig:
    """No tenants and no random faults: what a test controls is all that happens."""
    settings: dict[str, object] = {"tenant_load": 0.0, "p_transient": 0.0, "p_hang": 0.0, "p_noc_timeout": 0.0}
    return DeviceConfig(**(settings | fields))  # type: ignore[arg-type]


def test_the_noise_follows_its_definition() -> None:
    """KS test of c_meas / (c_true * drift) against the lognormal body plus outliers."""
    truth = load_truth()
    model = MeasurementModel(truth, np.random.Generator(np.random.PCG64(11)))
    c_true = 1e8  # large, so the 8-cycle counter granularity is negligible
    samples = np.array([model.measure(c_true, 900.0, False) for _ in range(4000)]) / (c_true * model.drift(900.0))
    grid = np.linspace(0.85, 1.9, 800)
    cdf = noise_cdf(grid, truth)
    result = stats.kstest(samples, lambda x: np.interp(x, grid, cdf))
    assert result.pvalue > 0.01, result
    outliers = np.mean(samples > 1.10 * math.exp(3.5 * truth.noise_sigma))
    assert 0.005 < outliers < 0.035  # p = 0.02 (a few outliers fall below the cut)


def test_drift_and_warm_up_scale_the_run() -> None:
    truth = load_truth()
    model = MeasurementModel(truth, np.random.Generator(np.random.PCG64(3)))
    drift = [model.drift(t) for t in np.linspace(0, 1800, 50)]
    assert max(drift) / min(drift) == pytest.approx((1.015 / 0.985), rel=1e-3)
    assert abs(model.bias) <= 0.01
    warm = [model.measure(1e8, 0.0, True) / model.measure(1e8, 0.0, False) for _ in range(3000)]
    assert statistics.median(warm) == pytest.approx(1.04, rel=0.01)


def test_a_graded_job_runs_every_set_with_a_warm_up_and_reports_the_median() -> None:
    device = SimDevice(seed=1, config=quiet())
    result = device.result(device.submit(job(repeats=2)))
    assert result.status == "ok" and result.toolchain == "0.6.0"
    assert [r.fixture for r in result.runs if r.warmup] == [f"g{i}" for i in range(7)]
    timed = [r.cycles for r in result.runs if not r.warmup]
    assert len(timed) == 14 and all(c % 8 == 0 for c in timed)
    assert result.median_cycles == int(statistics.median(timed))
    assert abs(result.median_cycles / O_TRUE - 1) < 0.05
    expected = 1.5 + len(result.runs) * 0.02 + sum(r.cycles for r in result.runs) * 1e-9
    assert result.device_s == pytest.approx(expected)
    assert result.correctness is None  # no grader attached to this device
    assert result.wall_s > 0


def test_smoke_is_one_set_one_run_and_a_profile_doubles_device_time() -> None:
    device = SimDevice(seed=2, config=quiet())
    smoke = device.result(device.submit(job(fixtures="smoke")))
    assert [(r.fixture, r.warmup) for r in smoke.runs] == [("g0", False)] and smoke.profile is None
    profiled = device.result(device.submit(job(fixtures="smoke", profile=True)))
    assert profiled.device_s == pytest.approx(2 * (1.5 + 0.02 + profiled.runs[0].cycles * 1e-9))
    assert profiled.profile is not None and len(profiled.profile.longest) == 8
    assert profiled.profile.longest[0].label == "xr"  # the ring-256 broadcast, as the spec says
    assert profiled.profile.busy_fraction["main"] > 0.9


def test_a_replay_of_the_same_job_sequence_is_exact() -> None:
    def session() -> list[tuple[str, float, tuple[int, ...]]]:
        device = SimDevice(seed=42)  # tenants and random faults on
        out = []
        for k in range(6):
            result = device.result(device.submit(job(fixtures="smoke", repeats=1 + k % 2)))
            out.append((result.status, result.queue_wait_s, tuple(r.cycles for r in result.runs)))
            device.advance(7.0)
        return out

    assert session() == session()


def test_background_tenants_make_jobs_wait() -> None:
    device = SimDevice(seed=5)
    waits = []
    for _ in range(40):
        waits.append(device.result(device.submit(job(fixtures="smoke"))).queue_wait_s)
        device.advance(20.0)
    assert any(w > 0 for w in waits) and max(waits) <= 140
    assert sum(1 for w in waits if w == 0) > 5  # the device is free often enough


def test_a_compile_error_costs_nothing_and_is_never_queued() -> None:
    device = SimDevice(seed=1, config=quiet())
    result = device.result(device.submit(job(toolchain="0.7.0")))  # .cast is gone in 0.7.0
    assert result.status == "compile_error" and result.device_s == 0 and not result.runs
    assert any(d.code == "E0103" for d in result.diagnostics)
    assert device.spent() == 0


def test_a_job_beyond_the_budget_is_refused_with_a_clear_status() -> None:
    device = SimDevice(seed=1, config=quiet(agent_budget_s_per_day=5.0))
    first = device.result(device.submit(job(fixtures="smoke")))
    assert first.status == "ok"
    refused = device.result(device.submit(job(repeats=20)))
    assert refused.status == "queue_rejected" and refused.device_s == 0
    assert refused.message.startswith("device budget exhausted for agent: the job needs")
    assert refused.rejected_for == "budget"  # typed: the runner stops the kernel on it, not on the words
    assert device.spent("agent") == pytest.approx(first.device_s)
    device.advance(86_400)  # a new day brings a new allowance
    assert device.result(device.submit(job(fixtures="smoke"))).status == "ok"
    capped = SimDevice(seed=1, config=quiet(project_budget_s=1.0))
    assert capped.result(capped.submit(job(fixtures="smoke"))).message.startswith("project device budget exhausted")


def test_an_agent_may_have_two_jobs_pending() -> None:
    device = SimDevice(seed=1, config=quiet())
    handles = [device.submit(job(fixtures="smoke")) for _ in range(3)]
    assert [device.result(h).status for h in handles] == ["ok", "ok", "queue_rejected"]
    assert device.result(handles[2]).rejected_for == "queue_full"
    assert device.result(device.submit(job(fixtures="smoke", agent="other"))).status == "ok"


def test_a_job_over_the_wall_time_cap_times_out() -> None:
    device = SimDevice(seed=1, config=quiet(job_cap_s=1.0))
    result = device.result(device.submit(job()))
    assert result.status == "timeout" and result.device_s == 1.0 and not result.runs


def test_transient_faults_are_retryable() -> None:
    device = SimDevice(seed=1, config=quiet(p_transient=1.0))
    result = device.result(device.submit(job()))
    assert result.status == "transient" and result.retryable
    assert [f.code for f in result.faults] == ["TRANSIENT"] and 0 < result.device_s <= 1.5 + 14 * 0.03


def test_a_hang_is_killed_at_the_cap_and_the_slot_resets() -> None:
    device = SimDevice(seed=1, config=quiet(p_hang=1.0, slots=1))
    hung = device.submit(job())
    device.config = quiet(slots=1)  # the next job does not hang
    following = device.submit(job(fixtures="smoke"))
    result = device.result(hung)
    assert result.status == "timeout" and result.device_s == 70.0 and not result.runs
    assert [f.code for f in result.faults] == ["HANG"]
    assert device.result(following).queue_wait_s == pytest.approx(70.0 + 30.0)  # killed at the cap, then reset


BANK_RUN = """#![toolchain = "0.5.0"]
axes! { B = 131072, H = 64 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
kernel probe(x: &hbm<i8>[B], y: &mut hbm<i8>[B]) {
    let p: dm<i8>{..One, elem: [B % 8192]} = x.tile(B / 8192, 0, 1).dma(engines = [0]);
    let q: dm<i8>{..One, elem: [B % 8192]} = x.tile(B / 8192, 1, 1).dma(engines = [1]);
    main(p).fetch(time = [B % 128 / 8, B % 8192 / 128], packet = [B % 8]).commit_into(p);
    p.dma_into(y.tile(B / 8192, 0, 1), engines = [0]);
    q.dma_into(y.tile(B / 8192, 1, 1), engines = [1]);
}
"""


def test_a_bank_run_under_050_times_out_the_noc_and_resets_the_cluster() -> None:
    device = SimDevice(seed=1, config=quiet())
    bias = device.noise.bias
    result = device.result(device.submit(DeviceJob(kernel="probe", program=BANK_RUN, fixtures="smoke")))
    assert result.status == "fault"
    assert [f.code for f in result.faults] == ["NOC_TIMEOUT", "CLUSTER_RESET"]
    assert result.faults[0].cluster == 0 and result.faults[0].run == 0 and result.faults[0].cycle > 200
    assert result.device_s == pytest.approx(1.5 + 20.0)
    assert device.noise.bias != bias  # the device settles somewhere else after the reset
    later = BANK_RUN.replace('"0.5.0"', '"0.6.0"')
    serialised = device.result(device.submit(DeviceJob(kernel="probe", program=later, fixtures="smoke")))
    assert serialised.status == "ok" and any(d.code == "N0520" for d in serialised.diagnostics)
    rejected = device.result(device.submit(DeviceJob(kernel="probe", program=later.replace("0.6.0", "0.7.0"))))
    assert rejected.status == "compile_error"


def test_unknown_fixture_sets_are_a_clear_error() -> None:
    device = SimDevice(seed=1, config=quiet())
    with pytest.raises(InvalidJob, match="unknown fixture sets"):
        device.submit(job(fixtures=("g9",)))
    with pytest.raises(ValueError):
        DeviceJob(kernel=KERNEL, program=O_BASELINE, repeats=0)
    assert device.result(device.submit(job(fixtures="smoke"))).job_id.endswith("-000001")  # no id was taken


def test_a_kernel_the_program_does_not_declare_is_refused_for_free() -> None:
    """Before, the device timed and charged a job for a kernel that was not there."""
    device, untouched = SimDevice(seed=1, config=quiet()), SimDevice(seed=1, config=quiet())
    refused = device.result(device.submit(DeviceJob(kernel="nope", program=O_BASELINE, fixtures="smoke")))
    assert refused.status == "compile_error" and refused.device_s == 0 and not refused.runs
    assert refused.message == "the program declares no kernel 'nope' (it declares: sliding_attention_output)"
    assert device.spent() == 0 and device.now == 0
    # nothing random was drawn: the next job measures what it would have measured anyway
    assert (
        device.result(device.submit(job(fixtures="smoke"))).runs
        == untouched.result(untouched.submit(job(fixtures="smoke"))).runs
    )


def test_a_damaged_saved_state_is_refused_and_changes_nothing() -> None:
    device = SimDevice(seed=1, config=quiet())
    device.result(device.submit(job(fixtures="smoke")))
    good = device.snapshot()
    damaged = [
        ({**good, "now": float("nan")}, "now: Input should be a finite number"),
        ({**good, "slot_free": [0.0]}, "it has 1 slots, the device 2"),
        ({**good, "rng": {"bit_generator": "PCG64"}}, "rng: not a generator state"),
        ({**good, "seed": 2}, "with seed 2, not rngd-sim-0 with seed 1"),
        ({k: v for k, v in good.items() if k != "ledger"}, "ledger: Field required"),
    ]
    fresh = SimDevice(seed=1, config=quiet())
    before = fresh.snapshot()
    for state, why in damaged:
        with pytest.raises(InvalidState, match=re.escape(why)):
            fresh.restore(state)
        assert fresh.snapshot() == before
    fresh.restore(json.loads(json.dumps(good)))
    assert fresh.snapshot() == good


def test_a_job_that_can_never_finish_hangs_until_the_cap() -> None:
    """A run-time index outside its axis (the executor finds it) is a HANG, not a wrong answer."""
    from chiplore.simulator.device import DeviceHang

    def grader(program: str, kernel: str, version: str, sets: tuple[str, ...]) -> None:
        raise DeviceHang("kv_pos = 5000 selects outside Ts (size 1024)")

    device = SimDevice(seed=1, config=quiet(), grader=grader)  # type: ignore[arg-type]
    result = device.result(device.submit(job(fixtures="smoke")))
    assert result.status == "timeout" and result.device_s == 70.0 and not result.runs
    assert [f.code for f in result.faults] == ["HANG"] and "kv_pos = 5000" in result.message
