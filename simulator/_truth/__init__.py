"""The hidden true parameters of the simulated chip (docs/simrngd.md §2.2).

Only `chiplore.simulator.cost`, `chiplore.simulator.device` and (for compile-time limits) `chiplore.simulator.toolchain`
read this package; agents learn these numbers by measuring. `CHIPLORE_SIM_TRUTH=path` (TOML or
JSON with any subset of the fields) simulates a different chip with the same code. Every field
is finite and bounded to what a chip could be: a value outside its range is refused with one line
that names the file and the field, rather than simulated into nonsense (or an overflow) later.
"""

from __future__ import annotations

import difflib
import json
import os
import tomllib
from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from chiplore.core.errors import ConfigError
from chiplore.simulator.textfile import UnreadableFile, read_text_file

ENV_VAR = "CHIPLORE_SIM_TRUTH"
MAX_PACKET = 4096  # the largest DMA packet the toolchain writes: the fewest packets, so the least overhead
MAX_TRUTH_BYTES = 64 * 1024  # a table of ~50 numbers; anything larger is not a truth file

# The ranges keep every derived time finite (no overflow to inf in the cost model or the device).
Bandwidth = Annotated[float, Field(ge=1e-3, le=1e6)]  # bytes per cycle
Cycles = Annotated[float, Field(ge=0, le=1e9)]  # a latency or a fixed cost, in cycles
PositiveCycles = Annotated[float, Field(gt=0, le=1e9)]
Fraction = Annotated[float, Field(gt=0, le=1)]  # a factor that can only slow things down
Count = Annotated[int, Field(ge=1, le=1 << 40)]  # a size in bytes, or a number of steps or ops
Slowdown = Annotated[float, Field(ge=1, le=10)]  # a factor of one run's time, >= 1 by definition
Seconds = Annotated[float, Field(ge=1, le=1e7)]  # device time, in seconds
Spread = Annotated[float, Field(ge=0, le=0.5)]  # a relative spread of the measurement noise


def _power_of_two(value: int) -> int:
    if value & (value - 1):
        raise ValueError(f"{value} is not a power of two")
    return value


PowerOfTwo = Annotated[int, AfterValidator(_power_of_two)]


class ChipShape(BaseModel):
    """The chip's structure: what a program's layouts, engine lists and buffers are checked against
    (docs/simrngd.md §2.1, §2.5). Every chip the simulator makes used to be 2 x 256 x 8; a truth file's
    `[shape]` table makes another. Sizes that a layout's digits divide are powers of two."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clusters: int = Field(2, ge=1, le=8)  # the `cluster` mapping's positions
    slices: PowerOfTwo = Field(256, ge=64, le=1024)  # per cluster: the `slice` mapping's positions
    lanes: PowerOfTwo = Field(8, ge=1, le=16)  # per slice: the contraction engine's lanes (`lane` <= lanes)
    engines_per_cluster: int = Field(4, ge=1, le=16)  # DMA engines local to each cluster, numbered cluster-major
    dmn_slices: PowerOfTwo = Field(32, ge=1, le=2048)  # slices per DMN (slice s is in DMN s / dmn_slices)
    trf_lane_bytes: int = Field(8 * 1024, ge=1024, le=1 << 20, multiple_of=8)  # TRF bytes per lane
    vrf_bytes: int = Field(8 * 1024, ge=1024, le=1 << 20, multiple_of=8)  # VRF bytes per slice

    @model_validator(mode="after")
    def _dmns_tile_a_cluster(self) -> ChipShape:
        if self.slices % self.dmn_slices:
            raise ValueError(f"shape.dmn_slices ({self.dmn_slices}) must divide shape.slices ({self.slices})")
        return self

    @property
    def engines(self) -> int:
        """DMA engines of the chip: engine e is local to cluster e // engines_per_cluster."""
        return self.clusters * self.engines_per_cluster

    @property
    def trf_bytes(self) -> int:
        """TRF bytes per slice."""
        return self.lanes * self.trf_lane_bytes

    def engine_cluster(self, engine: int) -> int:
        return engine // self.engines_per_cluster


class ChipTruth(BaseModel):
    """One chip's true parameters, in cycles and bytes (1 cycle = 1 ns at 1 GHz)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    shape: ChipShape = ChipShape()
    docs_shape: ChipShape | None = None  # the shape the chip's docs claim, when they get it wrong
    clock_ghz: float = Field(1.0, ge=1e-3, le=1e3)  # the core clock: cycles per nanosecond
    launch_cycles: PositiveCycles = 200  # P01
    dma_startup: Cycles = 340  # P02: engine busy per command
    dma_chain_startup: Cycles = 340  # P03: command already waiting when its engine frees
    engine_bw: Bandwidth = 224.0  # P04: raw B/cycle per engine
    pkt_overhead: Cycles = 2.0  # P05: cycles per packet per engine
    dmn_bw: Bandwidth = 143.0  # P06: flow that stays in one DMN
    cluster_ingress: Bandwidth = 285.0  # P07: NoC port into (and out of) one cluster's DM
    hbm_bw: Bandwidth = 1150.0  # P08
    hbm_unit: PowerOfTwo = Field(256, ge=32, le=2048)  # P09: transaction unit (a power of two, as MB07 searches)
    rmw_factor: float = Field(42.0, ge=1, le=1e4)  # P10: unit-times per partly written unit
    xcluster_factor: Fraction = 0.5  # P11
    dm2dm_phase_bw: Bandwidth = 118.86  # P12: per phase; read and write serialise
    # P13 (`engines = auto`) and P14 (default DMA order) are compiler behaviour: VersionSpec and lowering.
    # P15; in whole 8-byte words, as a DM tensor is allocated (a chip of 200,003 B was learnt as 200,000)
    dm_usable_per_slice: int = Field(480 * 1024, ge=8, le=1 << 40, multiple_of=8)
    lut_bpc: Bandwidth = 1.622  # P16: decode input bytes/cycle/slice
    fetch_read_main: Count = 32  # P17
    fetch_read_sub: Count = 8
    contract_bytes_per_step: Count = 64  # P18
    ve_trans_cycles: PositiveCycles = 4  # P19: per flit per transcendental op
    ve_max_chain: Count = 6  # P20
    pass_fixed: Cycles = 48  # P23
    latency_fetch: Cycles = 12
    latency_decode: Cycles = 6
    latency_collect: Cycles = 2
    latency_contract: Cycles = 16
    latency_vector: Cycles = 8
    latency_commit: Cycles = 8
    cluster_bridge_cycles: Cycles = 160  # P27: reduce_clusters (0.7.0), plus 2 per flit
    cluster_bridge_per_flit: Cycles = 2
    sync_cycles: Cycles = 32  # P24
    interference: Fraction = 0.985  # P25: DMA ingress factor while a pass runs in the cluster
    bank_run_limit: Count = 64  # P26
    noise_sigma: Spread = 0.03  # P30: lognormal sigma of one run
    outlier_p: float = Field(0.02, ge=0, le=0.5)  # more often than every other run is not an outlier
    outlier_low: Slowdown = 1.10
    outlier_high: Slowdown = 1.60
    drift_amplitude: Spread = 0.015
    drift_period_s: Seconds = 1800.0
    drift_bias: Spread = 0.01  # b_d ~ U(-bias, bias)
    warm_factor: Slowdown = 1.04
    warm_idle_s: float = Field(60.0, ge=0, le=1e7)

    @model_validator(mode="after")
    def _outliers_ordered(self) -> ChipTruth:
        if self.outlier_low > self.outlier_high:
            raise ValueError(f"outlier_low ({self.outlier_low}) must not exceed outlier_high ({self.outlier_high})")
        return self

    @property
    def roof(self) -> float:
        """R_eff of the weight-movement bound (docs/simrngd.md §11): what all clusters' ingress ports
        move per cycle, or less where the chip's DMA engines cannot fill them (one engine a cluster)
        or HBM cannot feed them (many clusters)."""
        return min(self.shape.clusters * self.cluster_ingress, self.shape.engines * self.engine_stream, self.hbm_bw)

    @property
    def engine_stream(self) -> float:
        """What one DMA engine streams at best (docs/simrngd.md §7.2): packets of the largest size, each
        with its overhead, into DMNs it alternates (twice `dmn_bw`, which a lone packet, or packets into
        two clusters, reach even where a cluster is one DMN). `engine_bw` alone is out of reach: a
        one-engine-a-cluster chip's bound was 8 % below any program's."""
        return min(MAX_PACKET / (MAX_PACKET / self.engine_bw + self.pkt_overhead), 2.0 * self.dmn_bw)


class TruthFileError(ConfigError, ValueError):
    """CHIPLORE_SIM_TRUTH names a file that cannot be read as a ChipTruth (one line: file, field, reason)."""


def load_truth(version: str | None = None, path: str | Path | None = None) -> ChipTruth:
    """The chip's truth under a toolchain version: defaults, then the CHIPLORE_SIM_TRUTH file (or
    `path`; "" means none), then the version's changes to the chip's values (0.7.0 chains DMA commands
    faster and reserves more DM: `VersionSpec.truth_scales`). Raises TruthFileError when the file is
    unreadable or a value is out of range."""
    source = path if path is not None else os.environ.get(ENV_VAR) or None
    return _load(str(source) if source else None, version)


@cache
def _load(path: str | None, version: str | None) -> ChipTruth:
    fields: dict[str, object] = {}
    if path:
        fields = _read(Path(path))
        try:  # strictly: `true` is not 1.0 and "3" is not a number
            ChipTruth.model_validate(fields, strict=True)
        except ValidationError as error:
            raise TruthFileError(f"{ENV_VAR}={path}: {_describe(error)}") from None
    try:
        truth = ChipTruth.model_validate(fields)
        if version is None:
            return truth
        from chiplore.simulator.toolchain.versions import spec  # the version table lives with the toolchain

        return ChipTruth.model_validate(truth.model_dump() | _scaled(truth, spec(version).truth_scales))
    except ValidationError as error:
        raise TruthFileError(f"{ENV_VAR}={path or ''} under toolchain {version}: {_describe(error)}") from None


def _scaled(truth: ChipTruth, scales: dict[str, float]) -> dict[str, object]:
    """The fields a version changes, each its factor times the chip's own value; a size in bytes stays a
    whole number of 8-byte words (rounded down, and never below one word)."""
    out: dict[str, object] = {}
    for name, factor in scales.items():
        value = getattr(truth, name) * factor
        if ChipTruth.model_fields[name].annotation is int:
            value = max(8, int(round(value, 6)) // 8 * 8)
        out[name] = value
    return out


def _read(path: Path) -> dict[str, object]:
    try:
        text = read_text_file(path, MAX_TRUTH_BYTES)
    except UnreadableFile as error:
        raise TruthFileError(f"{ENV_VAR}={path}: {error.reason}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise TruthFileError(f"{ENV_VAR}={path}: not valid {kind}: {error}") from None
    if not isinstance(data, dict):
        raise TruthFileError(f"{ENV_VAR}={path}: expected a table of ChipTruth fields, got {type(data).__name__}")
    return data


def _describe(error: ValidationError, shown: int = 6) -> str:
    """A validation failure as one line: each offending field with its value and what it must be."""
    parts = [_describe_one(detail) for detail in error.errors()]
    more = f" (and {len(parts) - shown} more)" if len(parts) > shown else ""
    return "; ".join(parts[:shown]) + more


def _describe_one(detail: ErrorDetails) -> str:
    name = ".".join(str(part) for part in detail["loc"])
    if detail["type"] == "extra_forbidden":
        *table, field = (str(part) for part in detail["loc"])
        known = ChipShape.model_fields if table == ["shape"] else ChipTruth.model_fields
        if not table and field in ChipShape.model_fields:  # a shape field at the top: it belongs in [shape]
            return f"unknown field {name!r}: the chip's shape goes in its [shape] table ([shape] {field} = ...)"
        close = [".".join([*table, c]) for c in difflib.get_close_matches(field, known, n=1)]
        return f"unknown field {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
    message = detail["msg"].removeprefix("Value error, ")
    if not name or (detail["type"] == "value_error" and isinstance(detail["input"], dict)):
        return message  # a rule across fields names them itself
    if detail["type"] == "model_type":  # "a valid dictionary or instance of ChipShape": a table, to the writer
        message = "should be a table of fields ([" + name + "] in TOML, an object in JSON)"
    value = _as_written(detail["input"])
    return f"{name} = {value if len(value) <= 40 else value[:37] + '...'}: {message}"


def _as_written(value: object) -> str:
    """A value as the file spells it (TOML and JSON write true/false, not Python's True/False)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def chip_shape() -> ChipShape:
    """The simulated chip's shape (no toolchain version changes it): what the compiler checks
    layouts and engine lists against and lowers slice and engine numbers with."""
    return load_truth().shape


def chip_key() -> str | None:
    """Which chip the process simulates, for caches of what depends on it (compiles, lowerings)."""
    return os.environ.get(ENV_VAR) or None


def truth_key(truth: ChipTruth) -> str:
    """A stable text for caching results per chip."""
    return truth.model_dump_json()
