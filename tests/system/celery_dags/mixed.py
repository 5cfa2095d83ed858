"""DAGs of the CeleryExecutor proof: GPU work for two GPU types, and the planner.

``mixed_h100`` and ``mixed_a100`` are pinned to one GPU type, ``mixed_any`` may run on
either, so the planner's choice decides which Celery queue (and so which worker) gets it.
Each task sleeps ``conf["sleep"]`` seconds; the estimate covers the sleep plus task start-up.
The planner runs in the default queue, served by the platform worker.
"""

from __future__ import annotations

import time
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.declare import gpu_task
from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator

START = datetime(2025, 1, 1)
SLEEP_S = 3.0
ESTIMATE_S = SLEEP_S + 1.5


def sleeper(dag_id: str, **declaration) -> None:
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, max_active_runs=64):

        @task(task_id="work", **gpu_task(**declaration, estimate=ESTIMATE_S))
        def work(**context) -> None:
            time.sleep(float(context["dag_run"].conf.get("sleep", SLEEP_S)))

        work()


sleeper("mixed_h100", kind="training", gpus=2, gpu_types=["h100"], priority=3.0)
sleeper("mixed_a100", kind="batch_inference", gpus=1, gpu_types=["a100"], priority=2.0)
sleeper("mixed_any", kind="quantization", gpus=1, priority=1.0)

with DAG("plan_scheduler", schedule=None, start_date=START, catchup=False, max_active_runs=1):
    GpuScheduleOperator(
        task_id="plan_and_apply",
        planner_config=PlannerConfig(step_s=1.0, fine_points=30, horizon_s=600.0, time_limit_s=2.0),
        repeat_for_s="{{ dag_run.conf.get('repeat_for_s', 0) }}",
        repeat_every_s=1.5,
    )
