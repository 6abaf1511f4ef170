"""Content-addressed ids: the same text always gets the same id, in any process, on any backend."""

from __future__ import annotations

import hashlib


def content_sha(text: str) -> str:
    """The SHA-256 of a text, hex: a KernelVersion's sha, and the seed of most node ids."""
    return hashlib.sha256(text.encode()).hexdigest()
