"""The progress lines of a command, in a pipe and on a terminal: the BEST they show is the current
kernel's, the device seconds this run's, a bar never past its end, a note never cut."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from chiplore.cli.progress import ProgressStyle, Reporter

pytestmark = pytest.mark.unit

BEST = {"qkv": "aaaaaaaaaa 59,384 cycles", "o_proj": None}  # o_proj has no BEST yet


def test_a_new_kernel_never_shows_the_previous_kernels_best(capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[str | None] = []

    def refresh(kernel: str | None) -> tuple[float | None, str | None]:
        asked.append(kernel)
        return 12.0, BEST.get(kernel or "")

    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=refresh) as reporter:
        note = reporter.step("optimize")
        note("baseline measured", kernel="qkv")
        note("the architect designs", kernel="o_proj")  # within the refresh interval: asked again at once
        reporter.update(kernel="qkv")
        reporter.update(kernel="o_proj")  # a kernel set without a BEST clears the one shown
        note("still designing")
    lines = [line for line in capsys.readouterr().err.splitlines() if "kernel " in line]
    assert [k for k in asked if k][:2] == ["qkv", "o_proj"]
    assert "kernel qkv, BEST aaaaaaaaaa 59,384 cycles" in lines[0]
    assert all("59,384" not in line for line in lines[1:]), lines
    assert "kernel o_proj" in lines[-1]


def test_an_accepted_design_is_shown_as_best_on_its_own_line(capsys: pytest.CaptureFixture[str]) -> None:
    best = ["aaaaaaaaaa 20,128 cycles"]
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=lambda kernel: (12.0, best[0])) as reporter:
        note = reporter.step("optimize")
        note("baseline measured", kernel="mla")
        best[0] = "bbbbbbbbbb 19,304 cycles"  # the loop set BEST, then said so (within the refresh interval)
        note("accepted bbbbbbbbbb: 19,304 cycles, ratio 0.967", kernel="mla")
    lines = [line for line in capsys.readouterr().err.splitlines() if "accepted" in line]
    assert "BEST bbbbbbbbbb 19,304 cycles" in lines[-1], lines


def test_a_kernel_s_stop_line_shows_what_it_spent_in_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    """A user's last line read "stopped: ... | 14 of 80 device-s" after 80 were spent."""
    spent = [14.0]
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=lambda kernel: (spent[0], None)) as reporter:
        reporter.update(budget_s=80.0)
        note = reporter.step("optimize")
        note("baseline measured", kernel="mla")
        spent[0] = 80.0  # spent within the refresh interval, then the kernel stopped
        note("stopped: no accepted change in 8 proposals", kernel="mla")
    [line] = [line for line in capsys.readouterr().err.splitlines() if "stopped:" in line]
    assert "66 of 80 device-s" in line, line  # this run's spending: the graph held 14 when it began


def test_in_a_log_a_decision_is_never_folded_into_the_next_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Without -v, notes within two seconds of the last line fold into the next one: a stand-in root
    (a baseline the chip refuses) was said, and never shown, for O on every user chip."""
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(), refresh=lambda kernel: (0.0, None)) as reporter:
        note = reporter.step("optimize")
        note("the architect designs", kernel="o_proj")
        note("the official baseline does not compile here (E0201: ...): the design space's first design stands in")
        note("priced 24 designs")  # within the gap: folded
    err = capsys.readouterr().err
    assert "stands in" in err and "priced 24 designs" not in err


def test_the_device_seconds_shown_are_this_runs_not_the_whole_ledgers(capsys: pytest.CaptureFixture[str]) -> None:
    ledger = [800.0]

    def refresh(kernel: str | None) -> tuple[float | None, str | None]:
        return ledger[0], None

    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=refresh) as reporter:
        reporter.update(budget_s=120.0)
        note = reporter.step("optimize")
        ledger[0] = 844.0  # this run spent 44 s on top of the 800 earlier runs left in the graph
        note("accepted a design", kernel="qkv")
    line = next(line for line in capsys.readouterr().err.splitlines() if "device-s" in line)
    assert "44 of 120 device-s" in line and "844" not in line


def test_on_a_terminal_the_bar_never_passes_its_end_and_the_note_is_not_cut() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    long_note = "re-measured " + " ".join(f"probe-{i}" for i in range(30))
    with Reporter(console, ProgressStyle()) as reporter:
        note = reporter.step("learning", total=17)
        for _ in range(18):  # one probe more than announced (a re-run)
            reporter.note("probe", advance=1)
        note(long_note)
    screen = out.getvalue()
    assert "18/17" not in screen and "18/18" in screen
    assert "probe-29" in screen  # folded onto the next line, not cut at 80 columns


def test_a_workflow_s_prefixed_decision_is_shown_with_the_best_it_made(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo writes each note after its kernel's name ("o_proj: accepted ..."): an accepted design was
    folded away, and the lines after it showed the BEST before it."""
    best = ["aaaaaaaaaa 396,936 cycles"]
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(), refresh=lambda kernel: (0.0, best[0])) as reporter:
        note = reporter.step("optimize under 0.6.0")
        note("o_proj: the architect designs", kernel="o_proj")
        best[0] = "bbbbbbbbbb 30,104 cycles"
        note("o_proj: accepted bbbbbbbbbb: 30,104 cycles, ratio 0.076", kernel="o_proj")
    lines = capsys.readouterr().err.splitlines()
    [accepted] = [line for line in lines if "accepted" in line]
    assert "BEST bbbbbbbbbb 30,104 cycles" in accepted, lines


def test_a_new_step_shows_what_the_last_one_spent(capsys: pytest.CaptureFixture[str]) -> None:
    """A new step showed the step before's device seconds as the graph held them at its last refresh
    (learning's last line read 509 device-s after 617)."""
    spent = [0.0]
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=lambda kernel: (spent[0], None)) as reporter:
        reporter.step("learn")("MB16 (8 device-s)")
        spent[0] = 617.0  # the last probe's seconds, charged within the refresh interval
        reporter.step("optimize under 0.6.0")("the architect designs")  # no kernel named: no refresh for one
    lines = [line for line in capsys.readouterr().err.splitlines() if "the architect designs" in line]
    assert lines and all("617 device-s" in line for line in lines), lines


def test_a_re_measurement_shows_what_it_spent_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    """An upgrade's re-measurements, seconds apart, each read "| 0 device-s" through 53 device-s of
    probes: the graph was asked at most every few seconds."""
    spent = [0.0]
    console = Console(file=io.StringIO(), force_terminal=False)
    with Reporter(console, ProgressStyle(verbose=True), refresh=lambda kernel: (spent[0], None)) as reporter:
        note = reporter.step("toolchain upgrade to 0.7.0")
        note("rules: 21 confirmed, 3 changed, 5 retired, 1 new")
        for probe, total in (("MB06", 6.0), ("MB03", 22.0), ("MB01", 25.0)):
            spent[0] = total  # charged within the refresh interval
            note(f"re-measured {probe} ({total:.0f} device-s)")
    lines = [line for line in capsys.readouterr().err.splitlines() if "re-measured" in line]
    assert [line.rsplit("|", 1)[-1].strip() for line in lines] == ["6 device-s", "22 device-s", "25 device-s"], lines
