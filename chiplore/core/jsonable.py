"""Values as strict JSON holds them: a float that is not finite (a Cypher `1.0/0.0`, a ratio with no
bound) becomes null, as pydantic and JavaScript write it, so `--json` output and an MCP answer parse
anywhere and say the same thing (json.dumps would write the bare `Infinity` strict parsers refuse)."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float, however deeply nested in dicts, lists and tuples, as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value
