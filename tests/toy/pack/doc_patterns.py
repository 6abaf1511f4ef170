"""How the builtin librarian reads the toy chip's docs: the words that make a sentence state a
parameter, and the units the docs spell."""

from __future__ import annotations

from chiplore.core.pack import DocPatterns, ParamPattern
from chiplore.core.params import CLOCK_HZ
from tests.toy.pack import params as P

DOC_PATTERNS = DocPatterns(
    params=(
        ParamPattern(P.DMA_START, (r"\bDMA command", r"\bstart-up\b")),
        ParamPattern(P.LANE_RATE, (r"\blane\b", r"bytes per cycle")),
        ParamPattern(P.INGRESS, (r"\bingress\b", r"bytes per cycle")),
        ParamPattern(P.LANE_BUFFER, (r"\bbuffer\b", r"\bKB\b")),
        ParamPattern(CLOCK_HZ, (r"\bruns at\b", r"GHz")),
    ),
    units=r"bytes per cycle|cycles|KB|GHz|bytes|lanes",
)
