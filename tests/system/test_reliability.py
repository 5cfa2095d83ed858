"""Reliability (issue 5) on real migrated metadata databases, SQLite and PostgreSQL.

Task instances are written the way Airflow writes them (``metadata_seed``), beside non-GPU
work, and every fault is injected into a real database: a statement that fails part-way
through an apply, a PostgreSQL backend killed mid-transaction, a crashed solver, a planner
that never plans, two planning runs at once. Each test prints what it injected and tried,
and how many jobs were lost (always 0).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from metadata_seed import Seeder
from sqlalchemy import create_engine, event, select, text
from sqlalchemy.exc import OperationalError

import airflow_gpu_scheduler.operators.fail_open as watchdog
from airflow_gpu_scheduler.core.levers import INTAKE_POOL
from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.hooks.metadata import (
    FAIL_OPEN_METHOD,
    GpuSchedulerMetadataError,
    GpuSchedulerMetadataHook,
    is_gpu_pool,
)
from airflow_gpu_scheduler.models import plan_job_table, plan_table
from airflow_gpu_scheduler.operators.fail_open import release_if_planner_down
from airflow_gpu_scheduler.operators.schedule import FIRST_LOCK_WAIT_S, locked_cycle, schedule_cycle

CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}, "a100": {"count": 2, "speed": 0.5}}})
PLANNER = RolloutPlanner(PlannerConfig(step_s=60.0, time_limit_s=2.0, mip_rel_gap=0.0))
RUNS = 4
log = logging.getLogger("gpu_scheduler.test")

#: Every invalid kind of declaration, with the field the error must name.
BAD_DECLARATIONS = {
    "zero_gpus": ({"kind": "training", "gpus": 0}, "gpus"),
    "negative_gpus": ({"kind": "training", "gpus": -2}, "gpus"),
    "too_many_gpus": ({"kind": "training", "gpus": 64}, "gpus"),
    "too_many_for_type": ({"kind": "training", "gpus": 3, "gpu_types": ["a100"]}, "gpus"),
    "unknown_type": ({"kind": "training", "gpus": 1, "gpu_types": ["h200"]}, "gpu_types"),
    "unknown_kind": ({"kind": "trainin", "gpus": 1}, "kind"),
    "missing_kind": ({"gpus": 1}, "kind"),
    "estimate_text": ({"kind": "quantization", "gpus": 1, "estimate_s": "20m"}, "estimate_s"),
    "estimate_negative": ({"kind": "quantization", "gpus": 1, "estimate_s": -5}, "estimate_s"),
    "deadline_text": ({"kind": "quantization", "gpus": 1, "deadline_s": "tomorrow"}, "deadline_s"),
    "deadline_zero": ({"kind": "quantization", "gpus": 1, "deadline_s": 0}, "deadline_s"),
    "gpus_text": ({"kind": "training", "gpus": "2"}, "gpus"),
    "gpus_bool": ({"kind": "training", "gpus": True}, "gpus"),
    "types_not_list": ({"kind": "training", "gpus": 1, "gpu_types": "h100"}, "gpu_types"),
    "priority_text": ({"kind": "training", "gpus": 1, "priority": "high"}, "priority"),
    "unknown_field": ({"kind": "training", "gpus": 1, "gpu": 2}, "gpu"),
    "not_an_object": (["training", 1], "gpu_scheduler"),
}


@pytest.fixture
def seed(metadata_url):
    seeder = Seeder(metadata_url)
    yield seeder
    seeder.clear()


def seed_workload(seed: Seeder, waited_s: float = 600.0, bad: bool = True) -> None:
    """GPU DAG (with a CPU task downstream), optionally a DAG of bad declarations, and CPU-only DAGs."""
    seed.dag(
        "gpu_jobs",
        {
            "train": {
                "declaration": {"kind": "training", "gpus": 2, "estimate_s": 600, "priority": 3},
                "downstream": ["report"],
            },
            "quant": {
                "declaration": {"kind": "quantization", "gpus": 1, "estimate_s": 300},
                "weight_rule": "absolute",
                "priority_weight": 7,
            },
            "report": {"priority_weight": 4},
        },
    )
    seed.dag("cpu_etl", {"extract": {"priority_weight": 9}, "load": {}})
    seed.set_pool("cpu_pool", 2)
    seed.set_pool("gpu", 3)  # named like GPU work but not a gpu_* pool: never ours to touch
    rows = []
    for r in range(RUNS):
        seed.run("gpu_jobs", f"r{r}")
        seed.run("cpu_etl", f"r{r}")
        rows += [
            {"dag_id": "gpu_jobs", "run_id": f"r{r}", "task_id": "train", "pool_slots": 2, "waited_s": waited_s + r},
            {"dag_id": "gpu_jobs", "run_id": f"r{r}", "task_id": "quant", "waited_s": waited_s + r},
            {"dag_id": "gpu_jobs", "run_id": f"r{r}", "task_id": "report", "pool": "default_pool", "state": None},
            {"dag_id": "cpu_etl", "run_id": f"r{r}", "task_id": "extract", "pool": "cpu_pool", "priority_weight": 9},
            {"dag_id": "cpu_etl", "run_id": f"r{r}", "task_id": "load", "pool": "gpu", "state": "running"},
        ]
    if bad:
        seed.dag("gpu_bad", {name: {"declaration": decl} for name, (decl, _) in BAD_DECLARATIONS.items()})
        seed.run("gpu_bad", "r0")
        rows += [
            {"dag_id": "gpu_bad", "run_id": "r0", "task_id": name, "waited_s": waited_s, "pool_slots": _slots(decl)}
            for name, (decl, _) in BAD_DECLARATIONS.items()
        ]
    seed.task_instances(rows)


def _slots(declaration) -> int:
    """What gpu_task() would have set as pool_slots (1 where the declaration has no usable count)."""
    gpus = declaration.get("gpus") if isinstance(declaration, dict) else None
    return gpus if type(gpus) is int and gpus > 0 else 1


def gpu_jobs(state) -> dict:
    return {k: v for k, v in state.items() if k[0] == "gpu_jobs" and k[2] != "report"}


def assert_only_gpu_rows_changed(before, after) -> int:
    """Scope of writes: a task instance changed only if it was or is in a GPU pool; pools only gpu_*."""
    (tis0, pools0), (tis1, pools1) = before, after
    assert set(tis0) == set(tis1), "no task instance may appear or disappear"
    changed = [k for k in tis0 if tis0[k] != tis1[k]]
    for key in changed:
        assert is_gpu_pool(tis0[key][0]) and is_gpu_pool(tis1[key][0]), (key, tis0[key], tis1[key])
        assert tis0[key][1] == tis1[key][1] and tis0[key][3] == tis1[key][3], "only pool and weight may change"
    for pool in set(pools0) | set(pools1):
        if pools0.get(pool) != pools1.get(pool):
            assert is_gpu_pool(pool), pool
    return len(changed)


def plan_rows(hook) -> list[dict]:
    with hook.get_engine().connect() as conn:
        return [dict(r) for r in conn.execute(select(plan_table).order_by(plan_table.c.id)).mappings()]


class Metrics:
    def __init__(self):
        self.calls: list[tuple] = []

    def incr(self, name, count=1, *a, **k):
        self.calls.append(("incr", name, count))

    def gauge(self, name, value, *a, **k):
        self.calls.append(("gauge", name, value))


# --------------------------------------------------------------------------- 1. planner down: fail-open


def test_planner_down_fails_open_to_airflows_order_and_the_next_plan_takes_over(hook, seed, monkeypatch, caplog):
    metrics = Metrics()
    monkeypatch.setattr(watchdog, "_stats", lambda: metrics)
    seed_workload(seed)
    before = seed.state()
    caplog.set_level(logging.INFO, logger=log.name)

    summary = release_if_planner_down(hook, 300.0, lambda: CLUSTER, ("gpu_scheduler_watchdog", "w1"), log=log)

    assert summary["action"] == "released" and summary["released"] == 2 * RUNS
    after = seed.state()
    tis, pools = after
    assert_only_gpu_rows_changed(before, after)
    # Airflow's own weights: train = 1 + report (4) downstream; quant is absolute 7.
    for key, (pool, _, weight, state) in gpu_jobs(tis).items():
        assert pool == "gpu_h100" and state == "scheduled"
        assert weight == (5 if key[2] == "train" else 7), (key, weight)
    # Bad declarations stay held (not run, not dropped), each with its reason.
    assert {k[2] for k, v in tis.items() if k[0] == "gpu_bad" and v[0] == INTAKE_POOL} == set(BAD_DECLARATIONS)
    assert set(summary["kept"]) == {f"gpu_bad/r0/{name}/-1" for name in BAD_DECLARATIONS}
    assert pools["gpu_h100"] == 4 and pools["gpu_a100"] == 2 and pools[INTAKE_POOL] == 0
    # Observable: a log line, a metric, and a plan row the UI shows as a banner.
    assert any("FAIL-OPEN" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert ("incr", "gpu_scheduler.fail_open", 1) in metrics.calls
    assert ("incr", "gpu_scheduler.fail_open.released", 2 * RUNS) in metrics.calls
    (banner,) = plan_rows(hook)
    assert banner["method"] == FAIL_OPEN_METHOD and banner["status"] == "planner_down" and "300 s" in banner["message"]

    # Still down: the next watchdog run writes nothing new ...
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER, log=log)["released"] == 0
    assert seed.state() == after and len(plan_rows(hook)) == 1
    # ... but work arriving meanwhile is released at once, not after another 300 s.
    seed.run("gpu_jobs", "late")
    seed.task_instances([{"dag_id": "gpu_jobs", "run_id": "late", "task_id": "quant", "waited_s": 1}])
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER, log=log)["released"] == 1
    assert seed.state()[0][("gpu_jobs", "late", "quant", -1)][0] == "gpu_h100"

    # The planner is back: it collects the released work from the gpu_* pools and takes over.
    result = schedule_cycle(hook, PLANNER, CLUSTER, log=log)
    assert result["waiting"] == 2 * RUNS + 1 + len(BAD_DECLARATIONS)
    assert set(result["rejected"]) == set(summary["kept"])
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER, log=log)["action"] == "alive"
    assert plan_rows(hook)[-1]["method"] in ("milp", "greedy")
    tis, _ = seed.state()
    held = [k for k, v in gpu_jobs(tis).items() if v[0] == INTAKE_POOL]
    assert held, "the plan holds work again (4+2 GPUs cannot start 9 jobs needing 13)"
    print(
        f"fail-open: faults injected 1 (planner down), survived 1; released {summary['released']} + 1; "
        f"bad declarations kept held {len(summary['kept'])}; jobs lost 0"
    )


def test_watchdog_stays_quiet_while_the_planner_is_alive_or_idle(hook, seed, monkeypatch):
    monkeypatch.setattr(watchdog, "_stats", lambda: Metrics())
    # Idle planner (no plan for ages) and work that arrived seconds ago: the planner gets its chance.
    seed_workload(seed, waited_s=5.0, bad=False)
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER)["action"] == "alive"
    # A planner that plans: old work is its business, however long it holds it.
    schedule_cycle(hook, PLANNER, CLUSTER)
    now = time.time() + 3600
    state = hook.collect_fail_open_state(now_s=now - 3500)
    assert state.last_plan_s is not None
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER, now_s=now - 3500)["action"] == "alive"
    # An hour without a plan while work waits: down.
    assert release_if_planner_down(hook, 300.0, lambda: CLUSTER, now_s=now)["action"] == "released"


# --------------------------------------------------------------------------- 3. atomic, idempotent apply


class FaultAt:
    """Fails the n-th write statement on the hook's engine: a raised error, or (PostgreSQL) a killed backend."""

    def __init__(self, engine, n: int, admin_url: str | None):
        self.engine, self.n, self.writes, self.fired = engine, n, 0, False
        self.admin = create_engine(admin_url, isolation_level="AUTOCOMMIT") if admin_url else None
        event.listen(engine, "before_cursor_execute", self)

    def __call__(self, conn, cursor, statement, parameters, context, executemany):
        if not statement.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE")):
            return
        self.writes += 1
        if self.writes != self.n:
            return
        self.fired = True
        if self.admin is not None and self.n % 2:
            pid = conn.connection.dbapi_connection.get_backend_pid()
            with self.admin.connect() as admin:
                admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            return  # the statement now runs on a dead connection: a real server-side failure
        raise OperationalError(statement, parameters, Exception("injected: connection lost mid-apply"))

    def remove(self):
        event.remove(self.engine, "before_cursor_execute", self)
        if self.admin is not None:
            self.admin.dispose()


def test_a_fault_at_any_write_leaves_every_task_instance_as_before_then_the_next_run_applies(hook, seed, metadata_url):
    seed_workload(seed)
    engine = hook.get_engine()
    admin_url = metadata_url if engine.dialect.name == "postgresql" else None
    before = seed.state()
    now = time.time()
    faults = 0
    for n in range(1, 200):
        fault = FaultAt(engine, n, admin_url)
        try:
            try:
                summary = schedule_cycle(hook, PLANNER, CLUSTER, now_s=now)
            except GpuSchedulerMetadataError as error:
                assert "rolled back, nothing was changed" in str(error)
            else:
                # A failed task-instance note is rolled back alone: the plan is applied without it.
                assert not fault.fired or summary["notes"]["error"], summary["notes"]
                break
        finally:
            fault.remove()
        faults += 1
        assert seed.state() == before, f"write {n} failed and left a half-applied plan"
        assert plan_rows(hook) == []
    assert faults >= 5, "the apply should have several writes to break"
    applied = seed.state()
    changed = assert_only_gpu_rows_changed(before, applied)
    (plan,) = plan_rows(hook)
    due = [k for k, v in gpu_jobs(applied[0]).items() if v[0] != INTAKE_POOL]
    assert plan["due"] == len(due) > 0 and changed >= len(due)

    # The same plan again: nothing is written to any task instance, and the state is identical.
    again = schedule_cycle(hook, PLANNER, CLUSTER, now_s=now)
    assert again["moved"] == 0 and seed.state() == applied
    lost = [k for k in gpu_jobs(before[0]) if k not in applied[0]]
    print(
        f"atomic apply ({engine.dialect.name}): faults injected {faults}, survived {faults}, "
        f"task instances changed by a failed apply 0, jobs lost {len(lost)}; re-apply wrote 0 task instances"
    )
    assert not lost


# --------------------------------------------------------------------------- 4. overlapping runs


def _run_operator(conn_id: str, cluster_file: Path, out: Path, marker: Path | None = None, hold_s: float = 0.0):
    code = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from airflow_gpu_scheduler.core import planner\n"
        f"marker, hold = {str(marker)!r} if {marker is not None!r} else None, {hold_s!r}\n"
        "if marker:\n"
        "    plan = planner.MilpPlanner.plans\n"
        "    def slow(self, *a, **k):\n"
        "        Path(marker).write_text('planning')\n"
        "        time.sleep(hold)\n"
        "        return plan(self, *a, **k)\n"
        "    planner.MilpPlanner.plans = slow\n"
        "from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator\n"
        f"op = GpuScheduleOperator(task_id='plan', gpu_scheduler_conn_id={conn_id!r}, "
        f"cluster_file={str(cluster_file)!r})\n"
        f"Path({str(out)!r}).write_text(json.dumps(op.execute({{}}), default=str))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_two_planning_runs_at_once_never_interleave_and_the_loser_exits_cleanly(hook, seed, tmp_path):
    seed_workload(seed, bad=False)
    cluster_file = tmp_path / "cluster.json"
    cluster_file.write_text(json.dumps(CLUSTER.to_dict()))
    marker = tmp_path / "planning"
    # The winner plans for longer than the loser keeps trying for the lock (FIRST_LOCK_WAIT_S).
    first = _run_operator(hook.gpu_scheduler_conn_id, cluster_file, tmp_path / "a.json", marker, hold_s=20.0)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert first.poll() is None, first.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "first run never started planning"
        time.sleep(0.2)
    second = _run_operator(hook.gpu_scheduler_conn_id, cluster_file, tmp_path / "b.json")
    out_b = second.communicate(timeout=180)[0]
    assert second.returncode == 0, out_b[-3000:]
    assert first.poll() is None, "the loser must not wait for the winner"
    out_a = first.communicate(timeout=180)[0]
    assert first.returncode == 0, out_a[-3000:]
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert b["locked_out"] is True and b["cycles"] == 0 and "holds the planner lock" in out_b
    assert a["plan_id"] is not None and a["cycles"] == 1
    assert [p["id"] for p in plan_rows(hook)] == [a["plan_id"]], "only the lock holder may write a plan"

    # Two runs started together: each either plans whole cycles or steps aside; neither fails.
    runs = [_run_operator(hook.gpu_scheduler_conn_id, cluster_file, tmp_path / f"c{i}.json") for i in range(2)]
    for run in runs:
        assert run.wait(timeout=180) == 0, run.communicate()[0][-3000:]
    results = [json.loads((tmp_path / f"c{i}.json").read_text()) for i in range(2)]
    # A run whose decisions equal the stored plan's confirms that plan instead of storing a copy.
    assert len(plan_rows(hook)) == 1 + sum(1 for r in results if r.get("stored"))
    assert all(r.get("locked_out") or r["plan_id"] in {p["id"] for p in plan_rows(hook)} for r in results)
    print(
        f"overlap: concurrent runs 4, locked out {1 + sum(bool(r.get('locked_out')) for r in results)}, "
        "failed 0, interleaved writes 0"
    )


def test_a_first_cycle_waits_out_a_short_hold_of_the_lock_such_as_a_watchdog_check(hook, seed):
    seed_workload(seed, bad=False)
    holder = GpuSchedulerMetadataHook(hook.gpu_scheduler_conn_id)
    held, release = threading.Event(), threading.Event()

    def watchdog_check():
        with holder.planning_lock() as mine:
            assert mine
            held.set()
            release.wait(30)

    thread = threading.Thread(target=watchdog_check)
    thread.start()
    try:
        assert held.wait(30)
        # Not waiting (a later cycle of a run): the cycle is skipped, nothing is written.
        assert locked_cycle(hook, PLANNER, CLUSTER, (None, None), log, wait_s=0.0) is None
        assert plan_rows(hook) == []
        threading.Timer(1.5, release.set).start()
        summary = locked_cycle(hook, PLANNER, CLUSTER, (None, None), log, wait_s=FIRST_LOCK_WAIT_S)
    finally:
        release.set()
        thread.join(30)
        holder.close()
    assert summary is not None and summary["plan_id"] == plan_rows(hook)[-1]["id"]


# --------------------------------------------------------------------------- 5 + 6. bad declarations, scope


def test_bad_declarations_are_reported_with_task_field_reason_and_stay_held_while_the_rest_is_planned(
    hook, seed, caplog
):
    seed_workload(seed)
    before = seed.state()
    caplog.set_level(logging.INFO, logger=log.name)
    summary = schedule_cycle(hook, PLANNER, CLUSTER, log=log)
    after = seed.state()
    assert_only_gpu_rows_changed(before, after)

    fields = summary["rejected_fields"]
    assert set(fields) == {f"gpu_bad/r0/{name}/-1" for name in BAD_DECLARATIONS}
    for name, (_, field) in BAD_DECLARATIONS.items():
        detail = fields[f"gpu_bad/r0/{name}/-1"]
        assert detail["task"] == f"gpu_bad.{name}" and detail["field"] == field and detail["reason"], (name, detail)
        assert after[0][("gpu_bad", "r0", name, -1)][0] == INTAKE_POOL, f"{name} must stay held"
        assert any(
            f"gpu_bad.{name}" in r.getMessage() and repr(field) in r.getMessage() and r.levelno == logging.ERROR
            for r in caplog.records
        ), f"no task-log line for {name}"
    with hook.get_engine().connect() as conn:
        stored = {
            r.job_id: r.reason
            for r in conn.execute(select(plan_job_table).where(plan_job_table.c.decision == "rejected"))
        }
    assert set(stored) == set(fields) and all(f"field '{fields[j]['field']}'" in stored[j] for j in stored)
    # Everything else was planned: every valid job has a decision, some are due now.
    assert len(summary["released"]) > 0 and summary["waiting"] == 2 * RUNS + len(BAD_DECLARATIONS)
    print(
        f"bad declarations tried {len(BAD_DECLARATIONS)}, reported {len(fields)}, held {len(fields)}, run 0, dropped 0"
    )


def test_a_task_instance_dispatched_between_collect_and_apply_is_skipped_and_left_alone(hook, seed):
    seed_workload(seed, bad=False)
    snapshot = hook.collect_gpu_work()
    from airflow_gpu_scheduler.core.levers import levers_for_plan
    from airflow_gpu_scheduler.gpu_work import build_workload

    work = build_workload(snapshot, CLUSTER)
    plan = PLANNER.plan(CLUSTER, work.queued, work.running, snapshot.now_s, work.reserve)
    levers = levers_for_plan(plan, CLUSTER, work.queued, work.running, snapshot.now_s)
    gone = "gpu_jobs/r0/train/-1"
    with seed.engine.begin() as conn:  # the scheduler queues it meanwhile
        conn.execute(
            text(
                "UPDATE task_instance SET state = 'queued' WHERE dag_id = 'gpu_jobs' AND run_id = 'r0' "
                "AND task_id = 'train'"
            )
        )
    before = seed.state()[0][("gpu_jobs", "r0", "train", -1)]
    result = hook.apply_levers(levers, snapshot.waiting)
    assert result.skipped == (gone,) and gone not in result.moved
    assert len(result.moved) == len(levers.assignments) - 1 - sum(
        1
        for j, a in levers.assignments.items()
        if j != gone
        and (a.pool, a.weight) == next((t.pool, t.priority_weight) for t in snapshot.waiting if t.key.job_id == j)
    )
    assert seed.state()[0][("gpu_jobs", "r0", "train", -1)] == before
