"""SimRNGD behind the Target interface, and the fe-run command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.core.target import CheckResult, DeviceJob, KernelSpec, Target
from chiplore.simulator.device import DeviceConfig, SimDevice
from chiplore.simulator.fe_run import main as fe_run
from chiplore.simulator.kernel_specs import input_bytes
from chiplore.simulator.target import SimRNGD
from tests.simulator.programs import baseline, baseline_path, baselines, examples, program_text


def test_the_target_lists_toolchains_and_the_harness_kernels() -> None:
    target = SimRNGD(seed=1)
    assert target.toolchains() == ["0.5.0", "0.6.0", "0.7.0"] and target.default_toolchain() == "0.6.0"
    specs = {k.name: k for k in target.kernels()}
    assert all(isinstance(k, KernelSpec) for k in specs.values())
    assert {n: (k.weight_bytes, round(k.bound_cycles)) for n, k in specs.items()} == {
        "sliding_project_qkv": (31_473_664, 55_217),
        "sliding_attention_output": (15_736_320, 27_608),
        "decoder_feedforward": (99_532_812, 174_619),
    }
    o = specs["sliding_attention_output"]
    assert (o.atol, o.rtol) == (0.05, 0.01) and o.axes["Qs"] == 4096
    assert [p.name for p in o.params] == ["x", "post_attn_rms_weight", "o_weight", "o_weight_scale", "residual"]
    assert o.params[2].type == "&hbm<f8e4m3>[H, Qs]" and o.params[2].shape == (("H", 3840), ("Qs", 4096))
    assert o.params[-1].mutable and o.params[-1].type == "&mut hbm<bf16>[H]"


def test_only_the_official_baselines_are_handed_out() -> None:
    handed = {k.baseline_source for k in SimRNGD().kernels()}
    assert handed == set(baselines().values()) and not handed & set(examples().values())


def test_check_and_docs_through_the_target() -> None:
    target = SimRNGD()
    result = target.check(baseline("o"), "0.7.0")
    assert isinstance(result, CheckResult) and not result.ok and result.version == "0.7.0"
    for version in target.toolchains():
        pages = target.docs(version)
        assert any(p.path == "CHANGES.md" and version in p.text for p in pages)


def test_a_job_through_the_target_is_timed_and_graded() -> None:
    target = SimRNGD(seed=3, device=DeviceConfig(tenant_load=0, p_transient=0, p_hang=0, p_noc_timeout=0))
    program = baseline("o")
    job = DeviceJob(kernel="sliding_attention_output", program=program, fixtures=("g0", "cancel"))
    result = target.result(target.submit(job))
    assert result.status == "ok" and result.median_cycles is not None
    assert result.correctness is not None and result.correctness.passed and result.correctness.sets == ("g0", "cancel")
    # the upload of each fixture set (15.8 MB at 2 GB/s) is part of the device time
    uploads = 2 * input_bytes("sliding_attention_output", program) / 2e9
    assert result.device_s == pytest.approx(1.5 + uploads + sum(0.02 + r.cycles * 1e-9 for r in result.runs))
    broken = program_text("o_incomplete_coverage")
    wrong = target.result(target.submit(job.model_copy(update={"program": broken})))
    assert wrong.status == "ok" and wrong.correctness is not None and not wrong.correctness.passed


@pytest.mark.slow
def test_host_test_runs_the_executor_on_the_smoke_set_for_free() -> None:
    target = SimRNGD(seed=3)
    program = program_text("qkv_opt")
    result = target.host_test(program, "sliding_project_qkv", "0.6.0")
    assert result.compiled and result.correctness is not None and result.correctness.passed
    assert target.device.spent() == 0
    broken = target.host_test(program, "sliding_project_qkv", "0.7.0")
    assert not broken.compiled and any(d.code == "E0103" for d in broken.diagnostics)
    ffn = target.host_test(baseline("ffn"), "decoder_feedforward", "0.6.0")
    assert ffn.compiled and ffn.correctness is not None and ffn.correctness.passed  # 59 M-value DM tensors
    microbenchmark = target.host_test(program, "my_probe", "0.6.0")  # compiles, but has no reference
    assert microbenchmark.compiled and microbenchmark.correctness is None
    assert microbenchmark.message.startswith("not executed: my_probe is not a harness kernel")


def test_simrngd_is_a_target() -> None:
    assert isinstance(SimRNGD(), Target)


def test_a_saved_device_continues_exactly() -> None:
    program = baseline("o")
    job = DeviceJob(kernel="sliding_attention_output", program=program, fixtures="smoke")
    straight = SimDevice(9)
    first = straight.result(straight.submit(job))
    second = straight.result(straight.submit(job))
    resumed = SimDevice(9)
    assert resumed.result(resumed.submit(job)).runs == first.runs
    state = json.loads(json.dumps(resumed.snapshot()))
    fresh = SimDevice(9)
    fresh.restore(state)
    again = fresh.result(fresh.submit(job))
    assert (again.runs, again.queue_wait_s) == (second.runs, second.queue_wait_s)
    # the job ids go on in the saved session (another device instance has a session of its own)
    assert again.job_id == f"rngd-sim-0/{state['session']}-000002" and again.job_id != second.job_id


def test_fe_run_keeps_the_device_between_calls(tmp_path: Path) -> None:
    runner = CliRunner()
    program = str(baseline_path("o"))
    args = ["submit", program, "--kernel", "sliding_attention_output", "--fixtures", "smoke", "--json",
            "--data-dir", str(tmp_path), "--seed", "4"]  # fmt: skip
    first = runner.invoke(fe_run, args)
    second = runner.invoke(fe_run, args)
    assert first.exit_code == 0 and second.exit_code == 0, first.output
    ids = [json.loads(r.output)["job_id"] for r in (first, second)]
    assert [i.rsplit("-", 1)[1] for i in ids] == ["000001", "000002"] and ids[0][:-6] == ids[1][:-6]
    state = json.loads((tmp_path / "device" / "rngd-sim-0.json").read_text())
    assert state["ledger"]["project"] > 3.0  # two jobs charged


def test_fe_run_reports_compile_errors_and_bad_files(tmp_path: Path) -> None:
    runner = CliRunner()
    program = str(baseline_path("o"))
    broken = runner.invoke(fe_run, ["submit", program, "--kernel", "sliding_attention_output", "--toolchain", "0.7.0",
                                    "--data-dir", str(tmp_path)])  # fmt: skip
    assert broken.exit_code == 1 and "compile_error" in broken.output and "E0103" in broken.output
    missing = runner.invoke(fe_run, ["submit", str(tmp_path / "nope.fe"), "--kernel", "k", "--data-dir", str(tmp_path)])
    assert missing.exit_code == 2 and "cannot read" in missing.output


def test_the_target_offers_the_microbenchmarks() -> None:
    probes = SimRNGD().microbenchmarks()
    assert [p.id for p in probes] == [f"MB{n:02d}" for n in range(18)]
    assert all(p.measures and p.points and "$" in p.template for p in probes)
    assert not any(str(201.9) in p.measures or "285" in p.measures for p in probes)  # no answer key handed out


@pytest.mark.slow
def test_fe_run_grades_and_serialises_concurrent_calls(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    fe_run_bin = shutil.which("fe-run", path=str(Path(sys.executable).parent)) or "fe-run"
    program = str(baseline_path("o"))
    args = [fe_run_bin, "submit", program, "--kernel", "sliding_attention_output", "--fixtures", "smoke", "--json",
            "--data-dir", str(tmp_path), "--seed", "5"]  # fmt: skip
    runs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [json.loads(r.communicate(timeout=120)[0]) for r in runs]
    assert sorted(o["job_id"].rsplit("-", 1)[1] for o in outputs) == ["000001", "000002"]
    assert all(o["correctness"]["passed"] for o in outputs)
    state = json.loads((tmp_path / "device" / "rngd-sim-0.json").read_text())
    assert state["count"] == 2
