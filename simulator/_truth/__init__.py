"""The hidden true parameters of the simulated chip (SIMULATOR.md 1.2).

Only `simulator.cost`, `simulator.device` and (for compile-time limits) `simulator.toolchain`
read this package; agents learn these numbers by measuring. `CHIPLORE_SIM_TRUTH=path` (TOML or
JSON with any subset of the fields) simulates a different chip with the same code.
"""

from __future__ import annotations

import json
import os
import tomllib
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

ENV_VAR = "CHIPLORE_SIM_TRUTH"


class ChipTruth(BaseModel):
    """One chip's true parameters, in cycles and bytes (1 cycle = 1 ns)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clock_ghz: float = Field(1.0, gt=0)  # the core clock: cycles per nanosecond (device seconds = cycles / clock)
    launch_cycles: float = Field(200, gt=0)  # P01
    dma_startup: float = Field(340, ge=0)  # P02: engine busy per command
    dma_chain_startup: float = Field(340, ge=0)  # P03: command already waiting when its engine frees
    engine_bw: float = Field(224.0, gt=0)  # P04: raw B/cycle per engine
    pkt_overhead: float = Field(2.0, ge=0)  # P05: cycles per packet per engine
    dmn_bw: float = Field(143.0, gt=0)  # P06: flow that stays in one DMN
    cluster_ingress: float = Field(285.0, gt=0)  # P07: NoC port into (and out of) one cluster's DM
    hbm_bw: float = Field(1150.0, gt=0)  # P08
    hbm_unit: int = Field(256, gt=0)  # P09: transaction unit
    rmw_factor: float = Field(42.0, ge=1)  # P10: unit-times per partly written unit
    xcluster_factor: float = Field(0.5, gt=0, le=1)  # P11
    dm2dm_phase_bw: float = Field(118.86, gt=0)  # P12: per phase; read and write serialise
    # P13 (`engines = auto`) and P14 (default DMA order) are compiler behaviour: VersionSpec and lowering.
    dm_usable_per_slice: int = Field(480 * 1024, gt=0)  # P15
    lut_bpc: float = Field(1.622, gt=0)  # P16: decode input bytes/cycle/slice
    fetch_read_main: int = Field(32, gt=0)  # P17
    fetch_read_sub: int = Field(8, gt=0)
    contract_bytes_per_step: int = Field(64, gt=0)  # P18
    ve_trans_cycles: float = Field(4, gt=0)  # P19: per flit per transcendental op
    ve_max_chain: int = Field(6, gt=0)  # P20
    pass_fixed: float = Field(48, ge=0)  # P23
    latency_fetch: float = 12
    latency_decode: float = 6
    latency_collect: float = 2
    latency_contract: float = 16
    latency_vector: float = 8
    latency_commit: float = 8
    cluster_bridge_cycles: float = 160  # P27: reduce_clusters (0.7.0), plus 2 per flit
    cluster_bridge_per_flit: float = 2
    sync_cycles: float = Field(32, ge=0)  # P24
    interference: float = Field(0.985, gt=0, le=1)  # P25: DMA ingress factor while a pass runs in the cluster
    bank_run_limit: int = Field(64, gt=0)  # P26
    noise_sigma: float = Field(0.03, ge=0)  # P30
    outlier_p: float = Field(0.02, ge=0, le=1)
    outlier_low: float = 1.10
    outlier_high: float = 1.60
    drift_amplitude: float = 0.015
    drift_period_s: float = 1800.0
    drift_bias: float = 0.01  # b_d ~ U(-bias, bias)
    warm_factor: float = 1.04
    warm_idle_s: float = 60.0

    @property
    def roof(self) -> float:
        """R_eff of SIMULATOR.md 9: what both cluster ingress ports move per cycle."""
        return 2 * self.cluster_ingress


class TruthFileError(ValueError):
    """CHIPLORE_SIM_TRUTH names a file that cannot be read as a ChipTruth."""


def load_truth(version: str | None = None, path: str | Path | None = None) -> ChipTruth:
    """The chip's truth under a toolchain version: defaults, then the CHIPLORE_SIM_TRUTH file (or
    `path`), then the version's overrides (0.7.0 chains DMA commands faster and reserves more DM)."""
    source = path if path is not None else os.environ.get(ENV_VAR) or None
    return _load(str(source) if source else None, version)


@cache
def _load(path: str | None, version: str | None) -> ChipTruth:
    fields: dict[str, object] = _read(Path(path)) if path else {}
    if version is not None:
        from simulator.toolchain.versions import spec  # the version table lives with the toolchain

        fields.update(spec(version).truth_overrides)
    try:
        return ChipTruth(**fields)  # type: ignore[arg-type]
    except ValidationError as error:
        raise TruthFileError(f"{path or 'truth'}: {error}") from error


def _read(path: Path) -> dict[str, object]:
    try:
        text = path.read_text()
    except OSError as error:
        raise TruthFileError(f"{ENV_VAR}={path}: {error.strerror or error}") from error
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        raise TruthFileError(f"{ENV_VAR}={path}: not valid {path.suffix.lstrip('.') or 'TOML'}: {error}") from error
    if not isinstance(data, dict):
        raise TruthFileError(f"{ENV_VAR}={path}: expected a table of ChipTruth fields")
    return data


def truth_key(truth: ChipTruth) -> str:
    """A stable text for caching results per chip."""
    return truth.model_dump_json()
