"""Load: task-instance notes for 5,000 held GPU task instances, as a share of a planning cycle.

Mirrors ``test_load.py`` on a migrated metadata database (SQLite and PostgreSQL) seeded with 5,000
waiting task instances of one mapped task: three real planning cycles (collect, plan, apply with
notes, record), the first writing every note, the second the same plan again (nothing to write),
the third ten minutes later (the plan moved: notes rewritten). Figures are printed, not asserted
(2 shared cores); what each cycle wrote is asserted.
"""

from __future__ import annotations

import json
import time

import pytest
from metadata_seed import Seeder
from sqlalchemy import text

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.core.planner.rollout import RolloutPlanner
from airflow_gpu_scheduler.core.workload import Cluster
from airflow_gpu_scheduler.operators.schedule import schedule_cycle

pytestmark = [pytest.mark.load]

N = 5000
CLUSTER = Cluster.from_dict({"gpu_types": {"h100": {"count": 8}}})


def test_notes_for_5000_held_task_instances_are_a_small_part_of_a_cycle(hook, metadata_url):
    seed = Seeder(metadata_url)
    try:
        seed.dag("load_gpu", {"work": {"declaration": {"kind": "quantization", "gpus": 1, "estimate_s": 600}}})
        seed.run("load_gpu", "big")
        seed.task_instances(
            [
                {"dag_id": "load_gpu", "run_id": "big", "task_id": "work", "map_index": i, "waited_s": 60 + i % 300}
                for i in range(N)
            ]
        )
        planner = RolloutPlanner(PlannerConfig(step_s=60.0, horizon_s=24 * 3600.0, time_limit_s=2.0))
        now = time.time()
        figures = []
        for label, at in (("first", now), ("same plan", now), ("10 min later", now + 600)):
            started = time.perf_counter()
            summary = schedule_cycle(hook, planner, CLUSTER, now_s=at)
            wall = time.perf_counter() - started
            notes = summary["notes"]
            figures.append(
                {
                    "cycle": label,
                    "cycle_s": round(wall, 2),
                    "solve_s": summary["solve_wall_s"],
                    "notes_s": notes["wall_s"],
                    "notes_share": round(notes["wall_s"] / wall, 3),
                    **{k: notes[k] for k in ("inserted", "updated", "unchanged")},
                }
            )
            assert notes["error"] is None
        print(f"NOTES ({hook.get_engine().dialect.name})", json.dumps(figures))
        first, same, later = figures
        assert first["inserted"] == N and first["updated"] == 0
        assert same["inserted"] == same["updated"] == 0 and same["unchanged"] == N
        assert later["inserted"] == 0 and later["updated"] + later["unchanged"] == N and later["updated"] > 0
        with hook.get_engine().connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM task_instance_note")).scalar() == N
    finally:
        with seed.engine.begin() as conn:
            conn.execute(text("DELETE FROM task_instance_note"))
        seed.clear()
