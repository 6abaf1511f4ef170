"""`fe-run` and `ferc` driven as a user would: bounded input, unknown names refused before the device
charges anything, one line for every refusal, versions and JSON everywhere, and a device state that
survives cut writes, damage and concurrent processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic import ValidationError

from chiplore.agents.schedule import OptimizeConfig
from chiplore.cli import main as chiplore
from chiplore.core.settings import MAX_SEED
from chiplore.simulator.bench import microbenchmarks
from chiplore.simulator.device import DeviceConfig, DeviceJob, DeviceStore, SimDevice
from chiplore.simulator.dsl.parser import MAX_SOURCE_BYTES
from chiplore.simulator.fe_run import main as fe_run
from chiplore.simulator.ferc import main as ferc
from chiplore.simulator.target import KERNELS_DIR, SimRNGD
from tests.simulator.one_line import refused
from tests.simulator.programs import baseline_path
from tests.simulator.test_kernel_packs import copy_pack, edit

O_BASELINE = str(baseline_path("o"))
# the empty kernel: no reference, so it is timed and never graded
MB01 = next(p for p in microbenchmarks() if p.id == "MB01")
PROBE = MB01.instantiate(MB01.points[0], "0.6.0")


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    path = tmp_path / "mb01.fe"
    path.write_text(PROBE)
    return path


def submit(data: Path, program: Path | str, *extra: str, kernel: str = MB01.kernel) -> Result:
    args = ["submit", str(program), "--kernel", kernel, "--fixtures", "smoke", "--data-dir", str(data), *extra]
    return CliRunner().invoke(fe_run, args)


def saved(data: Path) -> dict[str, object]:
    return json.loads((data / "device" / "rngd-sim-0.json").read_text())


# ---- input that must not be read --------------------------------------------------------------


def test_submit_refuses_a_device_a_fifo_and_an_oversized_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.fe"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.fe"
    with huge.open("wb") as handle:  # sparse: no need to write 10 MB to prove the limit
        handle.truncate(MAX_SOURCE_BYTES + 1)
    assert "not a regular file" in refused(submit(tmp_path, "/dev/zero"))
    assert "not a regular file" in refused(submit(tmp_path, fifo))
    assert "over the 10,485,760-byte limit" in refused(submit(tmp_path, huge))
    assert "No such file" in refused(submit(tmp_path, tmp_path / "missing.fe"))
    assert not (tmp_path / "device" / "rngd-sim-0.json").exists()


def test_ferc_check_refuses_a_device_file_too() -> None:
    assert "cannot read /dev/zero: not a regular file" in refused(CliRunner().invoke(ferc, ["check", "/dev/zero"]))


def test_fe_run_submit_dev_zero_as_a_user_types_it(tmp_path: Path) -> None:
    """The command line of the finding, in a real process: it ends at once instead of reading forever."""
    command = [sys.executable, "-m", "chiplore.simulator.fe_run", "submit", "/dev/zero", "--kernel", "k",
               "--data-dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == ["error: cannot read /dev/zero: not a regular file"]


# ---- names the device does not know -----------------------------------------------------------


def test_an_unknown_kernel_fails_before_any_device_time_is_charged(tmp_path: Path, probe: Path) -> None:
    line = refused(submit(tmp_path, probe, kernel="nope"))
    assert "declares no kernel 'nope'" in line and "mb01" in line
    assert not (tmp_path / "device" / "rngd-sim-0.json").exists()  # no clock, no job id, no charge
    ran = submit(tmp_path, probe, "--json")
    assert ran.exit_code == 0, ran.output
    result = json.loads(ran.stdout)
    assert re.fullmatch(r"rngd-sim-0/[0-9a-f]{8}-000001", result["job_id"])  # device/session-count
    assert saved(tmp_path)["ledger"]["project"] == pytest.approx(result["device_s"])  # type: ignore[index]


def test_fixture_sets_are_named_or_refused(tmp_path: Path, probe: Path) -> None:
    line = refused(submit(tmp_path, probe, "--fixtures", "g0,g9"))
    assert "'g9' is no set of one list" in line
    assert "an empty name is none" in refused(submit(tmp_path, probe, "--fixtures", "exact,,cancel"))
    assert "'smoke' is no set of one list (smoke and graded stand alone" in refused(
        submit(tmp_path, probe, "--fixtures", "smoke,smoke"))  # fmt: skip
    assert "names a set twice" in refused(submit(tmp_path, probe, "--fixtures", "g0,g0"))
    ran = submit(tmp_path, probe, "--fixtures", "g0,exact", "--json")
    assert ran.exit_code == 0, ran.output
    assert [run["fixture"] for run in json.loads(ran.stdout)["runs"]] == ["g0", "g0", "exact", "exact"]


def test_a_pack_installed_in_the_data_dir_is_graded_like_a_built_in_one(tmp_path: Path) -> None:
    """`fe-run` grades every kernel SimRNGD offers: a pack `kernel add` installed in the data dir (here the
    GQA pack under another name) is checked against its reference, not run ungraded."""
    pack = copy_pack(tmp_path, folder="mine")
    edit(pack / "kernel.toml", 'name = "gqa_project_qkv"', 'name = "my_gqa"')
    edit(pack / "baseline.fe", "kernel gqa_project_qkv(", "kernel my_gqa(")
    data = tmp_path / "data"
    unknown = submit(data, pack / "baseline.fe", kernel="my_gqa")  # not installed yet: timed, and it says so
    assert unknown.exit_code == 0 and "correctness: not graded (no kernel pack named 'my_gqa'" in unknown.stdout
    SimRNGD(kernels_dir=data / KERNELS_DIR).add_kernel(pack)  # what `chiplore kernel add` does with it
    ran = submit(data, pack / "baseline.fe", "--fixtures", "exact,cancel", "--json", kernel="my_gqa")
    assert ran.exit_code == 0, ran.output
    correctness = json.loads(ran.stdout)["correctness"]
    assert correctness is not None and correctness["passed"] and correctness["sets"] == ["exact", "cancel"]


def test_a_pack_s_own_fixture_set_is_run_by_fe_run_and_graded_with_the_check_sets(tmp_path: Path) -> None:
    """A pack listed a set of its own (`big`, larger inputs): `kernel add` took it, then `fe-run --fixtures
    big` refused it and the loop never graded it. It is a check set now, run like `exact` and `cancel`."""
    pack = copy_pack(tmp_path, folder="mine")
    edit(pack / "kernel.toml", 'name = "gqa_project_qkv"', 'name = "my_gqa"')
    edit(
        pack / "kernel.toml",
        "[fixtures.inputs.x]\n",
        '[fixtures]\nsets = ["big"]\n\n[fixtures.inputs.x]\n'
        'sets.big = { dist = { kind = "uniform", low = -6.0, high = 6.0 } }\n',
    )
    edit(pack / "baseline.fe", "kernel gqa_project_qkv(", "kernel my_gqa(")
    data = tmp_path / "data"
    spec = SimRNGD(kernels_dir=data / KERNELS_DIR).add_kernel(pack)
    assert spec.check_sets == ("exact", "cancel", "big")
    ran = submit(data, pack / "baseline.fe", "--fixtures", "big,exact", "--json", kernel="my_gqa")
    assert ran.exit_code == 0, ran.output
    correctness = json.loads(ran.stdout)["correctness"]
    assert correctness["passed"] and correctness["sets"] == ["big", "exact"]
    assert "'huge' is no set of one list" in refused(submit(data, pack / "baseline.fe", "--fixtures", "huge",
                                                            kernel="my_gqa"))  # fmt: skip


def test_a_bad_environment_value_is_one_line(tmp_path: Path, probe: Path) -> None:
    args = ["submit", str(probe), "--kernel", "mb01", "--data-dir", str(tmp_path)]
    line = refused(CliRunner().invoke(fe_run, args, env={"CHIPLORE_SEED": "abc"}))
    assert line.startswith("error: CHIPLORE_SEED: ") and "'abc'" in line


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--seed", "-1"], {}, "error: --seed: a seed is an integer from 0 to 2^63 - 1 (got -1)"),
        (["--seed", str(2**63)], {}, f"error: --seed: a seed is an integer from 0 to 2^63 - 1 (got {2**63})"),
        ([], {"CHIPLORE_SEED": "-5"}, "error: CHIPLORE_SEED: a seed is an integer from 0 to 2^63 - 1 (got '-5')"),
    ],
    ids=["option-negative", "option-past-i64", "environment-negative"],
)
def test_a_seed_out_of_range_is_one_line_and_charges_nothing(
    tmp_path: Path, probe: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    command = ["submit", str(probe), "--kernel", MB01.kernel, "--fixtures", "smoke", "--data-dir", str(tmp_path)]
    assert refused(CliRunner().invoke(fe_run, command + args, env=env)) == line
    assert not (tmp_path / "device" / "rngd-sim-0.json").exists()


def test_the_largest_seed_runs_and_the_device_refuses_a_negative_one_by_name(tmp_path: Path, probe: Path) -> None:
    ran = submit(tmp_path, probe, "--seed", str(2**63 - 1), "--json")
    assert ran.exit_code == 0, ran.output
    assert saved(tmp_path)["seed"] == 2**63 - 1
    with pytest.raises(ValueError, match="seed -1 is not an integer from 0 to 2\\^63 - 1"):
        SimDevice(-1)


def test_chiplore_refuses_a_negative_chiplore_seed_in_one_line(tmp_path: Path) -> None:
    """The other path of the finding: `CHIPLORE_SEED=-5 chiplore optimize ...`, in a real process."""
    env = os.environ | {"CHIPLORE_SEED": "-5", "CHIPLORE_DATA_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "chiplore.cli", "optimize", "sliding_attention_output", "--budget", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "a seed is an integer from 0 to 2^63 - 1" in line


def test_the_optimize_seed_takes_the_settings_range_and_refuses_the_rest_in_the_same_words() -> None:
    """--seed and CHIPLORE_SEED take 0 to 2^63 - 1 alike (OptimizeConfig refused seeds past 2^32 that the
    settings took); a seed out of range is a usage error in the settings' words."""
    assert OptimizeConfig(seed=2**40).seed == 2**40 and OptimizeConfig(seed=MAX_SEED).seed == MAX_SEED
    with pytest.raises(ValidationError):
        OptimizeConfig(seed=MAX_SEED + 1)
    for seed in ("-1", str(MAX_SEED + 1), "x"):
        result = CliRunner().invoke(chiplore, ["optimize", "--seed", seed, "--budget", "1"])
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert "Invalid value for '--seed'" in result.stderr
    assert "a seed is an integer from 0 to 2^63 - 1 (got -1)" in CliRunner().invoke(
        chiplore, ["optimize", "--seed", "-1"]).stderr  # fmt: skip


# ---- versions and JSON ------------------------------------------------------------------------


@pytest.mark.parametrize(("cli", "name"), [(ferc, "ferc"), (fe_run, "fe-run")])
def test_both_commands_tell_their_version(cli: object, name: str) -> None:
    result = CliRunner().invoke(cli, ["--version"])  # type: ignore[arg-type]
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"{name} {metadata.version('chiplore')} (") and "0.6.0" in result.stdout


def test_ferc_explain_prints_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(ferc, ["explain", "e0301", "--json", "--toolchain", "0.7.0"])
    assert result.exit_code == 0, result.output
    rule = json.loads(result.stdout)
    assert (rule["code"], rule["rule"], rule["severity"], rule["toolchain"]) == ("E0301", "0301", "error", "0.7.0")
    assert set(rule["versions"]) == {"0.5.0", "0.6.0", "0.7.0"} and rule["message"] and rule["checks"]
    unchecked = json.loads(CliRunner().invoke(ferc, ["explain", "0520", "--json", "--toolchain", "0.5.0"]).stdout)
    assert unchecked["versions"]["0.7.0"] == "E0520" and unchecked["toolchain"] == "0.5.0"
    assert "no diagnostic 'X1'" in refused(CliRunner().invoke(ferc, ["explain", "X1", "--json"]))


def test_status_and_reset_report_the_device_as_text_and_json(tmp_path: Path, probe: Path) -> None:
    runner = CliRunner()
    fresh = json.loads(runner.invoke(fe_run, ["status", "--json", "--data-dir", str(tmp_path)]).stdout)
    assert (fresh["saved"], fresh["jobs"], fresh["project_spent_s"], fresh["agents"]) == (False, 0, 0.0, [])
    job = json.loads(submit(tmp_path, probe, "--json", "--agent", "alice").stdout)
    status = json.loads(runner.invoke(fe_run, ["status", "--json", "--data-dir", str(tmp_path)]).stdout)
    assert status["saved"] and status["jobs"] == 1 and status["clock_s"] > 0
    [alice] = status["agents"]
    assert alice["agent"] == "alice" and alice["spent_today_s"] == pytest.approx(job["device_s"])
    assert alice["left_today_s"] == pytest.approx(3600 - job["device_s"])
    text = runner.invoke(fe_run, ["status", "--data-dir", str(tmp_path), "--agent", "bob"]).stdout
    assert "1 job," in text and "bob: 0.00 of 3600 device s used today" in text
    reset = json.loads(runner.invoke(fe_run, ["reset", "--json", "--data-dir", str(tmp_path)]).stdout)
    assert reset["removed"] and reset["previous"]["jobs"] == 1 and reset["problem"] is None
    assert Path(reset["backup_path"]).exists() and not Path(reset["state_path"]).exists()
    again = runner.invoke(fe_run, ["reset", "--data-dir", str(tmp_path)])
    assert again.exit_code == 0 and "nothing to reset" in again.stdout


# ---- the saved state --------------------------------------------------------------------------


def test_a_cut_write_leaves_the_previous_state(tmp_path: Path, probe: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills halfway through saving the second job: the first job's state is what remains,
    with no temporary file left behind, and the device goes on from it."""
    assert submit(tmp_path, probe).exit_code == 0
    before = (tmp_path / "device" / "rngd-sim-0.json").read_bytes()
    real_dump = json.dump

    def disk_full(state: object, handle: object) -> None:
        text = json.dumps(state)
        handle.write(text[: len(text) // 2])  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", disk_full)
    line = refused(submit(tmp_path, probe))
    assert "rngd-sim-0.json: cannot write: No space left on device" in line
    monkeypatch.setattr(json, "dump", real_dump)
    assert (tmp_path / "device" / "rngd-sim-0.json").read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "device").iterdir()) == ["rngd-sim-0.json", "rngd-sim-0.lock"]
    assert json.loads(submit(tmp_path, probe, "--json").stdout)["job_id"].endswith("-000002")


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda text: text[: len(text) // 2], "not valid JSON"),  # what an in-place write cut short left
        (lambda text: "[]", "not a JSON object"),
        (lambda text: text.replace('"now": ', '"now": "soon", "was": '), "now: Input should be a valid number"),
        (lambda text: text.replace('"seed": 0', '"seed": 7'), "with seed 7, not rngd-sim-0 with seed 0"),
    ],
    ids=["truncated", "not-an-object", "bad-field", "other-seed"],
)
def test_a_damaged_state_is_named_and_reset_by_a_command(tmp_path: Path, probe: Path, damage: object, why: str) -> None:
    assert submit(tmp_path, probe).exit_code == 0
    state = tmp_path / "device" / "rngd-sim-0.json"
    state.write_text(damage(state.read_text()))  # type: ignore[operator]
    line = refused(submit(tmp_path, probe))
    assert str(state) in line and why in line and "`fe-run reset`" in line
    status = CliRunner().invoke(fe_run, ["status", "--data-dir", str(tmp_path)])
    if "seed 7" in why:  # status shows whose state it is rather than refusing it
        assert status.exit_code == 0 and status.stdout.startswith("rngd-sim-0 (seed 7)")
    else:
        assert why in refused(status)
    reset = CliRunner().invoke(fe_run, ["reset", "--data-dir", str(tmp_path)])
    assert reset.exit_code == 0 and "moved" in reset.stdout
    assert json.loads(submit(tmp_path, probe, "--json").stdout)["job_id"].endswith("-000001")


def test_concurrent_sessions_lose_no_charge(tmp_path: Path) -> None:
    """Four workers, each with its own device object on one data dir, as four fe-run processes
    would be: every job gets its own id and every second of device time reaches the ledger."""
    store = DeviceStore(tmp_path, "rngd-sim-0")
    charged: list[tuple[str, float]] = []
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for _ in range(3):
                device = SimDevice(2, DeviceConfig())
                with store.session(device):
                    job = DeviceJob(kernel=MB01.kernel, program=PROBE, fixtures="smoke", agent=name)
                    result = device.result(device.submit(job))
                charged.append((result.job_id, result.device_s))
        except BaseException as error:  # reported below: a thread's failure must fail the test
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(f"agent{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert sorted(job_id.rsplit("-", 1)[1] for job_id, _ in charged) == [f"{n:06d}" for n in range(1, 13)]
    assert len({job_id.rsplit("-", 1)[0] for job_id, _ in charged}) == 1  # one session: the saved state's
    state = saved(tmp_path)
    assert state["count"] == 12
    assert state["ledger"]["project"] == pytest.approx(sum(s for _, s in charged))  # type: ignore[index]
