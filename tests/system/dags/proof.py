"""DAGs of the end-to-end proof: a 4-GPU training job behind a stream of 1-GPU quantization jobs.

``fifo_*`` are what a team does without the provider (a plain 4-slot pool, priority weights);
``plan_*`` are declared with ``gpu_task`` and dispatched by the operator in ``plan_scheduler``.
"""

from __future__ import annotations

import time
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

from airflow_gpu_scheduler.core.planner import PlannerConfig
from airflow_gpu_scheduler.declare import gpu_task
from airflow_gpu_scheduler.operators.fail_open import GpuFailOpenOperator
from airflow_gpu_scheduler.operators.schedule import GpuScheduleOperator

START = datetime(2025, 1, 1)
# Each quantization run sleeps for ``conf["sleep"]`` seconds (they vary, so GPUs free one at
# a time, as in a real stream); the planner only sees the declared estimate.
QUANT_S = 6.0
TRAIN_S = 8.0
# Start-to-end of a task instance is its sleep plus about a second of task startup.
QUANT_ESTIMATE = QUANT_S + 1.5
TRAIN_ESTIMATE = TRAIN_S + 1.5
SLEEP = "sleep {{ dag_run.conf.get('sleep', %s) }}"

with DAG("fifo_quant", schedule=None, start_date=START, catchup=False, max_active_runs=64):
    BashOperator(
        task_id="quantize",
        bash_command=SLEEP % QUANT_S,
        pool="fifo_h100",
        pool_slots=1,
        priority_weight=1,
        weight_rule="absolute",
    )

with DAG("fifo_train", schedule=None, start_date=START, catchup=False):
    BashOperator(
        task_id="train",
        bash_command=f"sleep {TRAIN_S}",
        pool="fifo_h100",
        pool_slots=4,
        priority_weight=10,
        weight_rule="absolute",
    )

with DAG("plan_quant", schedule=None, start_date=START, catchup=False, max_active_runs=64):

    @task(task_id="quantize", **gpu_task("quantization", gpus=1, estimate=QUANT_ESTIMATE, priority=1.0))
    def quantize(**context) -> None:
        time.sleep(float(context["dag_run"].conf.get("sleep", QUANT_S)))

    quantize()

with DAG("plan_train", schedule=None, start_date=START, catchup=False):
    BashOperator(
        task_id="train",
        bash_command=f"sleep {TRAIN_S}",
        **gpu_task("training", gpus=4, gpu_types=["h100"], estimate=TRAIN_ESTIMATE, priority=10.0),
    )

# A task in a non-GPU pool, to prove the operator never touches it.
with DAG("cpu_only", schedule=None, start_date=START, catchup=False):
    BashOperator(task_id="etl", bash_command="sleep 1", pool="cpu_pool", priority_weight=7, weight_rule="absolute")

# An impossible request: 8 GPUs on a 4-GPU cluster. It must be reported, never planned.
with DAG("plan_impossible", schedule=None, start_date=START, catchup=False):
    BashOperator(task_id="too_big", bash_command="true", **gpu_task("training", gpus=8, estimate=5))

with DAG("plan_scheduler", schedule=None, start_date=START, catchup=False, max_active_runs=1):
    GpuScheduleOperator(
        task_id="plan_and_apply",
        planner_config=PlannerConfig(step_s=1.0, fine_points=30, horizon_s=600.0, time_limit_s=2.0),
        repeat_for_s="{{ dag_run.conf.get('repeat_for_s', 0) }}",
        repeat_every_s=1.5,
        watch_every_s=0.5,
        replan_interval_s=3.0,
    )

# A mapped GPU task: each map index is its own job, keyed on (dag_id, run_id, task_id, map_index).
with DAG("plan_mapped", schedule=None, start_date=START, catchup=False):

    @task(**gpu_task("batch_inference", gpus=2, estimate=4.0, priority=2.0))
    def score(shard: int) -> int:
        time.sleep(1)
        return shard

    score.expand(shard=[0, 1])

# A planner that crashes on every run (its cluster file does not exist), and the watchdog
# that must keep GPU work flowing regardless.
with DAG("plan_broken_scheduler", schedule=None, start_date=START, catchup=False):
    GpuScheduleOperator(task_id="plan_and_apply", cluster_file="/nonexistent/cluster.json")

with DAG("plan_watchdog", schedule=None, start_date=START, catchup=False, max_active_runs=1):
    GpuFailOpenOperator(task_id="fail_open", fail_open_after_s=8.0)
