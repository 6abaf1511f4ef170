"""An upgrade's re-validation of each kernel's baseline and BEST under the new toolchain.

A program that still compiles is measured again. One that does not is repaired: a design-space
design is regenerated from its knobs with the new knowledge (the nearest valid knobs when the old
ones no longer fit), any other program is rewritten from the compiler's diagnostics. The repair is
a new design that goes through the same lifecycle as the loop's (screens, a graded run) and is then
accepted as its predecessor's successor: a repaired BEST stays BEST, since its predecessor cannot
run any more. Each outcome is a Revalidation node, written once, so a resumed upgrade skips it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from chiplore.agents.callbacks import Events, RecordScreenings
from chiplore.agents.cost_model import CalibratedCostModel
from chiplore.agents.knowledge import Knowledge
from chiplore.agents.lease import Lease
from chiplore.agents.lifecycle import Decider, DesignLifecycle
from chiplore.agents.loop import design_id
from chiplore.agents.repair import repair
from chiplore.agents.runner import DeviceRunner
from chiplore.agents.screens import Candidate, Screener, standard_screens
from chiplore.core.ids import content_sha
from chiplore.core.pack import DesignSpace, Params, nearest_points
from chiplore.core.target import KernelSpec, Target
from chiplore.kg.models import REPAIR_POLICY, Activity, DesignNode, KernelVersion, Revalidation
from chiplore.kg.repo.designs import (
    add_design,
    claim_design,
    get_design,
    make_root,
    set_best,
    source_of,
    update_design,
)
from chiplore.kg.repo.progress import pooled_cycles
from chiplore.kg.repo.runs import graded_median, graded_runs
from chiplore.kg.repo.upgrades import record_revalidation, revalidation_of
from chiplore.kg.store import GraphStore

Say = Callable[[str], None]


class Graded(NamedTuple):
    """A design's graded measurement under the new version (cycles None: the run failed, `why` says how)."""

    cycles: float | None
    run_ids: tuple[str, ...]
    why: str = ""


@dataclass
class AcceptRepair(Decider):
    """The upgrade's decider: a measured repair succeeds its broken predecessor."""

    store: GraphStore
    kernel: str
    version: str
    predecessor: str
    is_best: bool
    lease: Lease

    def decide(self, node: DesignNode, source: str) -> bool:
        cycles = statistics.median(pooled_cycles(self.store, node.id, self.version))
        why = f"repaired {self.predecessor} for {self.version}; its predecessor no longer compiles"
        done = {"status": "accepted", "measured_cycles": cycles, "reason": why, "owner": "", "lease_until": ""}
        if self.is_best:
            set_best(self.store, self.kernel, node.id, held_by=self.lease.owner, **done)
        else:
            update_design(self.store, node.id, held_by=self.lease.owner, **done)
        return self.is_best


@dataclass
class Revalidator:
    store: GraphStore
    target: Target
    spec: KernelSpec
    previous: str
    version: str
    knowledge: Knowledge
    runner: DeviceRunner
    activity: Activity
    say: Say
    lease: Lease

    def design(self, node: DesignNode, role: str, *, is_best: bool) -> Revalidation:
        """Re-validate one design (the kernel's baseline or its BEST) under the new version."""
        store, kernel, version = self.store, self.spec.name, self.version
        rid = Revalidation.id_of(kernel, node.id, version)
        done = revalidation_of(store, rid)
        if done is not None:
            return done
        source = source_of(store, node.id)
        before = pooled_cycles(store, node.id, self.previous)
        base = Revalidation(id=rid, kernel=kernel, design=node.id, role=role, from_version=self.previous,  # type: ignore[arg-type]
                            to_version=version, outcome="survived",
                            cycles_before=statistics.median(before) if before else node.measured_cycles)  # fmt: skip
        errors = [d for d in self.target.check(source, version).diagnostics if d.is_error]
        if not errors:
            graded = self._graded(node.id, source)
            if graded.cycles is None:
                return self._record(base.model_copy(update={"outcome": "broken", "detail": graded.why}),
                                    graded.run_ids)  # fmt: skip
            cycles, run_ids = graded.cycles, graded.run_ids
            if is_best:  # its cycles and its raw price both under the new version: the calibration pairs them
                params = json.loads(node.params) if node.params else None
                raw = self.model.raw(kernel, source, params, self.knowledge.facts)
                priced = {"model_cycles": raw} if raw is not None else {}
                update_design(store, node.id, measured_cycles=statistics.median(pooled_cycles(store, node.id, version)),
                              **priced)  # fmt: skip
            self.say(f"{kernel}: {role} {node.id} compiles under {version}: {cycles:,.0f} cycles")
            return self._record(base.model_copy(update={"cycles_after": cycles}), run_ids)
        broken = "; ".join(sorted({f"{d.code}: {d.message}" for d in errors}))[:1000]
        base = base.model_copy(update={"diagnostics": broken})
        fixed = self._repair(node, source)
        if fixed is None:
            self.say(f"{kernel}: {role} {node.id} is broken under {version} and could not be repaired")
            return self._record(base.model_copy(update={"outcome": "broken", "detail": "no repair compiles"}), ())
        change = fixed[1]
        repaired = self._measure_repair(node, role, fixed, broken, is_best)
        if repaired is None:
            return self._record(base.model_copy(update={"outcome": "broken", "detail": f"the repair failed: {change}"}),
                                ())  # fmt: skip
        node_id, cycles, runs = repaired
        self.say(f"{kernel}: {role} {node.id} broke under {version}; repaired as {node_id} ({change}): "
                 f"{cycles:,.0f} cycles")  # fmt: skip
        return self._record(base.model_copy(update={"outcome": "repaired", "repaired_design": node_id,
                                                    "cycles_after": cycles, "detail": change}), runs)  # fmt: skip

    def official_root(self, root: DesignNode) -> Revalidation | None:
        """Where a generated design stood in for an official baseline the old version refused (a 0.7.0 pack
        on a 0.6.0 graph) and the new version compiles that baseline as written, the baseline is measured
        and becomes the root again (SUPERSEDES the stand-in), so that speedups are over the vendor's program
        and not over the stand-in; None where the root is the official baseline or the new version refuses
        it too. BEST is left as it is (the caller re-validates a stand-in that is BEST)."""
        source = self.spec.baseline_source
        if root.policy != "generated" or content_sha(source) == content_sha(source_of(self.store, root.id)):
            return None
        if not self.target.check(source, self.version).ok:
            return None
        store, kernel, version = self.store, self.spec.name, self.version
        node_id = design_id(kernel, content_sha(source))
        rid = Revalidation.id_of(kernel, node_id, version)
        done = revalidation_of(store, rid)
        if done is not None:
            return done
        if get_design(store, node_id) is None:
            add_design(
                store,
                DesignNode(
                    id=node_id,
                    kernel=kernel,
                    role="baseline",
                    policy="official",
                    depth=0,
                    rationale=f"the vendor's official baseline, which compiles under {version} as written",
                    change=f"root: the official baseline (under {self.previous} {root.id} stood in for it)",
                    status="queued",
                    model_cycles=self.model.raw(kernel, source, None, self.knowledge.facts),
                ),
                version=KernelVersion(sha=content_sha(source), kernel=kernel, source=source, toolchain=version),
                parent=root.id,
                activity=self.activity,
            )  # a child until measured: then the root (make_root)
        graded = self._graded(node_id, source)
        if graded.cycles is None:
            update_design(store, node_id, status="failed", reason=graded.why)
            return None  # the stand-in stays the root, and is re-validated as one
        cycles, run_ids = graded.cycles, graded.run_ids
        update_design(store, node_id, status="accepted", measured_cycles=cycles)
        make_root(store, kernel, node_id, superseded=root.id)
        self.say(f"{kernel}: the official baseline compiles under {version} and is the baseline again: "
                 f"{cycles:,.0f} cycles ({root.id} stood in for it)")  # fmt: skip
        return self._record(Revalidation(id=rid, kernel=kernel, design=node_id, role="baseline",
                                         from_version=self.previous, to_version=version, outcome="survived",
                                         cycles_before=root.measured_cycles, cycles_after=cycles,
                                         detail=f"the official baseline, in place of the stand-in {root.id}"),
                            run_ids)  # fmt: skip

    def _graded(self, design: str, source: str) -> Graded:
        """The design's graded median under the new version: recorded before a kill (not measured again),
        or measured now; `why` the device's answer when the run fails."""
        recorded = graded_median(self.store, design, self.version)
        if recorded is not None:
            return Graded(recorded, tuple(graded_runs(self.store, design)))
        outcome = self.runner.run(self.spec.name, content_sha(source), source, self.version)
        if not outcome.ok or outcome.result.median_cycles is None:
            return Graded(None, tuple(outcome.run_ids), f"the device: {outcome.result.message}")
        return Graded(float(outcome.result.median_cycles), tuple(outcome.run_ids))

    @property
    def space(self) -> DesignSpace | None:
        return self.target.pack().design_space(self.spec, self.knowledge.facts)

    @cached_property
    def model(self) -> CalibratedCostModel:
        """The pack's cost model, uncalibrated: nothing has run under the new version yet."""
        return CalibratedCostModel(self.target.pack().cost_model)

    def _repair(self, node: DesignNode, source: str) -> tuple[str, str, Params | None] | None:
        """The space's program for the same knobs under the new knowledge (the nearest valid knobs
        when the old ones no longer fit), else the source rewritten from the diagnostics."""
        space, facts = self.space, self.knowledge.facts
        if space is not None and node.params:
            old = json.loads(node.params)
            params = old if space.valid(old, facts) else self._nearest_valid(space, old)
            if params is not None:
                regenerated = space.source(params, facts, self.version)
                if self.target.check(regenerated, self.version).ok:
                    moved = {k: v for k, v in params.items() if old.get(k) != v}
                    what = f"regenerated from its knobs under {self.version}" + (f", {moved}" if moved else "")
                    return regenerated, what, params
        fixed = repair(source, self.version, self.target.check, self.target.pack().repairs)
        return (fixed.source, ", ".join(fixed.changes), None) if fixed.ok else None

    def _nearest_valid(self, space: DesignSpace, params: Params) -> Params | None:
        """The valid setting closest to `params` (fewest knobs moved, then predicted fastest)."""
        model, facts = self.model, self.knowledge.facts
        nearest = nearest_points(space, params, facts)
        return min(nearest, key=lambda p: model.predict(self.spec.name, "", p, facts) or 0.0) if nearest else None

    def _measure_repair(self, node: DesignNode, role: str, repair: tuple[str, str, Params | None], broken: str,
                        is_best: bool) -> tuple[str, float, tuple[str, ...]] | None:  # fmt: skip
        """The repair `(source, change, params)` of `node` added to the tree, screened, measured and accepted
        as its successor: (its id, cycles, runs), or None when it fails on the way."""
        source, change, params = repair
        store, kernel, version = self.store, self.spec.name, self.version
        sha = content_sha(source)
        node_id = design_id(kernel, sha)
        repaired = get_design(store, node_id)  # an interrupted run may have added it
        if repaired is None:
            model, space = self.model, self.space
            repaired = DesignNode(
                id=node_id, kernel=kernel, role="baseline" if role == "baseline" else "refiner",
                policy=REPAIR_POLICY, depth=node.depth + 1,
                rationale="; ".join(filter(None, (f"{node.id} does not compile under {version} ({broken[:300]})",
                                                  model.explain(kernel, source, params, self.knowledge.facts)))),
                change=f"repair for {version}: {change}", params=json.dumps(params, sort_keys=True) if params else "",
                predicted_cycles=model.predict(kernel, source, params, self.knowledge.facts),
                model_cycles=model.raw(kernel, source, params, self.knowledge.facts),
                owner=self.lease.owner, lease_until=self.lease.until(),
            )  # fmt: skip
            decided_from = space.consults if params is not None and space is not None else ()
            consulted = self.knowledge.fact_ids((*decided_from, *model.reads))
            add_design(store, repaired, version=KernelVersion(sha=sha, kernel=kernel, source=source, toolchain=version),
                       parent=node.id, activity=self.activity, consulted=consulted)  # fmt: skip
        if repaired.status in ("screened_out", "failed"):
            return None
        if repaired.status != "accepted" and not self._claim(repaired):
            return None
        lifecycle = self._lifecycle(node.id, is_best)
        lifecycle.advance(repaired, source, params)
        after = get_design(store, node_id)
        if after is None or after.status != "accepted":
            return None
        runs = graded_runs(store, node_id)
        return node_id, float(after.measured_cycles or 0.0), tuple(runs)

    def _claim(self, design: DesignNode) -> bool:
        """Hold a repair an interrupted run left (ours already, or its owner's lease is over)."""
        if design.owner == self.lease.owner:
            return True
        return self.lease.may_take(design.owner, design.lease_until) and claim_design(
            self.store, design.id, self.lease.owner, self.lease.until(), held_by=design.owner,
            held_until=design.lease_until,
        )  # fmt: skip

    def _lifecycle(self, predecessor: str, is_best: bool) -> DesignLifecycle:
        space, facts = self.space, self.knowledge.facts
        pack = self.target.pack()

        def candidate(design: DesignNode, source: str, params: Params | None) -> Candidate:
            features = space.features(params, facts) if space is not None and params is not None else {}
            return Candidate(design.id, self.spec.name, source, features, params)

        screens = standard_screens(self.target, self.version, pack.compiler, self.knowledge.rules, lambda c: None)
        screener = Screener(screens, [RecordScreenings(self.store, self.activity)])
        decider = AcceptRepair(self.store, self.spec.name, self.version, predecessor, is_best, self.lease)
        events = Events([lambda kernel, message: self.say(f"{kernel}: {message}")])
        return DesignLifecycle(self.store, self.spec.name, self.version, screener, self.runner, decider, candidate,
                               events, self.lease)  # fmt: skip

    def _record(self, revalidation: Revalidation, runs: tuple[str, ...] | list[str]) -> Revalidation:
        return record_revalidation(self.store, revalidation, activity=self.activity, target=self.target.name,
                                   run_ids=list(runs))  # fmt: skip
