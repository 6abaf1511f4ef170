"""A pack written for 0.7.0 on a graph learnt under 0.6.0, whose baseline does not port (an f4 x bf16
contraction opens only in 0.7.0): a generated design stands in for it as the root, and the speedups are
over that design. The upgrade to 0.7.0, where the vendor's baseline compiles as written, makes it the root
again (it had kept repairing the stand-in, and status gave 3.76x over it where 2.2x over the vendor's
program was the truth), with the stand-in's work under it and BEST left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.designs import best_of, root_of
from chiplore.kg.repo.progress import design_tree
from chiplore.session import Session
from chiplore.simulator.target import SimRNGD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
PACK = Path(__file__).resolve().parent / "packs" / "newer_baseline"
KERNEL = "newer_baseline"


def test_an_upgrade_that_compiles_the_vendors_baseline_makes_it_the_root_again(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path / "data")
    try:
        session = Session(store, SimRNGD(seed=0, kernel_paths=(PACK,)), search_predictions=16)
        session.prepare()
        session.learn(toolchain="0.6.0")
        session.optimize([KERNEL], toolchain="0.6.0", budget_s=20, patience=1)
        stand_in, best = root_of(store, KERNEL), best_of(store, KERNEL)
        assert stand_in is not None and stand_in.policy == "generated" and best is not None
        upgraded = session.upgrade("0.7.0")
        root = root_of(store, KERNEL)
        assert root is not None and root.policy == "official" and root.status == "accepted", root
        baseline = next(r for r in upgraded.kernels if r.role == "baseline")
        assert baseline.design == root.id and baseline.cycles_before == stand_in.measured_cycles
        assert baseline.cycles_after == root.measured_cycles and "in place of the stand-in" in baseline.detail
        assert store.read("MATCH (r:DesignNode {id: $r})-[:SUPERSEDES]->(s:DesignNode {id: $s}) RETURN 1 AS one",
                          {"r": root.id, "s": stand_in.id}) == [{"one": 1}]  # fmt: skip
        tree_root, children, best_id = design_tree(store, KERNEL)
        assert tree_root is not None and [c.id for c in children[root.id]] == [stand_in.id]  # its work under it
        after = best_of(store, KERNEL)
        assert after is not None and after.id == best_id and after.policy != "official"
        [status] = [k for k in session.status() if k.kernel == KERNEL]
        assert status.baseline_cycles == root.measured_cycles and status.speedup_vs_baseline is not None
        assert status.baseline_cycles < stand_in.measured_cycles  # the vendor's program: the honest speedup
        again = session.upgrade("0.7.0")  # done: nothing moves
        assert again.already_done and root_of(store, KERNEL) == root
    finally:
        store.close()
