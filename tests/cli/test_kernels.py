"""`chiplore kernel list|add`, driven as a user would: a pack added from a folder is listed, optimized
and reported with no code change; a malformed one is one red line and leaves the graph as it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chiplore.cli import main
from chiplore.kg.repo.progress import bound_by
from chiplore.simulator.toolchain.harness import BUILTIN_PACKS
from tests.helpers import QUICK_SEARCH

GEMMA = ["sliding_project_qkv", "sliding_attention_output", "decoder_feedforward"]
GQA = "gqa_project_qkv"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environment = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data"), "CHIPLORE_KERNELS": ""}
    result = run(environment, "init")
    assert result.exit_code == 0, result.output
    return environment


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    """A user's copy of a shipped pack: not built in, so it is validated when added."""
    folder = tmp_path / "my-packs" / "gqa"
    shutil.copytree(BUILTIN_PACKS / GQA, folder)
    return folder


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def one_line_error(result: Result, *needles: str) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def listed(env: dict[str, str]) -> list[dict[str, object]]:
    result = run(env, "kernel", "list", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def graph_nodes(env: dict[str, str]) -> list[dict[str, object]]:
    result = run(env, "cypher", "MATCH (n) RETURN labels(n) AS labels, count(n) AS n ORDER BY n, labels", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_kernel_list_shows_the_built_in_kernels_with_their_bounds(env: dict[str, str]) -> None:
    rows = listed(env)
    assert [r["kernel"] for r in rows] == GEMMA and {r["from"] for r in rows} == {"built-in"}
    assert rows[1] | {"description": ""} == {"kernel": "sliding_attention_output", "label": "O",
                                              "weight_bytes": 15_736_320, "bound_cycles": rows[1]["bound_cycles"],
                                              "from": "built-in", "description": ""}  # fmt: skip
    assert round(rows[1]["bound_cycles"]) == 27_608  # type: ignore[call-overload]
    table = run(env, "kernel", "list")
    assert table.exit_code == 0 and "FFN" in table.stdout and "99.5" in table.stdout and "built-in" in table.stdout


@pytest.mark.slow
def test_an_added_pack_is_listed_optimized_and_reported(env: dict[str, str], pack: Path, tmp_path: Path) -> None:
    before = graph_nodes(env)
    added = run(env, "kernel", "add", str(pack), "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["kernel"] == GQA and json.loads(added.stdout)["from"] == "installed"
    assert graph_nodes(env) == before  # adding a kernel does not touch the graph
    assert [(r["kernel"], r["from"]) for r in listed(env)][-1] == (GQA, "installed")

    optimized = run({**env, **QUICK_SEARCH}, "optimize", GQA, "--budget", "30")  # table mode: other tests read --json
    assert optimized.exit_code == 0, optimized.output
    stops = [line for line in optimized.stdout.splitlines() if line.startswith(f"{GQA} stopped: ")]
    assert len(stops) == 1 and len(stops[0]) > len(f"{GQA} stopped: "), optimized.stdout  # the reason, in words
    assert "proposals" in optimized.stdout and "device-s" in optimized.stdout
    [status] = json.loads(run(env, "status", "--json").stdout)
    assert status["kernel"] == GQA and status["baseline_cycles"] > 4 * status["bound_cycles_true"]
    runs = run(env, "cypher", "MATCH (r:DeviceRun {kernel: $k}) RETURN r.status AS status, r.fixtures AS fixtures",
               "-p", f"k={GQA}", "--json")  # fmt: skip
    assert {"status": "ok", "fixtures": "graded"} in json.loads(runs.stdout)  # graded against the pack's reference
    # the root says what bounds it, as a proposal does: status explains a BEST nothing beat
    root = run(env, "cypher", "MATCH (:Kernel {name: $k})-[:ROOT]->(d) RETURN d.rationale AS why", "-p", f"k={GQA}",
               "--json")  # fmt: skip
    assert bound_by(json.loads(root.stdout)[0]["why"]).startswith("bound by the "), root.stdout
    report = tmp_path / "report.html"
    assert run(env, "report", "--out", str(report)).exit_code == 0
    text = report.read_text()
    assert GQA in text and "convergence of GQA" in text  # the pack's label names its figure


def test_show_prints_a_kernels_baseline_as_its_pack_holds_it(env: dict[str, str], pack: Path) -> None:
    """The shipped baselines are the docs' worked examples of a norm, RoPE and f4 decoding: a user reaches
    them by name, not by the install path (a user who wrote a norm found its idiom only through `best`)."""
    shown = run(env, "kernel", "show", "sliding_attention_output")
    assert (
        shown.exit_code == 0
        and shown.stdout == (BUILTIN_PACKS / "sliding_attention_output" / "baseline.fe").read_text()
    )
    assert run(env, "kernel", "add", str(pack)).exit_code == 0
    record = json.loads(run(env, "kernel", "show", GQA, "--json").stdout)
    assert record["from"] == "installed" and record["baseline"] == (pack / "baseline.fe").read_text()
    one_line_error(run(env, "kernel", "show", "nope"), "unknown kernel 'nope'", GQA)


def test_adding_the_same_kernel_twice_or_a_built_in_name_is_refused(env: dict[str, str], pack: Path) -> None:
    assert run(env, "kernel", "add", str(pack)).exit_code == 0
    one_line_error(run(env, "kernel", "add", str(pack)), f"kernel {GQA} is already installed")
    one_line_error(run(env, "kernel", "add", str(BUILTIN_PACKS / "decoder_feedforward")), "is built in")


@pytest.mark.parametrize(
    ("file", "old", "new", "needle"),
    [
        ("kernel.toml", 'label = "GQA"', 'label = "GQA', "not valid TOML"),
        ("baseline.fe", "mul(0.0078125)", "mul(0.015625)", "fails its reference on the smoke fixtures"),
        ("reference.py", 'q.reshape(np.shape(inputs["q_out"]))', "q", "output q_out has shape (4096,)"),
    ],
    ids=["bad TOML", "baseline fails its reference", "shape mismatch"],
)
def test_a_malformed_pack_is_one_error_and_changes_nothing(env: dict[str, str], pack: Path, file: str, old: str,
                                                           new: str, needle: str) -> None:  # fmt: skip
    path = pack / file
    path.write_text(path.read_text().replace(old, new))
    before = graph_nodes(env)
    one_line_error(run(env, "kernel", "add", str(pack)), str(pack) if file == "kernel.toml" else GQA, needle)
    assert graph_nodes(env) == before
    assert [r["kernel"] for r in listed(env)] == GEMMA
    assert not (Path(env["CHIPLORE_DATA_DIR"]) / "kernels" / GQA).exists()


def test_a_pack_on_chiplore_kernels_is_offered_and_a_broken_one_stops_every_command(
    env: dict[str, str], pack: Path
) -> None:
    on_path = {**env, "CHIPLORE_KERNELS": str(pack.parent)}
    assert [(r["kernel"], r["from"]) for r in listed(on_path)][-1] == (GQA, "CHIPLORE_KERNELS")
    (pack / "reference.py").write_text("import numpy\n")
    one_line_error(run(on_path, "kernel", "list"), "defines no function `reference(inputs)`")
    one_line_error(run(on_path, "status"), "defines no function")


def test_a_data_dir_without_a_graph_is_refused(tmp_path: Path, pack: Path) -> None:
    env = {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "none")}
    one_line_error(run(env, "kernel", "add", str(pack)), "no chiplore graph")
    assert not (tmp_path / "none" / "kernels").exists()


UNSPACED = Path(__file__).resolve().parents[1] / "simulator" / "unspaced"
USER_PACKS = Path(__file__).resolve().parents[1] / "simulator" / "packs"


def test_adding_a_pack_says_what_optimize_will_not_do_with_it(env: dict[str, str]) -> None:
    """A pack with f32 weights loads (its generated design wrote `.decode(bf16)` on an f32 stream, and the
    pack was refused for chiplore's fault); `kernel add` says the generator has no design space for it, and
    that a 0.7.0 baseline does not compile under the graph's 0.6.0, where it said "optimize optimizes it"."""
    added = run(env, "kernel", "add", str(UNSPACED / "f32_weights"), "--json")
    assert added.exit_code == 0, added.output
    [note] = json.loads(added.stdout)["notes"]
    assert "no design space for it (matvec h: f32 weights (w) reach no contraction" in note, note
    newer = run(env, "kernel", "add", str(USER_PACKS / "moe_router_logits"))
    assert newer.exit_code == 0, newer.output
    assert "note: its baseline does not compile under this graph's toolchain 0.6.0" in " ".join(newer.stdout.split())
    plain = run(env, "kernel", "add", str(USER_PACKS / "matvec_of_matvec"), "--json")  # a matvec of a matvec
    assert plain.exit_code == 0 and json.loads(plain.stdout)["notes"] == [], plain.output
