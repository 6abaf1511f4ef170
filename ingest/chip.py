"""One graph, one chip: the chip a graph learnt (its devices' word for it), and the refusal of another.

A graph's facts are one chip's: its rates, limits and shape price and judge every design. A data dir
learnt on one chip and then pointed at another (a forgotten environment variable, a board swapped)
would otherwise blame the toolchain for what the silicon changed, and mix two chips in one status."""

from __future__ import annotations

from chiplore.core.errors import ConfigError
from chiplore.core.pack import Facts
from chiplore.core.target import ChipIdentity, Target
from chiplore.kg.repo.targets import learnt_chip, record_chip
from chiplore.kg.store import GraphStore


def other_chip(store: GraphStore, target: Target) -> str:
    """Why this graph's facts are not of the target's chip, in one line; "" when they are, or when the
    devices or the graph say nothing of a chip."""
    current, learnt = target.chip(), learnt_chip(store, target.name)
    if current is None or learnt is None or learnt[0] == current.id:
        return ""
    was = ChipIdentity(id=learnt[0], note=learnt[1]).describe()
    # the same source saying another chip: a file edited in place, or a chiplore whose chip changed
    moved = " (the same source, whose chip has changed since)" if learnt[1] and learnt[1] == current.note else ""
    return (f"this graph learnt chip {was}, and the devices are now {current.describe()}{moved}: a graph holds "
            "one chip's facts; learn this chip in a data dir of its own, or point the target back at the chip "
            "this graph learnt (the note in brackets says where each came from)")  # fmt: skip


def chip_refusal(store: GraphStore, target: Target, facts: Facts, version: str) -> str:
    """Why no design priced from this graph's facts can run on the target's chip, in one line ("" when
    they can): another chip than the one the graph learnt, or a shape the compiler no longer takes (what
    a graph an older chiplore learnt, with no chip recorded, can still be asked)."""
    return other_chip(store, target) or target.pack().chip_mismatch(facts, version)


def bind_chip(store: GraphStore, target: Target) -> None:
    """Refuse a graph that learnt another chip (ConfigError); else record this one, which a first learn
    binds the graph to."""
    refusal = other_chip(store, target)
    if refusal:
        raise ConfigError(refusal)
    current = target.chip()
    if current is not None:
        record_chip(store, target.name, current.id, current.note)
