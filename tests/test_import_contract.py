"""Agents and ingest see the chip only through the Target interface (import-linter contracts)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def test_import_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    result = subprocess.run([lint_imports], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout
