"""The parts of the loop on many devices that need no Ray: a target's device pool (SimRNGD's and the
toy's), the slots that choose a device, and the calendar's turns and order."""

from __future__ import annotations

import threading
import time

import pytest

from chiplore.agents.callbacks import RecordRuns
from chiplore.agents.scale.calendar import Calendar, CalendarClosed, Turns
from chiplore.agents.scale.engine import NoDevices
from chiplore.agents.scale.slots import DeviceSlots
from chiplore.core.errors import TargetError
from chiplore.core.ids import content_sha
from chiplore.core.target import DeviceJob, Target
from chiplore.kg.models import Activity, KernelVersion
from chiplore.kg.repo.knowledge import record_activity
from chiplore.kg.repo.nodes import upsert
from chiplore.kg.store import GraphStore
from chiplore.simulator.device.device import DeviceConfig, SimDevice
from chiplore.simulator.device.pool import pool_configs
from chiplore.simulator.target import SimRNGD
from tests.toy import ToyChip

O_PROJ = "sliding_attention_output"


def _job(target: SimRNGD, repeats: int = 5) -> DeviceJob:
    spec = next(s for s in target.kernels() if s.name == O_PROJ)
    return DeviceJob(kernel=O_PROJ, program=spec.baseline_source, fixtures="smoke", repeats=repeats)


def test_simrngd_offers_its_devices_and_device_0_is_the_one_device_target() -> None:
    single, pool = SimRNGD(seed=4), SimRNGD(seed=4, devices=3)
    assert isinstance(pool, Target) and pool.simulated_clock() is pool
    assert [d.id for d in single.devices()] == ["rngd-sim-0"]
    assert [(d.id, d.kind) for d in pool.devices()] == [(f"rngd-sim-{i}", "rngd-sim") for i in range(3)]
    job = _job(single)
    alone = [single.result(single.submit(job)) for _ in range(3)]
    first = [pool.result(pool.submit(job, "rngd-sim-0")) for _ in range(3)]
    assert [r.runs for r in alone] == [r.runs for r in first]  # the same stream, job for job
    other = pool.result(pool.submit(job, "rngd-sim-2"))
    assert other.device_id == "rngd-sim-2" and other.job_id.startswith("rngd-sim-2/")
    assert other.runs != first[0].runs  # a noise stream of its own
    assert pool.device_clock("rngd-sim-1") == 0.0  # its clock did not move
    pool.wait_until("rngd-sim-1", 500.0)
    assert pool.device_clock("rngd-sim-1") == 500.0
    waited = pool.result(pool.submit(job, "rngd-sim-1"))
    assert pool.device_clock("rngd-sim-1") >= 500.0 + waited.device_s
    with pytest.raises(TargetError, match="no device 'rngd-sim-9'"):
        pool.submit(job, "rngd-sim-9")


def test_a_flaky_device_faults_its_share_of_jobs_and_a_healthy_one_is_untouched() -> None:
    flaky = SimDevice(2, DeviceConfig(device_id="rngd-sim-1", p_job_fault=0.05, p_transient=0.0, p_hang=0.0,
                                      tenant_load=0.0, agent_budget_s_per_day=1e9))  # fmt: skip
    healthy = SimDevice(2, DeviceConfig(device_id="rngd-sim-1", p_transient=0.0, p_hang=0.0, tenant_load=0.0,
                                        agent_budget_s_per_day=1e9))  # fmt: skip
    job = _job(SimRNGD(), repeats=3)
    results = [flaky.result(flaky.submit(job.model_copy(update={"agent": f"a{i}"}))) for i in range(400)]
    faults = [r for r in results if r.status == "fault"]
    assert 8 <= len(faults) <= 35  # 5 % of 400, within a 99.9 % binomial band
    assert all({f.code for f in r.faults} == {"NOC_TIMEOUT", "CLUSTER_RESET"} for r in faults)
    same = [healthy.result(healthy.submit(job.model_copy(update={"agent": f"a{i}"}))) for i in range(5)]
    assert all(r.status == "ok" for r in same)
    with pytest.raises(TargetError):
        pool_configs(0)


def test_the_toy_chip_offers_its_devices() -> None:
    chip = ToyChip(devices=2, flaky={"toy-1": 1.0})
    assert [d.id for d in chip.devices()] == ["toy-0", "toy-1"] and chip.simulated_clock() is chip
    program = chip.spec.baseline_source
    job = DeviceJob(kernel="gemv", program=program, fixtures="smoke", repeats=3)
    assert chip.result(chip.submit(job)).device_id == "toy-0"
    broken = chip.result(chip.submit(job, "toy-1"))
    assert broken.status == "fault" and chip.device_clock("toy-1") == broken.device_s
    alone, pool = ToyChip(seed=5), ToyChip(seed=5, devices=3)
    assert alone.result(alone.submit(job)).runs == pool.result(pool.submit(job, "toy-0")).runs  # device 0's stream
    assert pool.result(pool.submit(job, "toy-2")).runs != alone.result(alone.submit(job)).runs
    with pytest.raises(TargetError):
        chip.submit(job, "toy-7")


def test_the_slots_give_the_device_free_earliest_and_wait_when_none_is() -> None:
    slots = DeviceSlots(["d0", "d1", "d2"])
    assert slots.take() == "d0"  # all free since 0: by name
    slots.give_back("d0", 30.0)
    assert slots.take() == "d1" and slots.take() == "d2"
    assert slots.take(avoid={"d1"}) == "d0"
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(slots.take()))
    waiter.start()
    time.sleep(0.1)
    assert not got  # every device is held
    slots.give_back("d2", 50.0)
    waiter.join(timeout=5)
    assert got == ["d2"]
    slots.give_back("d1", 10.0)  # free, but where the job just faulted: it waits for another device
    retried: list[str] = []
    retry = threading.Thread(target=lambda: retried.append(slots.take(avoid={"d1"})))
    retry.start()
    time.sleep(0.1)
    assert not retried
    slots.give_back("d0", 60.0)
    retry.join(timeout=5)
    assert retried == ["d0"]
    slots.retire("d0")
    slots.retire("d2")
    assert slots.live() == 1 and slots.take(avoid={"d1"}) == "d1"  # no other device is left: the avoided one
    slots.retire("d1")
    with pytest.raises(NoDevices):
        slots.take()


def test_a_stopping_run_takes_no_device() -> None:
    slots = DeviceSlots(["d0"])
    slots.take()
    failed: list[BaseException] = []

    def take() -> None:
        try:
            slots.take()
        except NoDevices as error:
            failed.append(error)

    waiter = threading.Thread(target=take)
    waiter.start()
    slots.close()
    waiter.join(timeout=5)
    assert failed and "stopping" in str(failed[0])


def test_a_round_is_judged_in_turn_on_the_calendar() -> None:
    turns, calendar = Turns(3), Calendar()
    order: list[tuple[int, float]] = []

    def design(index: int, ends_at: float) -> None:
        calendar.join(10.0)
        calendar.advance(ends_at)  # its device job ended then
        calendar.advance(turns.wait(index))  # its decision waits for those proposed before it
        order.append((index, calendar.now()))
        turns.end(index, calendar.now() + 1.0)

    threads = [threading.Thread(target=design, args=args) for args in ((2, 15.0), (1, 40.0), (0, 20.0))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert [index for index, _ in order] == [0, 1, 2]
    assert dict(order) == {0: 20.0, 1: 40.0, 2: 41.0}  # no decision before the one before it ended
    assert turns.last() == 42.0
    assert calendar.now() == 0.0  # this thread's own place is its own


def _sent_in_order(calendar: Calendar, plan: dict[str, tuple[float, float]]) -> list[str]:
    """Threads that each work (wall seconds) from a calendar time, then send a job there; the order
    the jobs went out in."""
    sent: list[str] = []
    places = {name: calendar.hold(at) for name, (at, _) in plan.items()}

    def worker(name: str) -> None:
        calendar.adopt(places[name])
        time.sleep(plan[name][1])  # a screen: wall time, no calendar time
        calendar.await_turn()
        sent.append(name)
        calendar.advance(calendar.now() + 3.0)  # its job ran 3 s on the calendar
        calendar.leave()

    threads = [threading.Thread(target=worker, args=(name,)) for name in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    return sent


def test_an_ordered_calendar_sends_jobs_in_calendar_order_whatever_the_wall_order() -> None:
    # "slow" screens longest in wall time but its job is due first on the calendar
    plan = {"slow": (5.0, 0.4), "quick": (600.0, 0.0), "middle": (30.0, 0.1)}
    assert _sent_in_order(Calendar(ordered=True), plan) == ["slow", "middle", "quick"]
    assert _sent_in_order(Calendar(), plan) == ["quick", "middle", "slow"]  # a real device's: as they come


def test_a_thread_that_waits_for_others_holds_no_job_back_and_closing_releases_the_waiters() -> None:
    calendar = Calendar(ordered=True)
    behind, sent, failed = calendar.hold(1.0), threading.Event(), []

    def blocked_early() -> None:  # waits (for a device, its turn) from 1.0: must not hold 50.0 back
        calendar.adopt(behind)
        with calendar.blocked():
            sent.wait(timeout=5)
        calendar.leave()

    def late() -> None:
        calendar.join(50.0)
        calendar.await_turn()
        sent.set()
        calendar.leave()

    threads = [threading.Thread(target=blocked_early), threading.Thread(target=late)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert sent.is_set()

    calendar.join(0.0)  # this thread stays active at 0.0: a job at 9.0 must wait for it

    def held_back() -> None:
        calendar.join(9.0)
        try:
            calendar.await_turn()
        except CalendarClosed as error:
            failed.append(error)

    waiter = threading.Thread(target=held_back)
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive() and not failed
    calendar.close()
    waiter.join(timeout=5)
    assert failed and "stopping" in str(failed[0])


def test_every_run_says_which_device_ran_it_and_job_ids_never_repeat(graph: GraphStore) -> None:
    """Two processes (two targets, each a new device session) on one graph: their first jobs on the same
    device have different ids, and every DeviceRun links to the Device that ran it."""
    activity = record_activity(graph, Activity(id="runner-test", role="runner", policy="builtin"))
    record = RecordRuns(graph, activity)
    ids = []
    for _process in range(2):  # each a new target: a new device session
        target = SimRNGD(seed=4, devices=2)
        job = _job(target, repeats=2)
        upsert(graph, [KernelVersion(sha=content_sha(job.program), kernel=O_PROJ, source=job.program,
                                     toolchain="0.6.0")])  # fmt: skip
        for device in ("rngd-sim-0", "rngd-sim-1"):
            result = target.result(target.submit(job, device))
            record(job, content_sha(job.program), result)
            ids.append(result.job_id)
    assert len(set(ids)) == 4 and ids[0] != ids[2]  # the same device, the same count, another session
    rows = graph.read("MATCH (r:DeviceRun)-[:ON]->(d:Device) RETURN r.job_id AS job, r.device AS device, d.id AS id")
    assert sorted((row["job"], row["id"]) for row in rows) == sorted((i, i.split("/")[0]) for i in ids)
    assert all(row["device"] == row["id"] for row in rows)
