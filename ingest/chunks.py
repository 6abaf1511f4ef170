"""Doc pages into chunks: one chunk per paragraph, list item or code block, with the heading it sits
under. A chunk's id is the hash of its text, so a paragraph that two versions share is one chunk."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from chiplore.core.ids import content_sha

FENCE = re.compile(r"^```")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
ITEM = re.compile(r"^\s*(?:[*-]|\d+\.)\s+")


class Chunk(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    heading: str  # the nearest heading above it ("" at the top of a page)
    ord: int  # position in its page
    code: bool = False  # a fenced code block

    @property
    def sha(self) -> str:
        return content_sha(self.text)


def chunk_page(markdown: str) -> list[Chunk]:
    """Paragraphs, list items and fenced code blocks, in page order; headings label what follows."""
    blocks: list[tuple[str, str, bool]] = []  # text, heading, code
    heading = ""
    lines: list[str] = []
    fence: list[str] | None = None

    def flush() -> None:
        text = "\n".join(lines).strip()
        if text:
            blocks.append((text, heading, False))
        lines.clear()

    for line in markdown.splitlines():
        if fence is not None:
            fence.append(line)
            if FENCE.match(line):
                blocks.append(("\n".join(fence), heading, True))
                fence = None
            continue
        if FENCE.match(line):
            flush()
            fence = [line]
        elif match := HEADING.match(line):
            flush()
            heading = match.group(2).strip()
        elif not line.strip():
            flush()
        elif ITEM.match(line) and lines:  # a new list item starts a new chunk
            flush()
            lines.append(line)
        else:
            lines.append(line)
    flush()
    if fence is not None:  # an unclosed fence: keep what there is
        blocks.append(("\n".join(fence), heading, True))
    return [Chunk(text=text, heading=head, ord=i, code=code) for i, (text, head, code) in enumerate(blocks)]
