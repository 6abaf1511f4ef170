"""What a simulated device says of the chip it is: a fingerprint of its truth, the way a real device
reports a part number. Only the values a truth file sets apart from the defaults count, so a chiplore
that adds a field (with a default that keeps the old behaviour) keeps every chip's id and graph."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from chiplore.core.target import ChipIdentity
from chiplore.simulator._truth import ENV_VAR, load_truth

# Mixed into the hash: raised on purpose when a default changes the simulated silicon itself.
CHIP_ID_SCHEME = 1


def chip_identity() -> ChipIdentity:
    """The chip CHIPLORE_SIM_TRUTH describes (its values before any toolchain's changes: the silicon
    does not move with the compiler), or the documented chip where it is unset."""
    differs = load_truth().model_dump(mode="json", exclude_defaults=True)
    text = json.dumps({"scheme": CHIP_ID_SCHEME, "truth": differs}, sort_keys=True)
    source = os.environ.get(ENV_VAR)
    note = f"{ENV_VAR}={Path(source).resolve()}" if source else f"{ENV_VAR} unset"
    return ChipIdentity(id=f"SimRNGD #{hashlib.sha256(text.encode()).hexdigest()[:12]}", note=note)
