"""What a simulated device says of the chip it is: a fingerprint of its truth, the way a real device
reports a part number. It reveals no value; equal truths give equal ids, whatever file they came from."""

from __future__ import annotations

import hashlib
import os

from chiplore.core.target import ChipIdentity
from chiplore.simulator._truth import ENV_VAR, load_truth, truth_key


def chip_identity() -> ChipIdentity:
    """The chip CHIPLORE_SIM_TRUTH describes (its values before any toolchain's changes: the silicon
    does not move with the compiler), or the documented chip where it is unset."""
    digest = hashlib.sha256(truth_key(load_truth()).encode()).hexdigest()[:12]
    source = os.environ.get(ENV_VAR)
    return ChipIdentity(id=f"SimRNGD #{digest}", note=f"{ENV_VAR}={source}" if source else f"{ENV_VAR} unset")
