"""Toolchain versions and the rules checked so far (E0101, E0102, E0103, W0702), per version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiplore.simulator._truth import load_truth
from chiplore.simulator.ferc import main as ferc
from chiplore.simulator.toolchain.check import RULES_CHECKED, check
from chiplore.simulator.toolchain.rules import RULES, VERSIONS, lookup
from chiplore.simulator.toolchain.versions import SPECS, spec
from tests.simulator.programs import all_programs, baseline, baseline_path, label, program_path

PRELUDE = """axes! { H = 64, K = 32 }
layout One = { cluster: [1 # 2], slice: [1 # 256] };
"""


PARAMS = "x: &hbm<bf16>[H], y: &mut hbm<bf16>[H], z: &hbm<f8e4m3>[H], s: &hbm<f32>[H]"


def program(body: str, params: str = PARAMS, toolchain: str = "") -> str:
    header = f'#![toolchain = "{toolchain}"]\n' if toolchain else ""
    # The output is written at the end, so only what a case is about is reported.
    output = "    let out_: dm<bf16>{..One, elem: [H]} = x.dma(engines = [3]);\n    out_.dma_into(y, engines = [3]);\n"
    return f"{header}{PRELUDE}kernel k({params}) {{\n{body}\n{output}}}\n"


def codes(source: str, version: str | None = None) -> list[str]:
    return [d.code for d in check(source, version).diagnostics]


GOOD = (
    "    let a: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n"
    "    let f: dm<f8e4m3>{..One, elem: [H]} = z.dma(engines = [1]);\n"
    "    let g: dm<f32>{..One, elem: [H]} = s.dma(engines = [2]);\n"
    "    a.dma_into(y, engines = [0]);"
)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_plain_program_is_clean_in_every_version(version: str) -> None:
    assert codes(program(GOOD), version) == []


# (construct, source snippet, versions that accept it)
CONSTRUCT_CASES = [
    ("lut", "main(f).fetch(time = [H / 32], packet = [H % 32]).lut(bf16).commit()", {"0.5.0"}),
    ("decode", "main(f).fetch(time = [H / 32], packet = [H % 32]).decode(bf16).commit()", {"0.6.0", "0.7.0"}),
    ("cast", "main(a).fetch(time = [H / 16], packet = [H % 16]).cast(f32).commit()", {"0.5.0", "0.6.0"}),
    ("widen", "main(a).fetch(time = [H / 16], packet = [H % 16]).widen(f32).commit()", {"0.7.0"}),
    ("narrow", "main(g).fetch(time = [H / 8], packet = [H % 8]).vector(exp()).narrow(bf16).commit()", {"0.7.0"}),
    ("dma_order", "x.dma(engines = [0], order = [H / 8])", {"0.6.0", "0.7.0"}),
    ("dma_at", "x.dma(engines = [0], at = 0)", {"0.5.0"}),
    ("at_addr", "dm::at_addr(0)", {"0.5.0"}),
    ("result_all", "main(a).fetch(time = [H / 8], packet = [H % 8]).reduce_slices(add, group = [1], result = all)"
     ".commit()", {"0.5.0", "0.6.0"}),
    ("allreduce_slices", "main(a).fetch(time = [H / 8], packet = [H % 8]).allreduce_slices(add, group = [1])"
     ".commit()", {"0.7.0"}),
    ("reduce_clusters", "main(a).fetch(time = [H / 8], packet = [H % 8]).reduce_clusters(add).commit()", {"0.7.0"}),
]  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("construct", "snippet", "accepted"), CONSTRUCT_CASES, ids=[c[0] for c in CONSTRUCT_CASES])
def test_version_vocabulary(construct: str, snippet: str, accepted: set[str], version: str) -> None:
    source = program(f"{GOOD}\n    let t = {snippet};")
    found = codes(source, version)
    if version in accepted:
        assert "E0103" not in found, check(source, version).diagnostics
    else:
        assert found.count("E0103") == 1, found


def test_lut_under_060_names_decode_and_cast_under_070_names_widen_and_narrow() -> None:
    lut = check(program(f"{GOOD}\n    let t = {CONSTRUCT_CASES[0][1]};"), "0.6.0").diagnostics
    assert [d.code for d in lut] == ["E0103"] and "'.decode(D)'" in lut[0].message
    cast = check(program(f"{GOOD}\n    let t = {CONSTRUCT_CASES[2][1]};"), "0.7.0").diagnostics
    assert [d.code for d in cast] == ["E0103"]
    assert "'.widen(D)'" in cast[0].message and "'.narrow(D)'" in cast[0].message


def test_buffers_field_is_new_in_070() -> None:
    source = program("    let a: dm<bf16>{..One, elem: [H], buffers: 2} = x.dma(engines = [0]);")
    assert codes(source, "0.7.0") == []
    assert codes(source, "0.6.0") == ["E0103"]


@pytest.mark.parametrize("version", VERSIONS)
def test_pipeline_attribute_is_deprecated_only_in_070(version: str) -> None:
    source = program(f"    #[pipeline(depth = 2)]\n    for c in 0..2 {{\n{GOOD}\n    }}")
    found = check(source, version).diagnostics
    if version == "0.7.0":
        assert [(d.code, d.severity) for d in found] == [("W0702", "warning")]
        assert check(source, version).ok, "a warning still compiles"
    else:
        assert found == ()


UNKNOWN_CASES = [
    ("dtype", "    let a: dm<bf17>{..One, elem: [H]} = x.dma(engines = [0]);", "bf16"),
    ("axis", "    let a: dm<bf16>{..One, elem: [Hh]} = x.dma(engines = [0]);", "H"),
    ("layout", "    let a: dm<bf16>{..Onw, elem: [H]} = x.dma(engines = [0]);", "One"),
    ("type", "    let a: Tile = x.dma(engines = [0]);", None),
    ("name", "    let a: dm<bf16>{..One, elem: [H]} = xx.dma(engines = [0]);", "x"),
    ("method", "    let a: dm<bf16>{..One, elem: [H]} = x.dmaa(engines = [0]);", "dma"),
    ("fn", "    let a = mainn(x);", "main"),
    ("fn", "    let a = dm::emtpy();", "dm::empty"),
]


@pytest.mark.parametrize(("kind", "body", "suggestion"), UNKNOWN_CASES, ids=[c[0] for c in UNKNOWN_CASES])
def test_unknown_names_are_e0102_with_a_suggestion(kind: str, body: str, suggestion: str | None) -> None:
    diagnostics = check(program(body), "0.6.0").diagnostics
    assert [d.code for d in diagnostics] == ["E0102"], diagnostics
    assert diagnostics[0].message.startswith(f"unknown {kind} ")
    if suggestion:
        assert diagnostics[0].message.endswith(f"did you mean '{suggestion}'?")
    assert diagnostics[0].span is not None


def test_unknown_header_version_is_reported_and_checking_goes_on() -> None:
    result = check(program(GOOD, toolchain="9.9.9"))
    assert [d.code for d in result.diagnostics] == ["E0103"] and "9.9.9" in result.diagnostics[0].message
    assert result.version == "0.6.0"
    with pytest.raises(ValueError, match="unknown toolchain"):
        check(GOOD, "9.9.9")


def test_header_selects_the_version_and_an_explicit_one_wins() -> None:
    source = program(f"{GOOD}\n    let t = {CONSTRUCT_CASES[0][1]};", toolchain="0.5.0")
    assert check(source).version == "0.5.0" and check(source).ok
    assert not check(source, "0.6.0").ok


def test_version_specs_describe_the_api_changes() -> None:
    assert spec("0.6.0").constructs_removed == {"lut", "at_addr", "dma_at"}
    assert spec("0.7.0").constructs_removed == {"cast", "result_all"}
    assert {"widen", "narrow", "reduce_clusters", "allreduce_slices", "buffers"} <= spec("0.7.0").constructs_added
    assert (
        set(spec("0.7.0").truth_scales) == {"dma_chain_startup", "dm_usable_per_slice"}
        and not spec("0.6.0").truth_scales
    )
    default = load_truth("0.7.0", path="")
    assert (default.dma_chain_startup, default.dm_usable_per_slice) == (90.0, 464 * 1024)
    assert spec("0.5.0").severity["0205"] == "W" and spec("0.6.0").severity["0205"] == "E"
    assert spec("0.6.0").severity["0520"] == "N" and spec("0.5.0").severity["0520"] is None
    assert set(SPECS) == set(VERSIONS)


def test_rule_catalogue_covers_section_3_2() -> None:
    numbers = {rule.number for rule in RULES}
    # the 33 rows of 3.2, W0702 of 3.3, and issue 20's: the budget (E0104), undefined reads (N0206), DMA dtypes (E0324);
    # and what E0100 used to answer: the reader's limits (E0105), one kernel of HBM parameters (E0106), a construct of
    # the wrong kind (E0107), DMA endpoints (E0325), names bound once (E0502)
    assert len(numbers) == len(RULES) == 42
    assert lookup("W0205") is lookup("E0205") is lookup("0205")
    assert set(RULES_CHECKED) == numbers  # every rule is checked


@pytest.mark.parametrize("path", all_programs(), ids=label)
def test_ferc_check_passes_every_shipped_program(path: Path) -> None:
    result = CliRunner().invoke(ferc, ["check", str(path)])
    assert result.exit_code == 0, result.output
    header = "0.5.0" if '"0.5.0"' in path.read_text().splitlines()[0] else "0.6.0"  # o_missing_cast needs 0.5.0
    assert f"ok under toolchain {header}" in result.output


def test_ferc_check_shows_a_caret_and_fails(tmp_path: Path) -> None:
    broken = tmp_path / "broken.fe"
    broken.write_text(program("    let a = x.dma(engines = [0]) +;"))
    result = CliRunner().invoke(ferc, ["check", str(broken)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("error[E0101]: syntax error at 4:35")
    caret_line = next(line for line in lines if line.strip().endswith("^") and "|" in line)
    assert caret_line.index("^") == lines[lines.index(caret_line) - 1].index("+;") + 1


def test_ferc_check_json_and_explain() -> None:
    path = program_path("o_opt")
    result = CliRunner().invoke(ferc, ["check", str(path), "--toolchain", "0.7.0", "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.output)
    assert payload["version"] == "0.7.0" and {d["code"] for d in payload["diagnostics"]} == {"E0103", "W0702"}
    explained = CliRunner().invoke(ferc, ["explain", "E0520", "--toolchain", "0.6.0"])
    assert explained.exit_code == 0 and explained.output.startswith("N0520:")
    assert CliRunner().invoke(ferc, ["explain", "E0999"]).exit_code == 2


def test_ferc_is_a_console_script() -> None:
    ferc_path = Path(sys.executable).parent / "ferc"
    completed = subprocess.run(
        [str(ferc_path), "check", str(baseline_path("qkv"))],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    x: &hbm<bf16>[Ns, Gs, Ds],", "    xx: &hbm<bf16>[Ns, Gs, Ds],",
         "unknown parameter 'xx' of kernel sliding_attention_output: the harness does not pass it; did you mean 'x'?"),
        ("    o_weight: &hbm<f8e4m3>[H, Qs],", "    o_weight: &hbm<bf16>[H, Qs],",
         "parameter 'o_weight' of kernel sliding_attention_output differs from the harness signature "
         "'o_weight: &hbm<f8e4m3>[H, Qs]' (H = 3840, Ns = 8, Gs = 2, Ds = 256)"),
        ("    x: &hbm<bf16>[Ns, Gs, Ds],", "    x: &hbm<bf16>[Gs, Ns, Ds],",
         "parameter 'x' of kernel sliding_attention_output differs from the harness signature "
         "'x: &hbm<bf16>[Ns, Gs, Ds]' (Ns = 8, Gs = 2, Ds = 256)"),
        ("axes! { H = 3840,", "axes! { H = 3584,",
         "parameter 'post_attn_rms_weight' of kernel sliding_attention_output differs from the harness signature "
         "'post_attn_rms_weight: &hbm<bf16>[H]' (H = 3840)"),
        ("    residual: &mut hbm<bf16>[H],", "    residual: &hbm<bf16>[H],",
         "parameter 'residual' of kernel sliding_attention_output differs from the harness signature "
         "'residual: &mut hbm<bf16>[H]' (H = 3840)"),
    ],
)  # fmt: skip
def test_a_harness_kernel_must_take_the_harness_parameters(old: str, new: str, message: str) -> None:
    source = baseline("o")
    assert old in source
    assert message in [d.message for d in check(source.replace(old, new, 1)).diagnostics if d.code == "E0102"]


def test_a_harness_kernel_lacking_or_reordering_parameters() -> None:
    source = baseline("o")
    dropped = source.replace("    o_weight_scale: &hbm<bf16>[H],\n", "", 1)
    messages = [d.message for d in check(dropped).diagnostics if d.code == "E0102"]
    assert "kernel sliding_attention_output lacks parameter 'o_weight_scale: &hbm<bf16>[H]' that the harness " \
        "passes" in messages  # fmt: skip
    swapped = source.replace("    o_weight_scale: &hbm<bf16>[H],\n", "", 1).replace(
        "    x: &hbm<bf16>[Ns, Gs, Ds],\n", "    x: &hbm<bf16>[Ns, Gs, Ds],\n    o_weight_scale: &hbm<bf16>[H],\n", 1
    )
    assert [d.message.split(":")[0] for d in check(swapped).diagnostics if d.code == "E0102"] == [
        "parameters of kernel sliding_attention_output are out of the harness order"
    ]
    # Another kernel name is a probe or a test, not held to any signature.
    assert check(source.replace("kernel sliding_attention_output(", "kernel probe(", 1)).ok


def test_070_changes_a_chip_files_values_by_its_factors_not_to_the_default_chips(tmp_path: Path) -> None:
    """A chip of a 10-cycle chained start-up and 2 MiB of DM a slice: 0.7.0 set both to the default chip's 90
    cycles and 464 KB (nine times slower, and a quarter of the DM), where it shortens and reserves."""
    chip = tmp_path / "chip.toml"
    chip.write_text("dma_chain_startup = 10.0\ndm_usable_per_slice = 2097152\n")
    before, after = load_truth("0.6.0", path=chip), load_truth("0.7.0", path=chip)
    assert (before.dma_chain_startup, before.dm_usable_per_slice) == (10.0, 2097152)
    assert after.dma_chain_startup == pytest.approx(10.0 * 90 / 340)
    assert after.dm_usable_per_slice == 2097152 * 464 // 480 // 8 * 8 and after.dm_usable_per_slice % 8 == 0
