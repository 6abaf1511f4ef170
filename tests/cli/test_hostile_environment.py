"""The machine fights back: a full disk while `graph export` writes and while `optimize` runs, and a data
dir on a disk the process may not write. Each is one red line, nothing half-written is left, and a rerun
once the space is back loses nothing (the graph's invariants hold). Needs root: a small tmpfs is
mounted for each (and remounted read-only)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.integrity import violations

ROOT = Path(__file__).resolve().parents[2]
TOY = "tests.toy:from_settings"  # learnt and optimized in seconds
pytestmark = [
    pytest.mark.slow,
    pytest.mark.server,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs and drops a capability: needs root"),
]


def chiplore(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chiplore.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)  # fmt: skip


def one_line_error(done: subprocess.CompletedProcess[str], needle: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs, unmounted at the end."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of the disk; the file returned gives them back when deleted."""
    filler = disk / "filler"
    free = shutil.disk_usage(disk).free
    with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:  # until it is full
        out.write(b"\0" * free)
    return filler


def toy_env(data: Path) -> dict[str, str]:
    return {**os.environ, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(data), "CHIPLORE_TARGET": TOY,
            "PYTHONPATH": str(ROOT)}  # fmt: skip


def test_a_full_disk_during_graph_export_is_one_line_and_leaves_no_file(tmp_path: Path, small_disk: Path) -> None:
    env = toy_env(tmp_path / "data")
    assert chiplore(env, "init").returncode == 0
    assert chiplore(env, "learn").returncode == 0
    filler = fill(small_disk)
    one_line_error(chiplore(env, "graph", "export", str(small_disk / "graph.jsonl")), "No space left on device")
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]  # no graph.jsonl, no .partial
    filler.unlink()
    assert chiplore(env, "graph", "export", str(small_disk / "graph.jsonl")).returncode == 0


def test_graph_export_never_replaces_what_is_not_a_file_and_writes_stdout_for_a_dash(tmp_path: Path) -> None:
    """As root, `graph export /dev/full` had replaced the device with a JSON file (a FIFO, a symlink the
    same). A device or a pipe is refused in one line; a link is written through; `-` is stdout."""
    env = toy_env(tmp_path / "data")
    assert chiplore(env, "init").returncode == 0
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line_error(chiplore(env, "graph", "export", str(fifo)), "is not a regular file")
    assert fifo.is_fifo()
    target, link = tmp_path / "graph.jsonl", tmp_path / "link.jsonl"
    target.write_text("old\n")
    link.symlink_to(target)
    assert chiplore(env, "graph", "export", str(link)).returncode == 0
    assert link.is_symlink() and target.read_text().startswith('{"kind": "header"')
    streamed = chiplore(env, "graph", "export", "-")
    assert streamed.returncode == 0 and "stdout" in streamed.stderr
    assert streamed.stdout.splitlines()[1:] == target.read_text().splitlines()[1:]  # the header says when
    assert not (ROOT / "-").exists()


def test_a_full_disk_during_optimize_is_one_line_and_a_rerun_loses_nothing(small_disk: Path) -> None:
    data = small_disk / "data"
    env = toy_env(data)
    assert chiplore(env, "init").returncode == 0
    assert chiplore(env, "learn").returncode == 0
    run = subprocess.Popen([sys.executable, "-m", "chiplore.cli", "optimize", "-v", "--budget", "60"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    assert run.stderr is not None
    heard: list[str] = []
    for line in run.stderr:  # the disk fills once the loop is under way
        heard.append(line)
        if "designs" in line or "baseline" in line:
            break
    os.kill(run.pid, signal.SIGSTOP)  # held while the disk fills, so that its next write meets a full disk
    try:
        filler = fill(small_disk)
    finally:
        os.kill(run.pid, signal.SIGCONT)
    _, rest = run.communicate(timeout=600)
    one_line_error(subprocess.CompletedProcess(run.args, run.returncode, "", "".join(heard) + rest), "full")
    filler.unlink()
    again = chiplore(env, "optimize", "--budget", "60")
    assert again.returncode == 0, again.stderr
    with EmbeddedStore(data) as store:
        assert violations(store) == []


def test_a_data_dir_on_a_read_only_disk_is_one_line(small_disk: Path) -> None:
    """Root may write anywhere but on a read-only file system: the data dir where the process may not
    write (a non-root user's case too) is refused in one line naming it."""
    data = small_disk / "data"
    env = toy_env(data)
    assert chiplore(env, "init").returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    one_line_error(chiplore(env, "status"), str(data))


def test_a_data_dir_the_user_may_not_write_is_one_line(tmp_path: Path) -> None:
    """EACCES, a non-root user's case: the data dir's modes forbid writing, and the command runs without
    the capabilities that let root write through file modes (as any other user would)."""
    data = tmp_path / "data"
    env = toy_env(data)
    assert chiplore(env, "init").returncode == 0
    paths = [data, *data.rglob("*")]
    for path in paths:  # another user's tree: nothing in it may be written
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        denied = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search",
                                 "--inh-caps=-dac_override,-dac_read_search",
                                 sys.executable, "-m", "chiplore.cli", "status"],
                                env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
        one_line_error(denied, str(data))
    finally:
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)
