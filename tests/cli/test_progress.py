"""The progress lines of a command in a pipe: the BEST they show is the current kernel's."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from chiplore.cli.progress import ProgressStyle, Reporter

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
    assert asked[:2] == ["qkv", "o_proj"]
    assert "kernel qkv, BEST aaaaaaaaaa 59,384 cycles" in lines[0]
    assert all("59,384" not in line for line in lines[1:]), lines
    assert "kernel o_proj" in lines[-1]
