"""The event-driven scheduler (docs/simrngd.md §7.4).

Queues `main`, `sub` and `e0`..`e7` run their ops strictly in program order; a DMA op has one
entry (a flow) in the queue of every engine it uses and ends when its last flow does. An op starts
when its queue predecessor has finished, its producers have finished (plus `sync_cycles` when the
producer ran on another kind of queue) and the previous readers of the buffer it overwrites have
finished. DMA flows share cluster ingress/egress and HBM bandwidth by max-min fair water-filling,
recomputed at every event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chiplore.simulator._truth import ChipTruth
from chiplore.simulator.cost.flows import FlowModel, Resource, model_flow
from chiplore.simulator.cost.passes import pass_cycles
from chiplore.simulator.toolchain.lowered import DmaOp, LoweredProgram, PassOp

EPS = 1e-9


@dataclass
class OpTiming:
    label: str
    queue: str  # main | sub | dma
    start: float
    end: float
    bound_by: str
    line: int | None = None


@dataclass
class Schedule:
    makespan: float
    timings: list[OpTiming]
    busy: dict[str, float]  # queue -> busy cycles


@dataclass
class _Entry:
    op: int
    flow: int | None  # index into the DMA op's flows; None for a pass


@dataclass
class _Active:
    entry: _Entry
    phase: str  # startup | xfer | run
    until: float = 0.0
    left: float = 0.0
    started: float = 0.0
    bound_time: dict[str, float] = field(default_factory=dict)  # what limited the flow, for how long


class ScheduleError(RuntimeError):
    """The ops cannot all run: a dependency cycle the lowerer should have made impossible."""


def schedule(program: LoweredProgram, truth: ChipTruth, exclusive: frozenset[str] = frozenset()) -> Schedule:
    """Run the program's ops to completion; `exclusive` passes pause DMA into their clusters."""
    ops = program.ops
    index = {op.id: i for i, op in enumerate(ops)}
    queues: dict[str, list[_Entry]] = {}
    for i, op in enumerate(ops):
        if isinstance(op, DmaOp):
            for k, flow in enumerate(op.flows):
                queues.setdefault(f"e{flow.engine}", []).append(_Entry(i, k))
        else:
            queues.setdefault(op.context, []).append(_Entry(i, None))
    preds = _predecessors(program, index)
    flows: dict[tuple[int, int], FlowModel] = {
        (i, k): model_flow(op, flow, truth)
        for i, op in enumerate(ops)
        if isinstance(op, DmaOp)
        for k, flow in enumerate(op.flows)
    }
    durations: dict[int, tuple[float, str]] = {
        i: pass_cycles(op.work, truth) for i, op in enumerate(ops) if isinstance(op, PassOp)
    }
    parts_left = {i: (len(op.flows) if isinstance(op, DmaOp) else 1) for i, op in enumerate(ops)}
    done: dict[int, float] = {}
    for i, left in parts_left.items():
        if left == 0:  # a DMA that moves nothing (an empty tile) is done at once
            done[i] = 0.0
    heads = dict.fromkeys(queues, 0)
    for name, entries in queues.items():
        while heads[name] < len(entries) and entries[heads[name]].op in done:
            heads[name] += 1
    active: dict[str, _Active] = {}
    last_finish: dict[str, float] = {}
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    bounds: dict[int, dict[str, float]] = {}
    busy = dict.fromkeys(queues, 0.0)
    t = 0.0

    def ready(i: int) -> float | None:
        when = 0.0
        for j, sync in preds[i]:
            if j not in done:
                return None
            when = max(when, done[j] + (truth.sync_cycles if sync else 0.0))
        return when

    def start_heads() -> bool:
        started = False
        for name, entries in queues.items():
            if name in active or heads[name] >= len(entries):
                continue
            entry = entries[heads[name]]
            when = ready(entry.op)
            if when is None or when > t + EPS:
                continue
            op = ops[entry.op]
            starts.setdefault(entry.op, t)
            if isinstance(op, DmaOp):
                assert entry.flow is not None
                chained = heads[name] > 0 and when <= last_finish.get(name, -1.0) + EPS
                startup = truth.dma_chain_startup if chained else truth.dma_startup
                active[name] = _Active(entry, "startup", until=t + startup, left=float(op.flows[entry.flow].bytes),
                                       started=t)  # fmt: skip
            else:
                active[name] = _Active(entry, "run", until=t + durations[entry.op][0], started=t)
            started = True
        return started

    guard = 0
    while True:
        guard += 1
        if guard > 10_000_000:
            raise ScheduleError("the schedule does not converge")
        while start_heads():
            pass
        if not active:
            pending = [ready(entries[heads[n]].op) for n, entries in queues.items() if heads[n] < len(entries)]
            waiting = [w for w in pending if w is not None]
            if not waiting:
                if pending:
                    raise ScheduleError("ops wait on each other: " + _stuck(queues, heads, ops))
                break
            t = max(t, min(waiting))
            continue
        rates, limits = _rates(active, flows, ops, truth, exclusive)
        events: list[float] = []
        for name, state in active.items():
            if state.phase in ("startup", "run"):
                events.append(state.until)
            else:
                events.append(t + state.left / rates[name] if rates[name] > EPS else float("inf"))
        for name, entries in queues.items():
            if name not in active and heads[name] < len(entries):
                when = ready(entries[heads[name]].op)
                if when is not None and when > t:
                    events.append(when)
        following = min(events)
        if following == float("inf"):
            raise ScheduleError("DMA flows are stalled with nothing left to free them")
        dt = following - t
        for name, state in active.items():
            busy[name] += dt
            if state.phase == "xfer":
                state.left -= rates[name] * dt
                state.bound_time[limits[name]] = state.bound_time.get(limits[name], 0.0) + dt
        t = following
        for name, state in list(active.items()):
            finished = False
            if state.phase == "startup" and state.until <= t + EPS:
                state.phase = "xfer"
                finished = state.left <= EPS
            elif (state.phase == "run" and state.until <= t + EPS) or (state.phase == "xfer" and state.left <= 1e-6):
                finished = True
            if not finished:
                continue
            del active[name]
            heads[name] += 1
            last_finish[name] = t
            i = state.entry.op
            for reason, spent in state.bound_time.items():
                bounds.setdefault(i, {})[reason] = bounds.get(i, {}).get(reason, 0.0) + spent
            parts_left[i] -= 1
            if parts_left[i] == 0:
                done[i] = t
                ends[i] = t
            while heads[name] < len(queues[name]) and queues[name][heads[name]].op in done:
                heads[name] += 1
    timings = []
    for i, op in enumerate(ops):
        if isinstance(op, PassOp):
            bound = durations[i][1]
            queue = op.context
        else:
            spent = bounds.get(i, {})
            bound = max(spent, key=spent.__getitem__) if spent else "startup"
            queue = "dma"
        timings.append(OpTiming(op.label, queue, starts.get(i, 0.0), ends.get(i, done.get(i, 0.0)), bound, op.line))
    return Schedule(makespan=t, timings=timings, busy=busy)


def _predecessors(program: LoweredProgram, index: dict[str, int]) -> list[list[tuple[int, bool]]]:
    """Per op: the ops it waits for (producers and the earlier readers of what it overwrites), each
    with whether the hand-off crosses from one kind of queue to another (and pays sync_cycles)."""
    out: list[list[tuple[int, bool]]] = []
    readers: dict[str, list[int]] = {}
    for i, op in enumerate(program.ops):
        waits: dict[int, bool] = {}
        for dep in op.deps:
            if dep in index and index[dep] != i:
                j = index[dep]
                waits[j] = waits.get(j, False) or _crosses(program.ops[j], op)
        for buffer in op.writes:
            for j in readers.get(buffer, []):
                if j != i:
                    waits[j] = waits.get(j, False) or _crosses(program.ops[j], op)
        out.append(list(waits.items()))
        for buffer in op.reads:
            readers.setdefault(buffer, []).append(i)
        for buffer in op.writes:
            readers[buffer] = []
    return out


def _kind(op: DmaOp | PassOp) -> str:
    return "dma" if isinstance(op, DmaOp) else op.context


def _crosses(producer: DmaOp | PassOp, consumer: DmaOp | PassOp) -> bool:
    return _kind(producer) != _kind(consumer)


def _rates(
    active: dict[str, _Active],
    flows: dict[tuple[int, int], FlowModel],
    ops: tuple[DmaOp | PassOp, ...],
    truth: ChipTruth,
    exclusive: frozenset[str],
) -> tuple[dict[str, float], dict[str, str]]:
    """Max-min fair rates of the transferring flows, and what limits each."""
    running = [s for s in active.values() if s.phase == "run"]
    busy_clusters = {c for s in running for c in ops[s.entry.op].clusters}  # type: ignore[union-attr]
    blocked = {c for s in running if ops[s.entry.op].id in exclusive for c in ops[s.entry.op].clusters}  # type: ignore[union-attr]
    moving = {name: s for name, s in active.items() if s.phase == "xfer"}
    models = {name: flows[(s.entry.op, s.entry.flow)] for name, s in moving.items()}  # type: ignore[index]
    capacity: dict[Resource, float] = {}
    for model in models.values():
        for resource in model.uses:
            kind, cluster = resource
            if kind == "hbm":
                capacity[resource] = truth.hbm_bw
            elif kind == "in":
                factor = truth.interference if cluster in busy_clusters else 1.0
                capacity[resource] = 0.0 if cluster in blocked else truth.cluster_ingress * factor
            else:
                capacity[resource] = truth.cluster_ingress
    rate = dict.fromkeys(models, 0.0)
    limit = {name: model.bound for name, model in models.items()}
    unfrozen = set(models)
    while unfrozen:
        step = min(models[q].cap - rate[q] for q in unfrozen)
        for resource, total in capacity.items():
            weight = sum(models[q].uses.get(resource, 0.0) for q in unfrozen)
            if weight > 0:
                used = sum(rate[q] * models[q].uses.get(resource, 0.0) for q in models)
                step = min(step, (total - used) / weight)
        step = max(step, 0.0)
        for q in unfrozen:
            rate[q] += step
        frozen = {q for q in unfrozen if models[q].cap - rate[q] < EPS}
        for resource, total in capacity.items():
            used = sum(rate[q] * models[q].uses.get(resource, 0.0) for q in models)
            if total - used < EPS:
                hit = {q for q in unfrozen if resource in models[q].uses}
                for q in hit - frozen:
                    limit[q] = _resource_name(resource)
                frozen |= hit
        if not frozen:
            break
        unfrozen -= frozen
    return rate, limit


def _resource_name(resource: Resource) -> str:
    kind, cluster = resource
    return {"in": f"ingress{cluster}", "out": f"egress{cluster}", "hbm": "hbm"}[kind]


def _stuck(queues: dict[str, list[_Entry]], heads: dict[str, int], ops: tuple[DmaOp | PassOp, ...]) -> str:
    waiting = [f"{name}: {ops[entries[heads[name]].op].label}" for name, entries in queues.items()
               if heads[name] < len(entries)]  # fmt: skip
    return "; ".join(waiting[:4])
