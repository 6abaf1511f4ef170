"""The event schedule of SimRNGD's stats-based cost model: a program's dumped ops on their in-order
queues, DMA flows sharing the cluster ports max-min fairly (docs/simrngd.md §7.4, learnt numbers).

An op starts once its queue is free, its producers are done (plus a hand-off when the producer ran
on another kind of queue) and the readers of the buffer it overwrites are done. A DMA command pays a
start-up (less when it was queued behind another), then its flow moves at its fair share of what it
reaches alone and of the ports it shares: ingress slowed while a pass runs in the cluster, closed
while a pass that must run alone (a long same-bank run beside DMA) runs there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chiplore.core.stats import OpStats, ProgramStats
from chiplore.simulator.pack.prices import Prices, flow_cap, pass_cycles

EPS = 1e-9


ROOF = "chip.roof"  # the pseudo-port every load shares where the measured roof is below the ports' sum


@dataclass
class _Part:
    op: int
    queue: str
    flow: bool  # a DMA flow (start-up, then bytes at a shared rate); else a pass of fixed duration
    duration: float = 0.0
    left: float = 0.0  # a flow's bytes
    cap: float = 0.0
    ports: tuple[str, ...] = ()  # the cluster ports it shares


@dataclass
class _Running:
    part: _Part
    transferring: bool
    until: float  # end of the start-up or of the pass
    left: float = 0.0
    started: float = 0.0


@dataclass(frozen=True)
class Schedule:
    """A program's predicted schedule: its makespan and each queue's busy cycles (start-ups included),
    and of those the cycles each DMA queue spent in its commands' start-ups."""

    makespan: float
    busy: dict[str, float]
    startups: dict[str, float] = field(default_factory=dict)


def makespan(stats: ProgramStats, p: Prices) -> float | None:
    """Cycles from the first op's start to the last op's end; None when the ops cannot all run."""
    return _Timeline(stats, p).run()


def schedule(stats: ProgramStats, p: Prices) -> Schedule | None:
    """The predicted schedule (None when the ops cannot all run)."""
    timeline = _Timeline(stats, p)
    span = timeline.run()
    return None if span is None else Schedule(span, dict(timeline.busy), dict(timeline.startups))


class _Timeline:
    def __init__(self, stats: ProgramStats, p: Prices) -> None:
        ops = stats.ops
        index = {op.id: i for i, op in enumerate(ops)}
        side = [_side(op) for op in ops]
        self.p = p
        self.waits = [[(index[d], side[index[d]] != side[i]) for d in (*op.deps, *op.after) if d in index]
                      for i, op in enumerate(ops)]  # fmt: skip
        self.queues: dict[str, list[_Part]] = {}
        for i, op in enumerate(ops):
            for part in _parts(i, op, p):
                self.queues.setdefault(part.queue, []).append(part)
        self.left = [len(op.parts) for op in ops]  # parts still to finish
        self.done: list[float | None] = [0.0 if n == 0 else None for n in self.left]
        self.known: list[float | None] = [None] * len(ops)  # when an op may start, once its waits are done
        self.tu = [_clusters(op) for op in ops]
        self.alone = [op.family == "pass" and op.counters.get("bank_run", 0.0) >= p.bank_run
                      and op.counters.get("concurrent_dma_writes", 0.0) > 0 for op in ops]  # fmt: skip
        self.heads = dict.fromkeys(self.queues, 0)
        self.last_end: dict[str, float] = {}
        self.running: dict[str, _Running] = {}
        self.memo: dict[tuple, list[float]] = {}
        self.busy: dict[str, float] = {}  # queue -> cycles it ran a part (start-ups included)
        self.startups: dict[str, float] = {}  # DMA queue -> cycles of its commands' start-ups
        self.t = 0.0

    def run(self) -> float | None:
        for _ in range(50 * sum(len(q) for q in self.queues.values()) + 100):
            self._start_heads()
            if not self.running:
                pending = [self._ready(parts[self.heads[n]].op) for n, parts in self.queues.items()
                           if self.heads[n] < len(parts)]  # fmt: skip
                later = [w for w in pending if w is not None]
                if not later:
                    return None if pending else self.t  # None: ops that wait on each other
                self.t = max(self.t, min(later))
                continue
            rates = _rates(self.running, self.t, self.tu, self.alone, self.p, self.memo)
            following = self._next_event(rates)
            if following == math.inf:
                return None  # flows stalled with nothing left to free them
            step = max(following - self.t, 0.0)
            for name, state in self.running.items():
                if name in rates:
                    state.left -= rates[name] * step
            self.t += step
            self._finish()
        return None

    def _ready(self, i: int) -> float | None:
        if self.known[i] is not None:
            return self.known[i]
        when = 0.0
        for j, crosses in self.waits[i]:
            end = self.done[j]
            if end is None:
                return None
            when = max(when, end + self.p.handoff if crosses else end)
        self.known[i] = when
        return when

    def _start_heads(self) -> None:
        """Start every queue's next part that may start now."""
        t, p = self.t, self.p
        for name, parts in self.queues.items():
            if name in self.running or self.heads[name] >= len(parts):
                continue
            part = parts[self.heads[name]]
            when = self._ready(part.op)
            if when is None or when > t + EPS:
                continue
            if not part.flow:
                self.running[name] = _Running(part, False, t + part.duration, started=t)
                continue
            chained = self.heads[name] > 0 and when <= self.last_end.get(name, -1.0) + EPS
            startup = p.dma_queued_start if chained else p.dma_start
            self.startups[name] = self.startups.get(name, 0.0) + startup
            self.running[name] = _Running(part, True, t + startup, part.left, started=t)

    def _next_event(self, rates: dict[str, float]) -> float:
        """The next time something ends: a start-up, a pass, a flow, or a wait for a queue's head."""
        t = self.t
        events = [math.inf]
        for name, state in self.running.items():
            if name not in rates:
                events.append(state.until)
            elif rates[name] > EPS:
                events.append(t + state.left / rates[name])
        for name, parts in self.queues.items():
            if name not in self.running and self.heads[name] < len(parts):
                when = self._ready(parts[self.heads[name]].op)
                if when is not None and when > t + EPS:
                    events.append(when)
        return min(events)

    def _finish(self) -> None:
        """Retire the parts that are done by now; an op is done when its last part is."""
        t = self.t
        for name, state in list(self.running.items()):
            if state.until > t + EPS or (state.transferring and state.left > 1e-6):
                continue
            del self.running[name]
            self.busy[name] = self.busy.get(name, 0.0) + t - state.started
            self.heads[name] += 1
            self.last_end[name] = t
            i = state.part.op
            self.left[i] -= 1
            if self.left[i] == 0:
                self.done[i] = t
            parts = self.queues[name]
            while self.heads[name] < len(parts) and self.done[parts[self.heads[name]].op] is not None:
                self.heads[name] += 1


def _clusters(op: OpStats) -> tuple[str, ...]:
    """The clusters whose Tensor Unit a pass runs on (`cluster0.tu` -> `cluster0`)."""
    if op.family != "pass" or not op.parts:
        return ()
    return tuple(r.removesuffix(".tu") for r in op.parts[0].resources if r.endswith(".tu"))


def _side(op: OpStats) -> str:
    """Which kind of queue runs the op: a hand-off between kinds costs the hand-off cycles."""
    return "dma" if op.family == "dma" else op.parts[0].queue if op.parts else op.kind


def _parts(i: int, op: OpStats, p: Prices) -> list[_Part]:
    if op.family == "pass":
        return [_Part(i, part.queue, False, duration=pass_cycles(op.counters, p)) for part in op.parts]
    variant = op.kind.split(".", 1)[-1]
    out = []
    for part in op.parts:
        ports = tuple(r for r in part.resources if r.startswith("cluster"))
        if p.roof is not None and any(port.endswith(".ingress") for port in ports):
            ports += (ROOF,)  # below the ports' sum, the chip's roof is shared by every load
        out.append(_Part(i, part.queue, True, left=part.counters.get("bytes", 0.0),
                         cap=flow_cap(variant, part.counters, p), ports=ports))  # fmt: skip
    return out


def _rates(running: dict[str, _Running], t: float, tu: list[tuple[str, ...]], alone: list[bool], p: Prices,
           memo: dict[tuple, list[float]]) -> dict[str, float]:  # fmt: skip
    """Max-min fair rates of the flows moving bytes, over their caps and the cluster ports (the same
    flows beside the same passes share the same way: `memo` keeps what was worked out)."""
    busy: set[str] = set()
    closed: set[str] = set()
    names: list[str] = []
    moving: list[_Part] = []
    for name, state in running.items():
        if not state.transferring:
            busy.update(tu[state.part.op])
            if alone[state.part.op]:
                closed.update(tu[state.part.op])
        elif state.until <= t + EPS:
            names.append(name)
            moving.append(state.part)
    key = (tuple((part.cap, part.ports) for part in moving), frozenset(busy), frozenset(closed))
    known = memo.get(key)
    if known is not None:
        return dict(zip(names, known, strict=True))
    users: dict[str, list[int]] = {}
    for i, part in enumerate(moving):
        for port in part.ports:
            users.setdefault(port, []).append(i)
    capacity = {port: _capacity(port, busy, closed, p) for port in users}
    rate = [0.0] * len(moving)
    free = set(range(len(moving)))
    while free:
        step = min(moving[i].cap - rate[i] for i in free)
        for port, sharing in users.items():
            waiting = sum(1 for i in sharing if i in free)
            if waiting:
                step = min(step, (capacity[port] - sum(rate[i] for i in sharing)) / waiting)
        step = max(step, 0.0)
        for i in free:
            rate[i] += step
        frozen = {i for i in free if moving[i].cap - rate[i] < EPS}
        for port, sharing in users.items():
            if capacity[port] - sum(rate[i] for i in sharing) < EPS:
                frozen.update(i for i in sharing if i in free)
        if not frozen:
            break
        free -= frozen
    memo[key] = rate
    return dict(zip(names, rate, strict=True))


def _capacity(port: str, busy: set[str], closed: set[str], p: Prices) -> float:
    """A cluster port's bytes per cycle: ingress is slowed while a pass runs in the cluster and closed
    while a pass that must run alone runs there; egress is the port's full rate."""
    if port == ROOF:
        return p.roof or math.inf
    cluster, kind = port.split(".", 1)
    if kind != "ingress":
        return p.cluster_port
    if cluster in closed:
        return 0.0
    return p.cluster_port * (p.interference if cluster in busy else 1.0)
