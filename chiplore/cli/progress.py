"""Progress of a long command (learn, optimize, upgrade, demo, graph copy) on stderr.

On a terminal: a rich progress display, one line per step with a spinner (and a bar where the
step's size is known), the latest note and the elapsed time. Anywhere else (CI, a pipe, a log
file): plain timestamped lines, one when a step starts, one per note (each with -v, else at most
one every few seconds), and a heartbeat at least every `interval_s` while nothing else was said,
with what the command knows: the step, the device seconds spent, the current kernel and its BEST.
`--quiet` says nothing; stdout (tables, JSON) is never touched.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column

HEARTBEAT_S = 8.0  # under the 10 s a log reader may wait between two lines
NOTE_GAP_S = 2.0  # without -v, notes closer together than this fold into the next line
# notes of what the run decided, which a log keeps however close they come to the line before: a design
# accepted, a root that stands in for a baseline the chip refuses (O's folded away on every user chip)
DECISIONS = ("accepted ", "the official baseline does not compile here")
STEP_QUIET_S = 1.0  # a step's first line waits this long (or for its first note): a refusal stays one line
REFRESH_S = 3.0  # the graph is asked for device time and BEST at most this often


@dataclass
class Snapshot:
    """What the command knows now; any field may be unknown."""

    step: str = ""
    note: str = ""
    kernel: str | None = None
    device_s: float | None = None
    budget_s: float | None = None
    best: str | None = None


Refresh = Callable[[str | None], tuple[float | None, str | None]]  # kernel -> (device-s, BEST as text)


def from_graph(session: Any) -> Refresh:
    """What a heartbeat shows from the session's graph: device seconds charged, and the kernel's BEST."""

    def read(kernel: str | None) -> tuple[float | None, str | None]:
        now = session.snapshot(kernel)
        return now.device_s, (f"{now.best_design[:10]} {now.best_cycles:,.0f} cycles" if now.best_cycles else None)

    return read


def progress_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--quiet and -v, gathered into one `progress_style: ProgressStyle` argument."""
    import functools

    @click.option("-q", "--quiet", is_flag=True, help="No progress on stderr (errors still are).")
    @click.option("-v", "--verbose", is_flag=True, help="Every progress note, not only the latest.")
    @functools.wraps(command)
    def wrapper(*args: Any, quiet: bool, verbose: bool, **kwargs: Any) -> Any:
        return command(*args, progress_style=ProgressStyle(quiet=quiet, verbose=verbose), **kwargs)

    return wrapper


@dataclass(frozen=True)
class ProgressStyle:
    quiet: bool = False
    verbose: bool = False


class Reporter:
    """One command's progress: `step(title)` starts a step and returns its `note(text)`; `update`
    sets what a heartbeat line shows. Used as a context manager around the work."""

    def __init__(self, console: Console, style: ProgressStyle = ProgressStyle(), *, transient: bool = False,
                 refresh: Refresh | None = None, interval_s: float = HEARTBEAT_S) -> None:  # fmt: skip
        self.console, self.style, self.refresh_from_graph = console, style, refresh
        self.mode = "quiet" if style.quiet else ("rich" if console.is_terminal else "plain")
        self.interval_s = interval_s
        self.state = Snapshot()
        self._lock = threading.RLock()
        self._started = self._last_line = self._step_started = time.monotonic()
        self._step_shown = True
        self._last_refresh = 0.0
        self._ledger_at_start: float | None = None  # the graph's device seconds before this command ran
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if self.mode == "rich":
            # the note folds onto the next line rather than being cut at the terminal's width
            note = TextColumn("{task.fields[note]}", table_column=Column(ratio=1, overflow="fold", no_wrap=False))
            self._progress = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(), note, console=console,
                                      transient=transient, expand=True)  # fmt: skip

    # -- the command's side ---------------------------------------------------------------------

    def __enter__(self) -> Reporter:
        if self.refresh_from_graph is not None:  # what the graph held before: a heartbeat shows this run's spending
            try:
                self._ledger_at_start = self.refresh_from_graph(None)[0]
            except Exception:
                self._ledger_at_start = None
        if self._progress is not None:
            self._progress.start()
        elif self.mode == "plain":
            self._thread = threading.Thread(target=self._beat, name="chiplore-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._progress is not None:
            self._finish_task()
            self._progress.stop()

    def step(self, title: str, total: float | None = None) -> Callable[[str], None]:
        """Start a step (the previous one ends); its `note` says how it goes."""
        with self._lock:
            self.state.step, self.state.note = title, ""
            self._step_started, self._step_shown = time.monotonic(), False
            # the step before is over: its spending is final, and the next line must not show an older figure
            self._last_refresh = -math.inf
            self._maybe_refresh()
            if self._progress is not None:
                self._finish_task()
                self._task = self._progress.add_task(escape(title), total=total, note="")
        return self.note

    def note(self, text: str, *, kernel: str | None = None, advance: float = 0.0) -> None:
        """A step's progress: what it just did (and the kernel it did it for)."""
        with self._lock:
            self.state.note = " ".join(text.split())
            # what the note says, past the kernel's name a workflow writes before it ("o_proj: accepted ...")
            said = self.state.note.removeprefix(f"{kernel}: ") if kernel is not None else self.state.note
            if kernel is not None and kernel != self.state.kernel:
                # another kernel's BEST must not be shown beside this one: ask the graph at once
                self.state.kernel, self.state.best, self._last_refresh = kernel, None, -math.inf
            elif said.startswith(("accepted ", "stopped", "re-measured ")):  # BEST moved, or spending is final
                self._last_refresh = -math.inf  # (a kernel's, a probe's): the line must not show an older figure
            self._maybe_refresh()
            if self._progress is not None and self._task is not None:
                task = next(t for t in self._progress.tasks if t.id == self._task)
                if advance and task.total is not None and task.completed + advance > task.total:
                    self._progress.update(self._task, total=task.completed + advance)  # more work than announced
                self._progress.update(self._task, advance=advance, note=escape(self._summary(with_step=False)))
                if self.style.verbose:
                    self._progress.console.print(f"[dim]{escape(self.state.step)}:[/dim] {escape(self.state.note)}",
                                                 highlight=False)  # fmt: skip
            elif self.mode == "plain":
                now = time.monotonic()
                if self.style.verbose or now - self._last_line >= NOTE_GAP_S or said.startswith(DECISIONS):
                    self._line()

    def update(self, *, device_s: float | None = None, budget_s: float | None = None, best: str | None = None,
               kernel: str | None = None) -> None:  # fmt: skip
        """Set what the heartbeat shows (device seconds spent, the budget, BEST, the kernel)."""
        with self._lock:
            if device_s is not None:
                self.state.device_s = device_s
            if budget_s is not None:
                self.state.budget_s = budget_s
            if best is not None:
                self.state.best = best
            if kernel is not None and kernel != self.state.kernel:
                self.state.kernel, self.state.best = kernel, best

    # -- inside -----------------------------------------------------------------------------------

    def _maybe_refresh(self) -> None:
        if self.refresh_from_graph is None or time.monotonic() - self._last_refresh < REFRESH_S:
            return
        self._last_refresh = time.monotonic()
        try:
            device_s, best = self.refresh_from_graph(self.state.kernel)
        except Exception:
            return
        if device_s is not None:
            self.state.device_s = device_s - (self._ledger_at_start or 0.0)
        self.state.best = best

    def _finish_task(self) -> None:
        if self._progress is not None and self._task is not None:
            task = self._progress.tasks[-1]
            if task.total is None:
                self._progress.update(self._task, total=1, completed=1)
            self._task = None

    def _summary(self, *, with_step: bool = True) -> str:
        state = self.state
        parts = [state.step] if with_step and state.step else []
        if state.note:
            parts.append(state.note)
        if state.device_s is not None:
            budget = f" of {state.budget_s:,.0f}" if state.budget_s else ""
            parts.append(f"{state.device_s:,.0f}{budget} device-s")
        if state.kernel:
            parts.append(f"kernel {state.kernel}" + (f", BEST {state.best}" if state.best else ""))
        return " | ".join(parts)

    def _line(self) -> None:
        """One plain line: UTC time, seconds since the command started, the summary."""
        now = time.monotonic()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        click.echo(f"{stamp} [{now - self._started:5.0f}s] {self._summary()}", err=True)
        self._last_line, self._step_shown = now, True

    def _beat(self) -> None:
        while not self._stop.wait(0.25):
            with self._lock:
                now = time.monotonic()
                unannounced = not self._step_shown and now - self._step_started >= STEP_QUIET_S
                if self.state.step and (unannounced or now - self._last_line >= self.interval_s):
                    self._line()


@contextmanager
def reporting(console: Console, style: ProgressStyle, **kwargs: Any) -> Iterator[Reporter]:
    """A Reporter for the duration of a block."""
    with Reporter(console, style, **kwargs) as reporter:
        yield reporter
