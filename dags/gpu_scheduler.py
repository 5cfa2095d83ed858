"""Platform DAGs: plan queued GPU work every minute, and a watchdog that fails open.

Needs the Variable ``gpu_scheduler_cluster`` (cluster JSON) and the connection
``gpu_scheduler_metadata`` (Airflow's metadata database). Within each one-minute run the
operator looks at the GPU task instances every ``[gpu_scheduler] watch_interval_s``: when GPU work
arrives, starts or ends it re-applies the plan at once (the next job on freed GPUs is already
waiting in its pool) and re-solves when the re-planning rule says so, at least every
``replan_interval_s`` while work changes. The planner's budget, grid and horizon, and the watchdog's delay, come from
the ``[gpu_scheduler]`` settings too (``airflow config list --section gpu_scheduler``); a run
triggered with ``{"repeat_for_s": 0}`` plans once, which checks a new set-up.

``gpu_scheduler_watchdog`` is a separate DAG on purpose: if the planning task crashes every
run, hangs, or its DAG is paused, the watchdog still runs, and after ``fail_open_after_s`` (five
minutes by default) without a plan it hands held GPU work back to Airflow's own order (see docs/operations.md,
"Reliability").
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_gpu_scheduler.operators.fail_open import GpuFailOpenOperator
from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator

with DAG(
    dag_id="gpu_scheduler",
    description="Plan GPU work (Pyomo + HiGHS) and apply it through pools and priority weights",
    schedule=timedelta(minutes=1),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["gpu-scheduler", "platform"],
    default_args={"retries": 0},
) as dag:
    GpuScheduleOperator(
        task_id="plan_and_apply",
        # Keep planning for most of the minute, until the next run takes over.
        repeat_for_s="{{ (dag_run.conf or {}).get('repeat_for_s', 50) }}",
        execution_timeout=timedelta(minutes=2),
    )

with DAG(
    dag_id="gpu_scheduler_watchdog",
    description="Release held GPU work to Airflow's own order if the planner has been down for a while",
    schedule=timedelta(minutes=1),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["gpu-scheduler", "platform"],
    default_args={"retries": 0},
) as watchdog_dag:
    GpuFailOpenOperator(
        task_id="fail_open_if_planner_down",
        execution_timeout=timedelta(minutes=1),
    )
