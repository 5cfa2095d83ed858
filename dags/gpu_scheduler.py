"""Platform DAGs: plan queued GPU work every minute, and a watchdog that fails open.

Needs the Variable ``gpu_scheduler_cluster`` (cluster JSON) and the connection
``gpu_scheduler_metadata`` (Airflow's metadata database). Within each one-minute run the
operator re-plans every 5 seconds, so newly queued GPU work waits only seconds for a plan.

``gpu_scheduler_watchdog`` is a separate DAG on purpose: if the planning task crashes every
run, hangs, or its DAG is paused, the watchdog still runs, and after five minutes without a
plan it hands held GPU work back to Airflow's own order (see the README, "Reliability").
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_gpu_scheduler.core.planner import PlannerConfig
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
        # Grid of 10 s near now: the example workloads run for seconds, not hours.
        planner_config=PlannerConfig(step_s=10.0, horizon_s=2 * 3600.0, time_limit_s=5.0),
        repeat_for_s=50.0,
        repeat_every_s=5.0,
        execution_timeout=timedelta(minutes=2),
    )

with DAG(
    dag_id="gpu_scheduler_watchdog",
    description="Release held GPU work to Airflow's own order if the planner has been down for 5 minutes",
    schedule=timedelta(minutes=1),
    start_date=datetime(2025, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["gpu-scheduler", "platform"],
    default_args={"retries": 0},
) as watchdog_dag:
    GpuFailOpenOperator(
        task_id="fail_open_if_planner_down",
        fail_open_after_s=300.0,
        execution_timeout=timedelta(minutes=1),
    )
