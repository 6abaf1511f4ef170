"""The repository cites only its own documentation: a clone has no planning notes beside it, so no
tracked file may point at them (docs/simrngd.md, docs/architecture.md, docs/graph.md, docs/targets.md
and docs/kernels.md are where code and README send a reader)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The planning references by name, and any path into the folder that holds them.
OUTSIDE = re.compile(r"\b(?:SIMULATOR|DESIGN|STYLE)\.md\b|(?<![\w.-])shared/")


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], capture_output=True, cwd=ROOT, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_tracked_file_cites_a_document_outside_the_repository() -> None:
    this = Path(__file__).resolve()
    hits = []
    for path in tracked_files():
        if path.resolve() == this or not path.is_file():  # a tracked file deleted in the work tree has nothing to say
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: no citation a reader follows
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "cite docs/ instead of the planning notes:\n" + "\n".join(hits)


def test_the_pattern_finds_what_it_must() -> None:
    for cited in ("(SIMULATOR.md 4.2)", "see DESIGN.md section 3", "STYLE.md", "../shared/x", "/work/shared/y"):
        assert OUTSIDE.search(cited), cited
    for fine in ("docs/simrngd.md §7.2", "a shared device", "shared_state/", "MY_DESIGN.mdx"):
        assert not OUTSIDE.search(fine), fine
