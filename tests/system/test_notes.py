"""Task-instance notes: the plan in Airflow's own views, written by real planning cycles into a migrated
metadata database (SQLite and PostgreSQL), and never over a person's note."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from metadata_seed import Seeder
from sqlalchemy import delete, select, text, update

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.waiting import clock
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.hooks.metadata import TaskInstanceKey
from airflow_gpu_scheduler.hooks.notes import MARKER, NOTE_LIMIT, PLANNER_USER, gpu_task_notes
from airflow_gpu_scheduler.operators.schedule import schedule_cycle
from airflow_gpu_scheduler.plan_notes import duration, gpu_count, private, waiting_note

PLANNER = RolloutPlanner(PlannerConfig(step_s=60.0, time_limit_s=1.0))
CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})


@pytest.fixture
def seed(metadata_url, hook):
    seeder = Seeder(metadata_url)
    seeder.dag(
        "team_a",
        {
            "train": {"declaration": {"kind": "training", "gpus": 4, "estimate_s": 3600, "priority": 9}},
            "quantize": {"declaration": {"kind": "quantization", "gpus": 1, "estimate_s": 600}},
        },
    )
    seeder.dag("team_b", {"score": {"declaration": {"kind": "batch_inference", "gpus": 2, "estimate_s": 1800}}})
    yield seeder
    with seeder.engine.begin() as conn:
        conn.execute(text("DELETE FROM task_instance_note"))  # SQLite does not enforce the cascade
    seeder.clear()


def key(dag_id: str, run_id: str, task_id: str) -> TaskInstanceKey:
    return TaskInstanceKey(dag_id, run_id, task_id, -1)


def notes(hook) -> dict[TaskInstanceKey, tuple[str | None, str | None]]:
    with hook.get_engine().connect() as conn:
        return gpu_task_notes(conn)


def plan_rows(hook) -> dict[str, dict]:
    newest = hook.latest_plan()
    return {row["job_id"]: row for row in newest["jobs"]}


def set_running(seed: Seeder, k: TaskInstanceKey, pool: str, started_ago_s: float, waited_s: float) -> None:
    ti = seed.t["task_instance"]
    now = datetime.now(timezone.utc)
    with seed.engine.begin() as conn:
        conn.execute(
            update(ti)
            .where(ti.c.dag_id == k.dag_id, ti.c.run_id == k.run_id, ti.c.task_id == k.task_id)
            .values(
                state="running",
                pool=pool,
                start_date=seed._time(now - timedelta(seconds=started_ago_s)),
                scheduled_dttm=seed._time(now - timedelta(seconds=started_ago_s + waited_s)),
            )
        )


def test_held_task_instances_carry_their_plan_and_a_persons_note_is_never_overwritten(hook, seed):
    seed.run("team_a", "r1")
    seed.run("team_b", "r1")
    seed.task_instances(
        [
            {"dag_id": "team_a", "run_id": "r1", "task_id": "train", "pool_slots": 4, "waited_s": 60},
            {"dag_id": "team_a", "run_id": "r1", "task_id": "quantize", "waited_s": 30},
            {"dag_id": "team_b", "run_id": "r1", "task_id": "score", "pool_slots": 2, "waited_s": 20},
        ]
    )
    # A person's note on the batch job is there before the planner's first cycle.
    ti = seed.t["task_instance"]
    with seed.engine.begin() as conn:
        ti_id = conn.execute(select(ti.c.id).where(ti.c.dag_id == "team_b")).scalar()
        conn.execute(
            text(
                "INSERT INTO task_instance_note (ti_id, user_id, content, created_at, updated_at) "
                "VALUES (:id, 'alice', 'rerun after the data fix', :now, :now)"
            ),
            {"id": ti_id, "now": seed._time(datetime.now(timezone.utc))},
        )

    now = datetime.now(timezone.utc).timestamp()
    first = schedule_cycle(hook, PLANNER, CLUSTER, now_s=now)
    assert first["notes"]["inserted"] == 2 and first["notes"]["kept"] == 1 and first["notes"]["error"] is None
    rows, stored = plan_rows(hook), notes(hook)
    assert stored[key("team_b", "r1", "score")] == ("alice", "rerun after the data fix")
    for job_id, row in rows.items():
        k = key(*job_id.split("/")[:3])
        if k.dag_id == "team_b":
            continue  # alice's
        if row["decision"] == "held":
            user, content = stored[k]
            assert user == PLANNER_USER and content.startswith(MARKER)
            assert f"planned start {clock(row['planned_start_s'])} on h100 ({gpu_count(row['gpus'])})" in content
            assert content.endswith(f"; waiting because {row['reason']}."), (content, row["reason"])
        elif row["decision"] == "released":
            assert f"released to h100 ({gpu_count(row['gpus'])})" in stored[k][1]
    assert any(row["decision"] == "held" and row["dag_id"] == "team_a" for row in rows.values()), rows

    # The same plan again (same moment, same queue): nothing to write.
    again = schedule_cycle(hook, PLANNER, CLUSTER, now_s=now)
    assert again["notes"]["inserted"] == again["notes"]["updated"] == 0
    assert again["notes"]["unchanged"] == 2 and again["notes"]["kept"] == 1

    # A person takes over the planner's note (the UI sets its user): it is theirs from now on.
    held = next(k for k, (user, _) in notes(hook).items() if user == PLANNER_USER and k.task_id != "score")
    with seed.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE task_instance_note SET user_id = 'bob', content = 'waiting on purpose' "
                "WHERE ti_id = (SELECT id FROM task_instance WHERE dag_id = :d AND task_id = :t)"
            ),
            {"d": held.dag_id, "t": held.task_id},
        )
    schedule_cycle(hook, PLANNER, Cluster.from_dict({"gpu_types": {"h100": {"count": 8}}}))
    assert notes(hook)[held] == ("bob", "waiting on purpose")


def test_a_changed_plan_updates_the_note_and_a_started_task_says_when_it_started(hook, seed):
    seed.run("team_a", "r2")
    seed.task_instances(
        [
            {"dag_id": "team_a", "run_id": "r2", "task_id": "train", "pool_slots": 4, "waited_s": 60},
            {"dag_id": "team_a", "run_id": "r2", "task_id": "quantize", "waited_s": 30},
        ]
    )
    small = Cluster.from_dict({"gpu_types": {"h100": {"count": 4}}})
    schedule_cycle(hook, PLANNER, small)
    before = notes(hook)
    # More GPUs: the plan changes, and with it every planner note that described the old one.
    bigger = schedule_cycle(hook, PLANNER, Cluster.from_dict({"gpu_types": {"h100": {"count": 8}}}))
    after = notes(hook)
    assert bigger["notes"]["updated"] >= 1 and after != before
    assert all("released to h100" in content for _, content in after.values()), after

    # Both start (the scheduler queued them); the next cycle, with nothing waiting, says so.
    train, quantize = key("team_a", "r2", "train"), key("team_a", "r2", "quantize")
    set_running(seed, train, "gpu_h100", started_ago_s=5, waited_s=125)
    set_running(seed, quantize, "gpu_h100", started_ago_s=3, waited_s=40)
    with seed.engine.begin() as conn:  # this one's note is a person's again
        conn.execute(
            text(
                "UPDATE task_instance_note SET user_id = 'carol' WHERE ti_id = "
                "(SELECT id FROM task_instance WHERE dag_id = 'team_a' AND run_id = 'r2' "
                "AND task_id = 'quantize')"
            )
        )
    idle = schedule_cycle(hook, PLANNER, small)
    assert idle["noop"] is True
    user, content = notes(hook)[train]
    assert user == PLANNER_USER and content.startswith(f"{MARKER} started as planned at ")
    assert content.endswith("on h100, waited 2 min 5 s."), content
    assert notes(hook)[quantize][0] == "carol" and "released" in notes(hook)[quantize][1]


def test_a_running_task_the_planner_never_noted_gets_no_note(hook, seed):
    seed.run("team_b", "r3")
    seed.task_instances(
        [
            {
                "dag_id": "team_b",
                "run_id": "r3",
                "task_id": "score",
                "pool_slots": 2,
                "pool": "gpu_h100",
                "state": "running",
            }
        ]
    )
    set_running(seed, key("team_b", "r3", "score"), "gpu_h100", started_ago_s=10, waited_s=5)
    seed.run("team_a", "r3")
    seed.task_instances([{"dag_id": "team_a", "run_id": "r3", "task_id": "quantize"}])
    schedule_cycle(hook, PLANNER, CLUSTER)
    assert key("team_b", "r3", "score") not in notes(hook)
    assert key("team_a", "r3", "quantize") in notes(hook)


def test_when_notes_cannot_be_written_the_plan_is_applied_anyway(hook, seed):
    seed.run("team_a", "r4")
    seed.task_instances([{"dag_id": "team_a", "run_id": "r4", "task_id": "quantize"}])
    with seed.engine.begin() as conn:
        conn.execute(text("ALTER TABLE task_instance_note RENAME TO task_instance_note_away"))
    try:
        summary = schedule_cycle(hook, PLANNER, CLUSTER)
    finally:
        with seed.engine.begin() as conn:
            conn.execute(text("ALTER TABLE task_instance_note_away RENAME TO task_instance_note"))
    assert summary["plan_id"] and summary["released"] == ["team_a/r4/quantize/-1"]
    assert "task_instance_note" in summary["notes"]["error"]
    ti = seed.t["task_instance"]
    with seed.engine.connect() as conn:
        assert conn.execute(select(ti.c.pool).where(ti.c.run_id == "r4")).scalar() == "gpu_h100"


def test_a_note_never_names_a_job_of_another_dag():
    row = {
        "dag_id": "team_a",
        "decision": "held",
        "gpus": 1,
        "gpu_type": "h100",
        "planned_start_s": 0.0,
        "reason": "h100 GPUs reserved for training job secret/r/train/-1 (priority 9), which starts now",
    }
    note = waiting_note(row, ["secret/r/train/-1", "team_a/r/q/-1"])
    assert "secret" not in note and "reserved for training job in another DAG (priority 9)" in note
    assert private("blocked by team_a/r/train/-1", "team_a", ["team_a/r/train/-1"]) == "blocked by team_a/r/train/-1"


def test_notes_fit_the_column_and_durations_read_naturally():
    long = waiting_note({"dag_id": "d", "decision": "rejected", "reason": "x" * 5000}, [])
    from airflow_gpu_scheduler.hooks.notes import fit

    assert len(fit(long)) == NOTE_LIMIT and fit(long).endswith("…")
    assert [duration(s) for s in (8, 192, 7500)] == ["8 s", "3 min 12 s", "2 h 05 min"]


def test_notes_are_gone_with_their_task_instances(hook, seed, metadata_url):
    """Clean-up of the fixture relies on it: nothing of the planner's survives its task instance (PostgreSQL
    cascades; on SQLite the fixture deletes them)."""
    seed.run("team_a", "r5")
    seed.task_instances([{"dag_id": "team_a", "run_id": "r5", "task_id": "quantize"}])
    schedule_cycle(hook, PLANNER, CLUSTER)
    assert notes(hook)
    if "postgresql" in metadata_url:
        with seed.engine.begin() as conn:
            conn.execute(delete(seed.t["task_instance"]).where(seed.t["task_instance"].c.run_id == "r5"))
        assert notes(hook) == {}
