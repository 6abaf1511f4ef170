"""One graph, one chip: a graph learnt on one chip refuses learn, optimize and upgrade on another,
before anything is recorded (a forgotten CHIPLORE_SIM_TRUTH made an upgrade report the shape as
'changed by 0.7.0' and a BEST 'repaired' twice as fast, on another chip)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.schedule import OptimizeConfig
from chiplore.agents.upgrade import UpgradeRefused, upgrade
from chiplore.core.errors import ConfigError
from chiplore.ingest.chip import bind_chip, other_chip
from chiplore.ingest.learn import learn
from chiplore.kg.repo.nodes import count_by_label
from chiplore.kg.repo.targets import active_toolchain, learnt_chip, record_chip
from chiplore.kg.store import GraphStore
from chiplore.simulator.target import SimRNGD
from tests.toy import ToyChip

CHIPS = Path(__file__).parents[2] / "simulator" / "chips"
REFUSAL = (r"^this graph learnt chip SimRNGD #[0-9a-f]{12} \(CHIPLORE_SIM_TRUTH unset\), and the devices are now "
           r"SimRNGD #[0-9a-f]{12} \(CHIPLORE_SIM_TRUTH=\S+1x128\.toml\): a graph holds one chip's facts")  # fmt: skip


def test_a_graph_learnt_on_one_chip_refuses_another_before_recording_anything(
    graph: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHIPLORE_SIM_TRUTH", raising=False)
    documented = SimRNGD().chip()
    assert documented is not None
    bind_chip(graph, SimRNGD())  # what learn's first step records
    assert learnt_chip(graph, "simrngd") == (documented.id, "CHIPLORE_SIM_TRUTH unset")
    before = {label: n for label, n in count_by_label(graph).items() if label != "Activity"}
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(CHIPS / "1x128.toml"))
    other = SimRNGD()
    assert other.chip() != documented
    with pytest.raises(ConfigError, match=REFUSAL):
        learn(graph, other, "0.6.0")
    with pytest.raises(UpgradeRefused, match=REFUSAL):
        upgrade(graph, other, "0.7.0")
    with pytest.raises(ConfigError, match=REFUSAL):
        optimize(OptimizeContext(graph, other, "0.6.0"), OptimizeConfig(kernels=("sliding_attention_output",)))
    assert active_toolchain(graph, other.name) == "0.6.0"  # the upgrade moved nothing
    assert {label: n for label, n in count_by_label(graph).items() if label != "Activity"} == before
    assert learnt_chip(graph, other.name) == (documented.id, "CHIPLORE_SIM_TRUTH unset")


def test_the_same_chip_from_another_file_is_the_same_chip(graph: GraphStore, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:  # fmt: skip
    """The id is the chip's, not its file's: a copy elsewhere is accepted (its note follows it); a
    target whose devices say nothing of their chip is never refused."""
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(CHIPS / "4x256.toml"))
    bind_chip(graph, SimRNGD())
    copy = tmp_path / "board-7.toml"
    shutil.copy(CHIPS / "4x256.toml", copy)
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(copy))
    assert other_chip(graph, SimRNGD()) == ""
    bind_chip(graph, SimRNGD())
    assert learnt_chip(graph, "simrngd") == (SimRNGD().chip().id, f"CHIPLORE_SIM_TRUTH={copy}")
    assert ToyChip().chip() is None and other_chip(graph, ToyChip()) == ""


def test_the_cli_refuses_an_upgrade_on_another_chip_in_one_line(embedded_env: dict[str, str]) -> None:
    def chiplore(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "chiplore.cli", *args], env={**embedded_env, **env},
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

    assert chiplore("init").returncode == 0
    assert chiplore("learn", "--budget", "1").returncode == 0  # a first learn binds the graph to its chip
    refused = chiplore("toolchain", "upgrade", "0.7.0", CHIPLORE_SIM_TRUTH=str(CHIPS / "1x128.toml"))
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "this graph learnt chip SimRNGD #" in lines[0] and "Traceback" not in refused.stderr
    listed = json.loads(chiplore("toolchain", "list", "--json").stdout)
    assert [row["version"] for row in listed if row["status"] == "active"] == ["0.6.0"]  # the upgrade moved nothing


def test_a_chips_id_counts_only_what_its_truth_sets_apart_from_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, graph: GraphStore
) -> None:
    """A chiplore that adds a truth field keeps every chip's id (the documented chip's is pinned here: a
    change refuses every graph users have); a file that states a default is the documented chip; a file
    edited in place is another chip, and the refusal says the source is the same."""
    monkeypatch.delenv("CHIPLORE_SIM_TRUTH", raising=False)
    documented = SimRNGD().chip()
    assert documented is not None and documented.id == "SimRNGD #4bc8495eef4c"
    chip = tmp_path / "chip.toml"
    chip.write_text("engine_bw = 224.0\n")  # the default
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(chip))
    assert SimRNGD().chip().id == documented.id  # type: ignore[union-attr]
    bind_chip(graph, SimRNGD())
    edited = tmp_path / "same-name" / "chip.toml"  # truth files are read once per path: a new path, the same note
    edited.parent.mkdir()
    edited.write_text("engine_bw = 250.0\n")
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(edited))
    record_chip(graph, "simrngd", documented.id, SimRNGD().chip().note)  # type: ignore[union-attr]
    assert "(the same source, whose chip has changed since)" in other_chip(graph, SimRNGD())


def test_a_graph_an_older_chiplore_learnt_is_refused_an_upgrade_on_a_chip_of_another_shape(
    embedded_graph: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No chip is recorded on a graph learnt before chips were (its Target has none): the upgrade asks the
    compiler whether it still takes the learnt shape, as optimize does, and the next learn binds the chip."""
    monkeypatch.delenv("CHIPLORE_SIM_TRUTH", raising=False)
    learn(embedded_graph, SimRNGD(), "0.6.0", budget_s=1)  # the shape (MB00) costs no device time
    embedded_graph.write("MATCH (t:Target) REMOVE t.chip, t.chip_note")  # what an older chiplore left
    monkeypatch.setenv("CHIPLORE_SIM_TRUTH", str(CHIPS / "1x128.toml"))
    with pytest.raises(UpgradeRefused, match=r"^this chip is not the one the graph learnt \(2 clusters x 256 slices"):
        upgrade(embedded_graph, SimRNGD(), "0.7.0")
    assert active_toolchain(embedded_graph, "simrngd") == "0.6.0"
    monkeypatch.delenv("CHIPLORE_SIM_TRUTH")
    bind_chip(embedded_graph, SimRNGD())  # the next learn's first step, on the chip it learnt
    assert learnt_chip(embedded_graph, "simrngd") == (SimRNGD().chip().id, "CHIPLORE_SIM_TRUTH unset")  # type: ignore[union-attr]
