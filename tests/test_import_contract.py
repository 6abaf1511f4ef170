"""Agents and ingest see the chip only through the Target interface (import-linter contracts)."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path


def test_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    result = subprocess.run([lint_imports], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kg", "agents", "ingest", "queries", "simulator")  # top-level folders installed under chiplore


def test_the_installed_code_has_one_import_root() -> None:
    """kg/, agents/, ... live at the top of the repository but install as chiplore.kg, chiplore.agents, ...:
    no code imports them by their folder's bare name (which another distribution may own)."""
    bare = re.compile(rf"^\s*(from|import) ({'|'.join(FOLDERS)})(\.|\s|$)", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in (*FOLDERS, "chiplore", "tests", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if ".venv" not in path.parts and bare.search(path.read_text())
    ]
    assert offenders == []
    for folder in FOLDERS:
        link = ROOT / "chiplore" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), folder
    assert importlib.import_module("chiplore.kg").__name__ == "chiplore.kg"
