"""Reading a text file a user named, without trusting it.

`ferc`, `fe-run` and the chip's truth file all read a path from the command line or the
environment; each must refuse a device (`/dev/zero`), a FIFO or a huge file with one line instead
of reading forever or filling memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnreadableFile(ValueError):
    """The file is missing, not a regular file, over its size limit or (when asked) not UTF-8."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path, self.reason = path, reason


def read_text_file(path: Path, limit: int, *, errors: str = "strict") -> str:
    """The text of `path`, read as UTF-8 with `errors`; called by the CLIs and the truth loader
    before they parse anything. Raises UnreadableFile whose message names the path and the reason."""
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer before we can look at it.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UnreadableFile(path, str(error.strerror or error)) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(path, "not a regular file")
        if info.st_size > limit:
            raise UnreadableFile(path, f"{info.st_size:,} bytes, over the {limit:,}-byte limit")
        data = _read_at_most(descriptor, limit + 1)  # a file that grows after the check is still cut off
    except OSError as error:
        raise UnreadableFile(path, str(error.strerror or error)) from None
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise UnreadableFile(path, f"over the {limit:,}-byte limit")
    try:
        return data.decode("utf-8", errors=errors).removeprefix("\ufeff")  # an editor's byte-order mark
    except UnicodeDecodeError as error:
        raise UnreadableFile(path, f"not UTF-8 text (byte {error.start:,} is {data[error.start]:#04x})") from None


def _read_at_most(descriptor: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(descriptor, min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
