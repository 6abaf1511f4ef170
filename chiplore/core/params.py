"""Hardware parameters as typed keys: what chiplore measures, in which unit, and what it means.

A parameter key is the name a measurement, a doc claim and a cost model agree on. The keys of one
chip family are declared once, in its target pack, as `ParamKey` constants; generic code never
spells a chip's parameter as a string. The few keys every target shares (the device's noise, the
chip's clock) are declared here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ParamKey:
    """One hardware parameter: its graph key (`HardwareParam.key`, `Measurement.param`), its unit,
    what it means, and the order-of-magnitude value a cost model assumes until it is measured."""

    key: str
    unit: str
    meaning: str
    default: float | None = None

    def __str__(self) -> str:
        return self.key


# Keys every target has: the generic learner and loop use them.
NOISE_SIGMA = ParamKey("device.noise_sigma", "log-ratio", "run-to-run noise of the device (sigma of log cycles)", 0.03)
CLOCK_HZ = ParamKey("chip.clock_hz", "Hz", "the chip's clock, as the docs state it (converts rates per second)")


class ParamRegistry(Mapping[str, ParamKey]):
    """The parameter keys of a target, by key; a key declared twice with different units is an error."""

    def __init__(self, keys: Iterable[ParamKey]) -> None:
        self._keys: dict[str, ParamKey] = {}
        for param in (NOISE_SIGMA, CLOCK_HZ, *keys):
            known = self._keys.get(param.key)
            if known is not None and known != param:
                raise ValueError(f"parameter {param.key!r} is declared twice, differently: {known} and {param}")
            self._keys[param.key] = param

    def __getitem__(self, key: str) -> ParamKey:
        return self._keys[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def defaults(self) -> dict[str, float]:
        """The order-of-magnitude values of the keys that declare one (a cost model's prior)."""
        return {key: param.default for key, param in self._keys.items() if param.default is not None}
