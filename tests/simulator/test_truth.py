"""The chip's truth file (CHIPLORE_SIM_TRUTH): every value finite and physically sensible, and every
bad file refused with one line that names the file and the field, by the loader and by the CLIs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.core.errors import ConfigError
from chiplore.simulator._truth import ENV_VAR, MAX_TRUTH_BYTES, ChipShape, ChipTruth, TruthFileError, load_truth
from chiplore.simulator.fe_run import main as fe_run
from chiplore.simulator.ferc import main as ferc
from tests.simulator.one_line import refused
from tests.simulator.programs import baseline_path

O_BASELINE = str(baseline_path("o"))
README_CHIP = """engine_bw = 165.0
dmn_bw = 190.0
cluster_ingress = 215.0
dma_startup = 460.0
dma_chain_startup = 240.0
lut_bpc = 2.2
"""


def truth_file(tmp_path: Path, text: str, name: str = "chip.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_readme_chip_and_the_defaults_are_valid(tmp_path: Path) -> None:
    chip = load_truth("0.6.0", truth_file(tmp_path, README_CHIP))
    assert (chip.engine_bw, chip.dmn_bw, chip.cluster_ingress, chip.lut_bpc) == (165.0, 190.0, 215.0, 2.2)
    # 0.7.0 shortens the chip's own chained start-up (x 90/340), not to the default chip's 90
    assert load_truth("0.7.0", truth_file(tmp_path, README_CHIP)).dma_chain_startup == pytest.approx(240 * 90 / 340)
    assert load_truth("0.6.0", path="") == ChipTruth()
    json_chip = truth_file(tmp_path, json.dumps({"dma_startup": 460, "noise_sigma": 0.0}), "chip.json")
    assert load_truth(None, json_chip).dma_startup == 460.0  # an integer is a fine float


@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        ("clock_ghz = inf\n", "clock_ghz", "finite"),
        ("dmn_bw = nan\n", "dmn_bw", "finite"),
        ("engine_bw = -inf\n", "engine_bw", "finite"),
        ("latency_fetch = -3\n", "latency_fetch", "greater than or equal to 0"),
        ("dma_startup = -1.0\n", "dma_startup", "greater than or equal to 0"),
        ("noise_sigma = 50\n", "noise_sigma", "less than or equal to 0.5"),
        ("outlier_p = 0.9\n", "outlier_p", "less than or equal to 0.5"),
        ("xcluster_factor = 1.5\n", "xcluster_factor", "less than or equal to 1"),
        ("interference = 0\n", "interference", "greater than 0"),
        ("warm_factor = 0.5\n", "warm_factor", "greater than or equal to 1"),
        ("cluster_ingress = 0\n", "cluster_ingress", "greater than or equal to 0.001"),
        ("hbm_bw = 1e300\n", "hbm_bw", "less than or equal to"),
        ("drift_period_s = 1e-300\n", "drift_period_s", "greater than or equal to 1"),
        ("engine_bw = true\n", "engine_bw", "valid number"),
        ('engine_bw = "224"\n', "engine_bw", "valid number"),
        ("hbm_unit = 256.5\n", "hbm_unit", "valid integer"),
        ("hbm_unit = 300\n", "hbm_unit", "300 is not a power of two"),  # accepted, and learnt as 256
        ("outlier_low = 1.7\n", "outlier_low", "must not exceed outlier_high"),
        ("dmn_bandwidth = 3.0\n", "dmn_bandwidth", "did you mean 'dmn_bw'"),
        ("clusters = 4\n", "clusters", "the chip's shape goes in its [shape] table ([shape] clusters = ...)"),
    ],
)
def test_a_value_that_no_chip_could_have_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, text: str, field: str, why: str
) -> None:
    chip = truth_file(tmp_path, text)
    with pytest.raises(TruthFileError) as caught:
        load_truth("0.6.0", chip)
    message = str(caught.value)
    assert message.startswith(f"{ENV_VAR}={chip}: ") and field in message and why in message, message
    assert "\n" not in message


def test_every_field_has_finite_bounds() -> None:
    """No field is left unconstrained: each has a lower and an upper bound, the shape's too (the
    shape tables are checked field by field)."""
    fields = {**ChipTruth.model_fields, **{f"shape.{k}": v for k, v in ChipShape.model_fields.items()}}
    for name, info in fields.items():
        if name in ("shape", "docs_shape"):
            continue
        bounds = {type(m).__name__ for m in info.metadata}
        assert bounds & {"Ge", "Gt"} and bounds & {"Le", "Lt"}, f"{name} is unbounded: {info.metadata}"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.write_bytes(bytes(range(128, 256))), "not UTF-8 text"),
        (lambda p: p.write_text("dmn_bw = \n"), "not valid TOML"),
        (lambda p: p.write_text("x" * (MAX_TRUTH_BYTES + 1)), "over the"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: None, "No such file"),
    ],
    ids=["binary", "malformed", "huge", "directory", "missing"],
)
def test_an_unreadable_truth_file_is_one_line(tmp_path: Path, make: object, why: str) -> None:
    chip = tmp_path / "chip.toml"
    make(chip)  # type: ignore[operator]
    with pytest.raises(TruthFileError, match=why) as caught:
        load_truth(None, chip)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, ConfigError)  # so chiplore's own CLI (learn, ...) prints it as one line too


def test_a_device_file_as_the_truth_is_refused_without_reading_it() -> None:
    with pytest.raises(TruthFileError, match="not a regular file"):
        load_truth(None, "/dev/zero")


def test_a_json_truth_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(TruthFileError, match="expected a table of ChipTruth fields, got list"):
        load_truth(None, truth_file(tmp_path, "[1, 2]", "chip.json"))
    with pytest.raises(TruthFileError, match="clock_ghz = inf"):
        load_truth(None, truth_file(tmp_path, '{"clock_ghz": Infinity}', "inf.json"))


# ---- the command lines -------------------------------------------------------------------------

BAD_TRUTHS = {
    "out of range": ("noise_sigma = 50\n", "noise_sigma"),
    "infinite": ("clock_ghz = inf\n", "clock_ghz"),
    "negative latency": ("latency_commit = -8\n", "latency_commit"),
    "malformed": ("dmn_bw = \n", "not valid TOML"),
    "binary": (None, "not UTF-8"),
}


def bad_truth(tmp_path: Path, case: str) -> tuple[Path, str]:
    text, expected = BAD_TRUTHS[case]
    chip = tmp_path / f"{case.replace(' ', '_')}.toml"
    if text is None:
        chip.write_bytes(b"\xff\xfe\x00binary")
    else:
        chip.write_text(text)
    return chip, expected


@pytest.mark.parametrize("case", list(BAD_TRUTHS))
def test_fe_run_refuses_a_bad_truth_file_in_one_line_and_charges_nothing(tmp_path: Path, case: str) -> None:
    chip, expected = bad_truth(tmp_path, case)
    args = ["submit", O_BASELINE, "--kernel", "sliding_attention_output", "--fixtures", "smoke",
            "--data-dir", str(tmp_path / "data")]  # fmt: skip
    line = refused(CliRunner().invoke(fe_run, args, env={ENV_VAR: str(chip)}))
    assert str(chip) in line and expected in line
    assert not (tmp_path / "data" / "device" / "rngd-sim-0.json").exists()


@pytest.mark.parametrize("case", list(BAD_TRUTHS))
def test_ferc_check_refuses_a_bad_truth_file_instead_of_an_internal_compiler_error(tmp_path: Path, case: str) -> None:
    chip, expected = bad_truth(tmp_path, case)
    line = refused(CliRunner().invoke(ferc, ["check", O_BASELINE], env={ENV_VAR: str(chip)}))
    assert str(chip) in line and expected in line and "internal compiler error" not in line


def test_a_json_chip_file_is_read_as_json_whatever_the_case_of_its_suffix(tmp_path: Path) -> None:
    chip = truth_file(tmp_path, json.dumps({"engine_bw": 190.0}), "chip.JSON")  # was "not valid TOML"
    assert load_truth("0.6.0", chip).engine_bw == 190.0
