"""DAGs of the load test: 5,000 mapped GPU task instances, and CPU work that must keep flowing beside them."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

from airflow_gpu_scheduler.declare import gpu_task

START = datetime(2025, 1, 1)
N = int(os.environ.get("GPU_LOAD_TIS", "5000"))

with DAG("load_gpu", schedule=None, start_date=START, catchup=False, max_active_tasks=N):

    @task(**gpu_task("batch_inference", gpus=1, estimate=60.0))
    def shard(i: int) -> None:
        return None

    shard.expand(i=list(range(N)))

with DAG("load_cpu", schedule=None, start_date=START, catchup=False, max_active_runs=16):
    BashOperator(task_id="etl", bash_command="true")
