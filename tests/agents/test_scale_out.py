"""`optimize --workers N` on a local Ray (2 CPUs): a pool of devices finishes an optimize; a device
actor killed mid-job has its job run by another device; a flaky device loses and duplicates nothing;
two optimize processes on one graph share the work; kill -9 of the driver, then --resume, loses
nothing. Both stores; every test ends with the graph's invariants (chiplore.kg.repo.integrity) and checks
that no device job was recorded twice and no design measured twice."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from chiplore.agents.loop import OptimizeContext, optimize
from chiplore.agents.scale.loop import PooledExecutor
from chiplore.agents.scale.ray_engine import RayEngine, device_resource
from chiplore.agents.schedule import OptimizeConfig
from chiplore.core.errors import ConfigError
from chiplore.core.target import ChipIdentity
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.repo.integrity import violations
from chiplore.kg.repo.targets import register_target
from chiplore.kg.schema import ensure_schema
from chiplore.kg.store import GraphStore
from chiplore.session import Session, Workers
from chiplore.simulator.device.pool import KIND
from tests.agents.scale_targets import ChippedToy, SlowToyChip, chipped_toy_leaving
from tests.conftest import BACKENDS, Neo4jServer, wipe_neo4j
from tests.toy import ToyChip

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # Ray and several processes; not the fast tier

ROOT = Path(__file__).resolve().parents[2]
GEMV = "gemv"
SLOW_TOY = "tests.agents.scale_targets:slow_toy"
TERMINAL = {"screened_out", "accepted", "rejected", "failed"}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[str]:
    """One local Ray for the module, its workers able to import the test targets; its address, for
    the optimize processes that join it."""
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), previous) if p)  # the raylet's workers inherit it
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a CI machine may have no network to report to
    # a small object store: a CI container's /dev/shm is small, and the jobs' results are a few kB
    ray.init(num_cpus=2, resources={device_resource("toy"): 8, device_resource(KIND): 8}, include_dashboard=False,
             log_to_driver=False, object_store_memory=128 * 2**20)  # fmt: skip
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous


@pytest.fixture
def toy_graph(store: GraphStore) -> GraphStore:
    """A fresh store on each backend with the schema and the toy chip registered."""
    ensure_schema(store)
    chip = ToyChip()
    register_target(store, chip.name, chip.toolchains(), chip.default_toolchain())
    return store


def duplicated_jobs(store: GraphStore) -> list[dict[str, object]]:
    """Device jobs one run recorded more than once (a job id is unique on its device within a run)."""
    return store.read(
        "MATCH (r:DeviceRun)-[:CREATED_BY]->(a:Activity) WITH a.id AS activity, r.job_id AS job, count(r) AS n "
        "WHERE n > 1 RETURN activity, job, n"
    )


def accepted_against_stale_best(store: GraphStore) -> list[str]:
    """Accepted designs whose accepting comparison was not against the BEST they replaced. A design of a
    round compares itself with the round's BEST while it waits for its turn; if a design before it was
    accepted meanwhile, that verdict must not be applied: it is judged again against the new BEST."""
    rows = store.read(
        "MATCH (k:Kernel)-[:ROOT]->(root:DesignNode) "
        "MATCH (c:Comparison {decision: 'accept'})-[:CANDIDATE]->(d:DesignNode {kernel: k.name, status: 'accepted'}) "
        "MATCH (c)-[:INCUMBENT]->(i:DesignNode) "
        "WITH k, root, d, i, c ORDER BY c.decided_at "
        "WITH k.name AS kernel, root.id AS root, d.id AS design, last(collect(i.id)) AS against, "
        "max(c.decided_at) AS at "
        "RETURN kernel, root, design, against, at ORDER BY kernel, at"
    )
    wrong, previous = [], {}
    for row in rows:
        best_then = previous.get(row["kernel"], row["root"])
        if row["against"] != best_then:
            wrong.append(f"{row['design']} accepted against {row['against']}, not {best_then}")
        previous[row["kernel"]] = row["design"]
    return wrong


def misjudged(store: GraphStore) -> list[str]:
    """Designs decided more than once, or whose comparison with a replaced BEST was superseded without
    a later judgement against the new one."""
    twice = store.read(
        "MATCH (c:Comparison)-[:CANDIDATE]->(d:DesignNode) WHERE c.decision IN ['accept', 'reject'] "
        "WITH d, count(c) AS n WHERE n > 1 RETURN d.id AS id, n"
    )
    unjudged = store.read(  # (both backends: no existential subquery)
        "MATCH (s:Comparison {decision: 'superseded'})-[:CANDIDATE]->(d:DesignNode) "
        "OPTIONAL MATCH (c:Comparison)-[:CANDIDATE]->(d) WHERE c.decision <> 'superseded' "
        "WITH d, max(s.decided_at) AS superseded, max(c.decided_at) AS judged "
        "WHERE judged IS NULL OR judged < superseded RETURN d.id AS id"
    )
    return [f"{r['id']} decided {r['n']} times" for r in twice] + [f"{r['id']} never judged again" for r in unjudged]


def assert_whole(store: GraphStore) -> None:
    """The graph's invariants (one design per program, runs linked, BEST accepted, the ledger the sum of
    its runs, nothing measured twice, decided designs released), no job recorded twice, every design
    decided, every accepted design judged against the BEST it replaced, each design decided once."""
    assert violations(store) == []
    assert duplicated_jobs(store) == []
    assert accepted_against_stale_best(store) == []
    assert misjudged(store) == []
    open_designs = store.read("MATCH (d:DesignNode) WHERE NOT d.status IN $done RETURN d.id AS id, d.status AS s",
                              {"done": sorted(TERMINAL)})  # fmt: skip
    assert open_designs == []  # the toy's default budget is never spent: every run decides all it starts


# ---- in this process: the loop on an engine ---------------------------------------------------


def test_a_pool_of_devices_finishes_an_optimize_and_gives_every_device_work(toy_graph: GraphStore,
                                                                           local_ray: str) -> None:  # fmt: skip
    Session(toy_graph, ToyChip()).learn()  # on one device, at once
    chip = SlowToyChip(devices=3, job_s=0.3)
    session = Session(toy_graph, chip, target_factory=functools.partial(SlowToyChip, devices=3, job_s=0.3))
    summary = session.optimize(workers=Workers(2))
    assert summary.calendar_s is not None and summary.accepted >= 1
    assert_whole(toy_graph)
    used = {d.device: d for d in summary.devices}
    assert set(used) <= {"toy-0", "toy-1", "toy-2"} and len(used) >= 2  # a round's designs ran side by side
    runs = toy_graph.read("MATCH (r:DeviceRun)-[:CREATED_BY]->(:Activity {id: $a}) RETURN count(r) AS n",
                          {"a": summary.devices[0].activity})  # fmt: skip
    assert sum(d.jobs for d in used.values()) == runs[0]["n"]  # every job served is one recorded run
    assert all(0 < d.utilisation <= 1 for d in used.values())
    # the calendar: each BEST was decided after the baseline it beat was measured
    first, *later = [b for b in summary.progress if b.kernel == GEMV]
    assert all(b.clock_s > first.clock_s > 0 for b in later)
    assert session.devices() == summary.devices  # what `chiplore status` shows


# how a kernel's run ends when nothing goes wrong: patience spent, or (far from its bound, where the
# schedule opens new architect rounds) a small design space tried through
NORMAL_STOPS = ("no accepted change", "the design space is exhausted")


@pytest.mark.parametrize("store", ["embedded"], indirect=True)  # the subject is Ray: the pool's test covers Neo4j
def test_a_device_actor_killed_mid_job_has_its_job_run_on_another_device(toy_graph: GraphStore, local_ray: str,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    Session(toy_graph, ToyChip()).learn()
    marks = tmp_path / "marks"
    marks.mkdir()
    make = functools.partial(SlowToyChip, devices=2, job_s=1.5, marks=marks)
    chip = make()
    killed: list[str] = []
    with RayEngine(make, chip.devices(), workers=2) as engine:
        victim = ray.get(engine.actor("toy-1").ping.remote())  # type: ignore[attr-defined]

        def kill_mid_job() -> None:  # the first job toy-1 starts: its process dies under it
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                started = sorted(marks.glob("toy-1.*"))
                if started:
                    killed.append(started[0].name)
                    os.kill(victim, signal.SIGKILL)
                time.sleep(0.05)

        killer = threading.Thread(target=kill_mid_job)
        killer.start()
        summary = optimize(OptimizeContext(toy_graph, chip, chip.default_toolchain()), executor=PooledExecutor(engine))
        killer.join()
        restarted = ray.get(engine.actor("toy-1").ping.remote())  # type: ignore[attr-defined]
    assert killed, "toy-1 never ran a job"
    assert_whole(toy_graph)
    assert summary.accepted >= 1 and summary.stopped[GEMV].startswith(NORMAL_STOPS)
    # the job that died with its runner ran again on the other device; Ray brought the runner back
    _, sha, died_at = killed[0].split(".")
    assert [m for m in marks.glob(f"toy-0.{sha}.*") if int(m.name.split(".")[2]) > int(died_at)]
    assert restarted != victim


def test_devices_of_another_chip_than_the_drivers_are_refused_before_any_job(local_ray: str) -> None:
    """A cluster node set up for another board builds its device actors' target as another chip: the
    engine asks each actor which chip it is and refuses the lot in one line naming the odd devices."""
    make = functools.partial(ChippedToy, "toy B", devices=2, job_s=0.1)
    with pytest.raises(ConfigError) as refused:
        RayEngine(make, make().devices(), workers=2, chip=ChipIdentity(id="toy A"))
    message = str(refused.value)
    assert "toy A" in message and "toy-0 on " in message and "toy-1 on " in message and "is toy B" in message
    with RayEngine(make, make().devices(), workers=2, chip=ChipIdentity(id="toy B")) as engine:
        assert len(engine.devices()) == 2  # the same chip: no refusal


@pytest.mark.parametrize("store", ["embedded"], indirect=True)
def test_a_pooled_optimize_of_a_graph_learnt_on_another_chip_is_refused_before_any_actor_starts(
    toy_graph: GraphStore, local_ray: str, tmp_path: Path
) -> None:
    """The graph's chip is asked before Ray's device actors are built (each builds its target with the
    factory, which leaves a mark); the refusal is recorded on the run's activity, as without workers."""
    Session(toy_graph, ChippedToy("toy A", job_s=0.0)).learn()
    mark = tmp_path / "an actor was built"
    session = Session(toy_graph, ChippedToy("toy B", job_s=0.0),
                      target_factory=functools.partial(chipped_toy_leaving, mark, "toy B"))  # fmt: skip
    with pytest.raises(ConfigError, match="this graph learnt chip toy A"):
        session.optimize(workers=Workers(2))
    assert not mark.exists()
    outcomes = [r["outcome"] for r in toy_graph.read("MATCH (a:Activity) WHERE a.id STARTS WITH 'optimize-' "
                                                     "RETURN a.outcome AS outcome")]  # fmt: skip
    assert len(outcomes) == 1 and outcomes[0].startswith("stopped: this graph learnt chip toy A")


def test_a_device_that_faults_loses_and_duplicates_nothing(toy_graph: GraphStore, local_ray: str) -> None:
    """One device of three faults every job it gets (the toy's run is short: a device faulting 5 % of its
    jobs would seldom fault in it; tests/agents/test_device_pool.py checks SimRNGD's 5 %): each faulted
    job is run again on another device, and the loop goes on."""
    Session(toy_graph, ToyChip()).learn()
    make = functools.partial(SlowToyChip, devices=3, job_s=0.2, flaky={"toy-1": 1.0})
    chip = make()
    with RayEngine(make, chip.devices(), workers=2) as engine:
        summary = optimize(
            OptimizeContext(toy_graph, chip, chip.default_toolchain()),
            OptimizeConfig(patience=12),
            executor=PooledExecutor(engine),
        )
    assert_whole(toy_graph)
    assert summary.accepted >= 1 and summary.stopped[GEMV].startswith(NORMAL_STOPS)
    flaky = next(d for d in summary.devices if d.device == "toy-1")
    assert flaky.failed_jobs >= 1 and all(d.failed_jobs == 0 for d in summary.devices if d.device != "toy-1")
    # each faulted job was run again, on another device: no design failed or was quarantined for it
    faulted = toy_graph.read("MATCH (r:DeviceRun {status: 'fault'})-[:RAN]->(v:KernelVersion) RETURN v.sha AS sha")
    assert len(faulted) == flaky.failed_jobs
    failed = toy_graph.read("MATCH (d:DesignNode {status: 'failed'}) RETURN d.reason AS reason")
    assert failed == [], failed


# ---- optimize processes: the command line on a Ray cluster -------------------------------------


def _env(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> dict[str, str]:
    base = {**os.environ, "PYTHONPATH": str(ROOT), "CHIPLORE_TARGET": SLOW_TOY, "CHIPLORE_DEVICES": "2"}
    if backend == "neo4j":
        server: Neo4jServer = request.getfixturevalue("neo4j_server")
        with server.store() as store:
            wipe_neo4j(store)
        return {**base, **server.env()}
    return {**base, "CHIPLORE_STORE": "embedded", "CHIPLORE_DATA_DIR": str(tmp_path / "data")}


def _cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "chiplore.cli", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip


def _open(env: dict[str, str]) -> GraphStore:
    if env["CHIPLORE_STORE"] == "neo4j":
        return Neo4jServer(env["CHIPLORE_NEO4J_URI"], env["CHIPLORE_NEO4J_PASSWORD"]).store()
    return EmbeddedStore(Path(env["CHIPLORE_DATA_DIR"]))


def _learnt(env: dict[str, str]) -> None:
    """Learn the toy chip on its plain, fast device (the slow one is the same chip), in this process:
    what `chiplore init` and `chiplore learn` do, without two more processes to start."""
    with _open(env) as store:
        session = Session(store, ToyChip())
        session.prepare()
        session.learn()


def _wait_for(process: subprocess.Popen[str], words: str, timeout_s: float = 180) -> list[str]:
    """Read the process's progress lines until one contains `words`; the lines read."""
    assert process.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        if words in line:
            return lines
    raise AssertionError(f"no {words!r} in {''.join(lines)[-2000:]}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_optimize_processes_on_one_graph_share_the_work(request: pytest.FixtureRequest, backend: str,
                                                            local_ray: str, tmp_path: Path) -> None:  # fmt: skip
    env = _env(request, backend, tmp_path)
    _learnt(env)
    first = _cli(env, "optimize", "--workers", "2", "--ray-address", local_ray, "--seed", "1", "-v")  # every note
    _wait_for(first, "baseline")  # the second joins once the tree has its root
    second = _cli(env, "optimize", "--workers", "2", "--ray-address", local_ray, "--seed", "2")
    for process in (first, second):
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
    with _open(env) as store:
        assert_whole(store)
        created = store.read("MATCH (d:DesignNode)-[:CREATED_BY]->(a:Activity {role: 'runner'}) "
                             "RETURN a.id AS run, count(d) AS designs")  # fmt: skip
        assert len(created) == 2 and all(row["designs"] >= 1 for row in created), created  # both did work


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_of_the_driver_then_resume_loses_nothing(request: pytest.FixtureRequest, backend: str,
                                                        local_ray: str, tmp_path: Path) -> None:  # fmt: skip
    env = _env(request, backend, tmp_path)
    _learnt(env)
    killed = _cli(env, "optimize", "--workers", "2", "--ray-address", local_ray, "-v")
    _wait_for(killed, "accepted")  # mid-run: a round's other designs are on the devices or waiting their turn
    os.killpg(killed.pid, signal.SIGKILL)  # no cleanup runs anywhere
    killed.wait(timeout=30)
    with _open(env) as store:
        accepted = {row["id"] for row in store.read("MATCH (d:DesignNode {status: 'accepted'}) RETURN d.id AS id")}
    resumed = _cli(env, "optimize", "--workers", "2", "--ray-address", local_ray, "--resume", "--json")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-3000:]
    assert json.loads(out)["kernels"][0]["kernel"] == GEMV
    with _open(env) as store:
        assert_whole(store)
        after = {row["id"] for row in store.read("MATCH (d:DesignNode {status: 'accepted'}) RETURN d.id AS id")}
    assert accepted and accepted <= after  # nothing decided before the kill was lost; what it left open is decided
