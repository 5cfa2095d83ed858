"""One small end-to-end run on the oldest supported Airflow; run with that virtualenv's python (see test_floor.py).

Imports only the installed wheel (not the checkout): an embedded Airflow (SQLite, LocalExecutor)
migrates the database, which must create the plan tables through the provider's DB manager, then
serves the shipped DAGs; a quantization workload waits in the closed intake pool until one run of
the planning DAG plans it and releases it. Prints a JSON summary; exits non-zero on any failure.
"""

from __future__ import annotations

import json
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

from sqlalchemy import create_engine, inspect, text

from airflow_gpu_scheduler.embedded import EmbeddedAirflow
from airflow_gpu_scheduler.examples import example_dags_folder


def main(home: Path) -> dict:
    dags = home / "dags"
    dags.mkdir(parents=True)
    for name in ("gpu_scheduler.py", "gpu_workloads.py"):
        shutil.copy(example_dags_folder() / name, dags / name)
    af = EmbeddedAirflow(
        home,
        dags,
        extra_env={
            "AIRFLOW_VAR_GPU_SCHEDULER_CLUSTER": json.dumps({"gpu_types": {"h100": {"count": 2, "speed": 1.0}}}),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__GPU_SCHEDULER__PLANNING_STEP_S": "10",
            "AIRFLOW__GPU_SCHEDULER__PLANNING_HORIZON_S": "3600",
            "AIRFLOW__GPU_SCHEDULER__CYCLE_INTERVAL_S": "3",
        },
    )
    try:
        af.start()
        af.wait_for_dags(["gpu_scheduler", "example_gpu_quantization"])
        af.set_pool("gpu_intake", 0)
        for dag_id in ("gpu_scheduler", "example_gpu_quantization"):
            af.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        work = af.trigger("example_gpu_quantization", "floor_work")
        planner = af.trigger("gpu_scheduler", "floor_plan", conf={"repeat_for_s": 45})
        states = af.wait_for_runs([("example_gpu_quantization", work), ("gpu_scheduler", planner)], timeout_s=420)
        engine = create_engine(af.sqlalchemy_url)
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            plans = [dict(r) for r in conn.execute(text("SELECT method, status, due FROM gpu_sched_plan")).mappings()]
            pools = [
                r[0]
                for r in conn.execute(
                    text(
                        "SELECT pool FROM task_instance WHERE dag_id = 'example_gpu_quantization' AND state = 'success'"
                    )
                )
            ]
        engine.dispose()
        return {
            "airflow": version("apache-airflow-core"),
            "states": {f"{d}/{r}": s for (d, r), s in states.items()},
            "plan_tables": sorted(t for t in tables if t.startswith(("gpu_sched", "alembic_version_gpu"))),
            "plans": plans,
            "pools": pools,
        }
    finally:
        af.stop()


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
