"""The constructs a toolchain has, as the learnt capability flags and limits say (never by version).

Each function answers from `facts` (parameter key -> value; a capability flag is 0 when a learnt rule
refuses the construct, 1 when none does) with the default a 0.6.0-era program would assume.
"""

from __future__ import annotations

from chiplore.core.pack import Facts
from chiplore.simulator.pack import capabilities as C
from chiplore.simulator.pack import params as P
from chiplore.simulator.shape import Chip

BUFFERS = C.BUFFERS  # `buffers: N` in a tensor type instead of `#[pipeline(depth = N)]`, where the rules allow

DOCUMENTED_DM = 480 * 1024  # until the capacity probe has measured it
DOCUMENTED_CHAIN = 6  # vector ops per pass, until the chain probe has measured it
HBM_UNIT = 256  # bytes, until measured
MAX_PACKET = 4096


def chip(facts: Facts) -> Chip:
    """The learnt shape (each value the documented one until it is measured)."""
    keys = {"clusters": P.CLUSTERS, "slices": P.SLICES, "engines_per_cluster": P.ENGINES_PER_CLUSTER,
            "lanes": P.LANES, "trf_lane_bytes": P.TRF_LANE, "vrf_bytes": P.VRF_SLICE}  # fmt: skip
    return Chip.named({name: facts[key.key] for name, key in keys.items() if key.key in facts})


def flag(facts: Facts, key: str, default: float) -> bool:
    return facts.get(key, default) > 0


def widen(facts: Facts) -> str:
    """The fetch adapter's widening (`.widen` where `.cast` was split, 0.7.0)."""
    return "widen" if flag(facts, C.WIDEN, 0.0) else "cast"


def narrow(facts: Facts) -> str:
    return "narrow" if flag(facts, C.WIDEN, 0.0) else "cast"


def lookup(facts: Facts) -> str:
    """The table-lookup stage (`.lut` until it was renamed `.decode`)."""
    return "decode" if flag(facts, C.DECODE, 1.0) else "lut"


def all_reduce(group: str, facts: Facts) -> str:
    """A sum over `group` left on every slice of it."""
    if flag(facts, C.ALLREDUCE, 0.0):
        return f".allreduce_slices(add, group = [{group}])"
    return f".reduce_slices(add, group = [{group}], result = all)"


def bridge(facts: Facts) -> bool:
    """Whether the clusters' values can be added over the cluster bridge (`reduce_clusters`)."""
    return flag(facts, C.BRIDGE, 0.0)


def buffers(facts: Facts) -> bool:
    return flag(facts, BUFFERS, 0.0)


def streams(facts: Facts, dtype: str) -> bool:
    """Whether a contraction takes `dtype` codes as they stream in, against a bf16 operand."""
    if dtype == "bf16":
        return True
    if dtype == "f8e4m3":
        return flag(facts, C.F8_STREAM, 1.0)
    if dtype == "f4e2m1":
        return flag(facts, C.F4_STREAM, 0.0)
    return False


def usable_dm(facts: Facts) -> float:
    return facts.get(P.DM_USABLE.key, DOCUMENTED_DM)


def chain_limit(facts: Facts) -> int:
    return max(3, int(facts.get(P.MAX_CHAIN.key, DOCUMENTED_CHAIN)))


def hbm_unit(facts: Facts) -> int:
    return int(facts.get(P.HBM_UNIT.key, HBM_UNIT))


CONSULTS = (P.DM_USABLE.key, P.MAX_CHAIN.key, P.HBM_UNIT.key, C.WIDEN, C.DECODE, C.ALLREDUCE, C.BRIDGE,
            C.F8_STREAM, C.F4_STREAM, BUFFERS, P.CLUSTERS.key, P.SLICES.key, P.ENGINES_PER_CLUSTER.key,
            P.LANES.key, P.TRF_LANE.key, P.VRF_SLICE.key)  # fmt: skip
