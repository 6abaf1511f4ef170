"""The program being written: its statements in order, fresh names, the engines small loads take, and
the budgets a design must fit (DM, VRF live set) as the emitters account for them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from chiplore.core.pack import Facts
from chiplore.simulator.pack.generator import vocab
from chiplore.simulator.shape import DOCUMENTED_CHIP, Chip


@dataclass
class Budget:
    """What a slice holds: DM tensors outside the loops (all counted live at once, a safe
    over-estimate), each loop's rotating buffers, and the VRF live set at each pass."""

    dm_fixed: int = 0
    dm_loops: list[int] = field(default_factory=list)
    vrf_sizes: dict[str, int] = field(default_factory=dict)
    vrf_first: dict[str, int] = field(default_factory=dict)
    vrf_last: dict[str, int] = field(default_factory=dict)

    @property
    def dm(self) -> int:
        return self.dm_fixed + max(self.dm_loops, default=0)

    def vrf_peak(self) -> int:
        events = sorted({*self.vrf_first.values(), *self.vrf_last.values()})
        peak = 0
        for at in events:
            live = sum(size for name, size in self.vrf_sizes.items()
                       if self.vrf_first[name] <= at <= self.vrf_last.get(name, self.vrf_first[name]))  # fmt: skip
            peak = max(peak, live)
        return peak


@dataclass
class Engines:
    """Engines per cluster for the weight streams, and which take the small loads: the spare ones, or
    (`stagger`) the weight engines in turn, so that the engines start their streams at different
    times and one engine's command start-up overlaps the others' transfers instead of idling the port."""

    weights: int
    stagger: bool = False
    copy_spare: bool = False  # a replicating copy of the input on the spare engines (else on every engine)
    chip: Chip = DOCUMENTED_CHIP

    @property
    def last(self) -> int:
        """A cluster's last engine (its own number within the cluster)."""
        return self.chip.engines_per_cluster - 1

    def spare_local(self) -> list[int]:
        """The engines of a cluster the weight streams leave free (its last when none is)."""
        return list(range(self.weights, self.chip.engines_per_cluster)) or [self.last]

    def listed(self, clusters: tuple[int, ...] | None, local: list[int]) -> str:
        """`local` engines of each of `clusters` (every cluster of the chip by default)."""
        every = self.chip.every if clusters is None else clusters
        return "[" + ", ".join(str(self.chip.engine(c, e)) for c in every for e in local) + "]"

    def stream_local(self, count: int | None = None) -> list[int]:
        """A cluster's weight-stream engines (local numbers): the design's, or `count` of them."""
        return list(range(count or self.weights))

    def stream(self, clusters: tuple[int, ...] | None = None, count: int | None = None) -> str:
        return self.listed(clusters, self.stream_local(count))

    def aux(self, turn: int, clusters: tuple[int, ...] | None = None) -> str:
        """One small-load engine per destination cluster, taking turns over the spare engines."""
        if self.stagger and self.weights > 1:
            engine = _staircase(self.weights, turn)
        else:
            spare = self.spare_local()
            engine = spare[turn % len(spare)]
        return self.listed(clusters, [engine])

    def spare(self, clusters: tuple[int, ...] | None = None) -> str:
        """Every engine the weight streams leave free (the last of each cluster when none is)."""
        return self.listed(clusters, self.spare_local())

    def every(self) -> str:
        return self.listed(None, list(range(self.chip.engines_per_cluster)))

    def copy(self) -> str:
        """Engines of the input's replicating copy, issued before the weight streams: every engine (the
        copy ends soonest, the streams queue behind it: queues are first in, first out) or the spare
        ones (the streams start at once; the copy takes longer beside them). The space prices both."""
        return self.spare() if self.copy_spare else self.every()


class Program:
    """Statements of the kernel body in order, with `early` loads that go before everything else."""

    def __init__(self, facts: Facts, engines: Engines, reserved: frozenset[str] = frozenset()) -> None:
        self.facts = facts
        self.reserved = reserved  # names the program may not define: the kernel's parameters, its name, its axes
        self.engines = engines
        self.early: list[str] = []
        self.body: list[str] = []
        self.late: list[LateStore] = []  # stores of outputs (`store`): after everything
        self.inserted: dict[int, list[str]] = {}  # body index -> statements written before it later
        self.clocks: dict[int, int] = {}
        self.layouts: dict[str, str] = {}
        self.budget = Budget()
        self._names: dict[str, itertools.count[int]] = {}
        self._issued: set[str] = set()
        self._loop_vars: dict[str, str] = {}
        self._turn = itertools.count()
        self._loop_turn = itertools.count()
        self.preloading = False
        self.preloaded: dict[str, str] = {}  # weight -> its block scales, loaded whole, up front (a later group's)
        self.passes = 0  # statements so far that use a VRF or define one (the live-set clock)
        self.notes: list[str] = []
        self.copied_input = False  # whether an input reaches the TRFs by a replicating copy (Inputs)
        self.shared = False  # whether some cluster's weight engines were shared out among a chunk's DMAs (Stream)
        self.subdecoded = False  # whether the sub queue decodes some stream's chunks (Stream)

    def name(self, stem: str) -> str:
        """A fresh local name from `stem` (`stem`, `stem_1`, ...) that shadows no parameter and no
        other local: a kernel may call its parameters `out`, `acc` or `x0_k`."""
        counter = self._names.setdefault(stem, itertools.count())
        while True:
            index = next(counter)
            name = stem if index == 0 else f"{stem}_{index}"
            if name not in self.reserved and name not in self._issued:
                self._issued.add(name)
                return name

    def unused(self, stem: str) -> str:
        """`stem`, `stem_1`, ...: the first that names no parameter, local or layout, without taking it
        (asked again, it answers the same: a written program's text never changes)."""
        names = (stem if index == 0 else f"{stem}_{index}" for index in itertools.count())
        return next(n for n in names if n not in self.reserved and n not in self._issued and n not in self.layouts)

    def loop_var(self, stem: str) -> str:
        """The loop variable named from `stem`: one name for every loop that uses the stem."""
        if stem not in self._loop_vars:
            self._loop_vars[stem] = self.name(stem)
        return self._loop_vars[stem]

    def aux_engines(self, clusters: tuple[int, ...] | None = None) -> str:
        """Engines of a small load issued before the weight streams."""
        return self.engines.aux(next(self._turn), clusters)

    def preload_engine(self) -> int | None:
        """The engine (per cluster) that preloads later groups' block scales, when two are spare."""
        engines = self.engines
        spare = len(engines.spare_local()) if engines.weights < engines.chip.engines_per_cluster else 0
        return engines.last if self.preloading and spare >= 2 else None

    def loop_engines(self, clusters: tuple[int, ...] | None = None) -> str:
        """Engines of a small load inside a weight loop: spare ones (the last when there is none)."""
        engines = self.engines
        spare = [e for e in engines.spare_local() if e != self.preload_engine()] or [engines.last]
        engine = spare[next(self._loop_turn) % len(spare)]
        return engines.listed(clusters, [engine])

    def emit(self, text: str, early: bool = False, at: int | None = None) -> None:
        """Append a statement (to the early loads, or before body statement `at`, a `mark`)."""
        if at is not None:
            self.inserted.setdefault(at, []).append(text)
            return
        (self.early if early else self.body).append(text)
        self.passes += 1

    def store(self, source: str, target: str, clusters: tuple[int, ...] | None = None, staged: str = "") -> None:
        """`source.dma_into(target)`, a store of an output written after everything (out of the weight
        engines' way), on engines of `clusters` that `text` chooses (`store_engines`). `staged`: the type
        of a DM tensor the rows are first gathered into (by a DM-to-DM copy on the same engines)."""
        chosen = self.engines.chip.every if clusters is None else clusters
        self.late.append(LateStore(source, target, chosen, self.name(f"{source}_s") if staged else "", staged))

    @property
    def staged(self) -> int:
        """Stores gathered into whole HBM units first."""
        return sum(bool(store.staged) for store in self.late)

    def mark(self) -> int:
        """A place in the body where statements can be written later (a group's loop start)."""
        self.clocks[len(self.body)] = self.passes
        return len(self.body)

    def dm(self, elements: int, dtype: str) -> None:
        self.budget.dm_fixed += _bytes(elements, dtype)

    def vrf_defined(self, name: str, elements: int, early: bool = False, at: int | None = None) -> None:
        self.budget.vrf_sizes[name] = 4 * elements
        self.budget.vrf_first[name] = 0 if early else self.clocks[at] if at is not None else self.passes

    def vrf_used(self, name: str) -> None:
        self.budget.vrf_last[name] = self.passes

    def text(self) -> str:
        body = [text for index, stmt in enumerate(self.body) for text in (*self.inserted.get(index, ()), stmt)]
        engines = store_engines([store.clusters for store in self.late], self.engines.chip.engines_per_cluster)
        late = [store.text(chosen) for store, chosen in zip(self.late, engines, strict=True)]
        return "".join(self.early) + "".join(body) + "".join(late)


@dataclass(frozen=True)
class LateStore:
    """A store of an output, written after everything; `staged` (with its local `name`): first gathered
    into a DM tensor of that type, whose slices hold whole HBM units of the rows."""

    source: str
    target: str
    clusters: tuple[int, ...]
    name: str = ""
    staged: str = ""

    def text(self, engines: str) -> str:
        if not self.staged:
            return f"    {self.source}.dma_into({self.target}, engines = {engines});\n"
        return (f"    let {self.name}: {self.staged} = {self.source}.dma(engines = {engines});\n"
                f"    {self.name}.dma_into({self.target}, engines = {engines});\n")  # fmt: skip


def store_engines(stores: list[tuple[int, ...]], per_cluster: int = 4) -> list[str]:
    """The engines of each store, given the clusters each reaches: the stores of a cluster share its
    engines out, in turn (a lone store takes them all). A store this late is mostly a DMA start-up,
    and start-ups on one engine run one after another: several stores on every engine would pay them
    in a row, on engines of their own they pay them side by side."""
    sharing = {c: sum(c in clusters for clusters in stores) for c in {c for cs in stores for c in cs}}
    turn = dict.fromkeys(sharing, 0)
    out = []
    for clusters in stores:
        engines = []
        for c in clusters:
            share = max(1, per_cluster // sharing[c])
            engines += [per_cluster * c + (turn[c] + e) % per_cluster for e in range(share)]
            turn[c] = (turn[c] + share) % per_cluster
        out.append("[" + ", ".join(map(str, engines)) + "]")
    return out


def _staircase(engines: int, turn: int) -> int:
    """The engine of the `turn`-th small load when they stagger the weight engines: rounds 1, 2, ...
    take engines n-1, then n-1 and n-2, ..., never engine 0, so engine i ends up with the most loads
    the higher i is (start offsets 0, 1, 2, ... loads apart)."""
    order: list[int] = []
    width = 1
    while len(order) <= turn:
        order += list(range(engines - 1, max(engines - 1 - width, 0), -1))
        width = min(width + 1, engines - 1)
    return order[turn]


def _bytes(elements: int, dtype: str) -> int:
    return int(elements * {"f32": 4, "bf16": 2, "f8e4m3": 1, "f4e2m1": 0.5, "i32": 4, "i8": 1}[dtype])


def dtype_bytes(dtype: str) -> float:
    return {"f32": 4, "bf16": 2, "f8e4m3": 1, "f4e2m1": 0.5, "i32": 4, "i8": 1}[dtype]


def float_text(value: float) -> str:
    """A vector-op literal: exact for what is exact, else 12 significant digits."""
    if float(value).is_integer():
        return f"{value:.1f}"
    return f"{value:.12g}" if "e" not in f"{value:.12g}" else f"{value:.12f}"


def limits(facts: Facts) -> tuple[int, int]:
    """(usable DM per slice, VRF bytes per slice)."""
    return int(vocab.usable_dm(facts)), vocab.chip(facts).vrf_bytes
