"""`chiplore report` and `chiplore demo`: the HTML report opened in headless Chromium (no console
errors, figures present and labelled, a screenshot saved), on a graph with only `learn` and after
a small demo whose table matches `chiplore status --json`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chiplore.cli import main
from tests.helpers import QUICK_SEARCH

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--enable-logging=stderr", "--v=0")  # fmt: skip
CONSOLE = re.compile(r":CONSOLE[:(]")


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def open_in_chromium(page: Path, tmp_path: Path) -> tuple[str, list[str], Path]:
    """The page's DOM after load, the console messages it produced, and a screenshot."""
    assert CHROMIUM, "the report test needs Debian's chromium (.ci/run installs it)"
    shot = tmp_path / f"{page.stem}.png"
    common = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2400"]
    dom = subprocess.run([*common, "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    shown = subprocess.run([*common, f"--screenshot={shot}", page.resolve().as_uri()], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert dom.returncode == 0 and shown.returncode == 0, dom.stderr[-2000:] + shown.stderr[-2000:]
    console = [line for line in (dom.stderr + shown.stderr).splitlines() if CONSOLE.search(line)]
    return dom.stdout, console, shot


def test_the_console_check_catches_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    _, console, _ = open_in_chromium(page, tmp_path)
    assert any("undefinedFunction" in line for line in console)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}


@pytest.mark.slow
def test_a_report_with_only_learn_renders_and_says_what_is_empty(env: dict[str, str], tmp_path: Path) -> None:
    assert run(env, "init").exit_code == 0
    assert run(env, "learn", "--budget", "120").exit_code == 0
    out = tmp_path / "report.html"
    assert run(env, "report", "--out", str(out)).exit_code == 0
    dom, console, shot = open_in_chromium(out, tmp_path)
    assert not console, console
    assert shot.stat().st_size > 10_000
    for empty in ("No kernel has been optimized yet", "No device run of a kernel yet", "No design tree yet",
                  "The judge has decided nothing yet", "No toolchain upgrade yet"):  # fmt: skip
        assert empty in dom, empty
    assert "measured against documented" in dom and "Rules in force" in dom  # learn's sections are full


@pytest.mark.slow
@pytest.mark.timeout(900)  # learn, three optimizes, an upgrade and two browser runs: ~250 s beside another worker
def test_a_small_demo_matches_status_and_its_report_has_labelled_figures(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "demo"
    quick = {**env, **QUICK_SEARCH}  # a small demo
    result = run(quick, "demo", "--patience", "1", "--budget", "60", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    demo = json.loads(result.stdout)
    status = json.loads(run(env, "status", "--json").stdout)
    assert [{k: v for k, v in row.items() if k != "accepted_changes"} for row in demo["kernels"]] == status
    assert demo["geomean_speedup"] > 5 and all(row["accepted_changes"] >= 1 for row in demo["kernels"])
    assert json.loads(run(env, "toolchain", "list", "--json").stdout)[-1]["status"] == "active"  # upgraded
    dom, console, shot = open_in_chromium(out / "report.html", tmp_path)
    assert not console, console
    assert shot.stat().st_size > 10_000
    figures = re.findall(r"<figure aria-label=\"([^\"]+)\">.*?<svg.*?</svg>\s*<figcaption>([^<]+)</figcaption>", dom,
                         re.S)  # fmt: skip
    labels = [label for label, _ in figures]
    assert {"convergence of QKV", "convergence of O", "convergence of FFN"} <= set(labels), labels
    assert all(caption.strip() for _, caption in figures)
    assert "0.6.0 &rarr; 0.7.0" in dom or "0.6.0 → 0.7.0" in dom
    again = run(env, "demo", "--out", str(out), "--json")  # a finished demo runs nothing again
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["kernels"] == demo["kernels"]
