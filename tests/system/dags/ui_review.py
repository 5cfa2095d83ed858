"""DAGs the review-page test adds to the proof workload: a real-time inference endpoint (it
creates the streaming reservation) and a batch job with a deadline."""

from __future__ import annotations

import time
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_gpu_scheduler.declare import gpu_task

START = datetime(2025, 1, 1)

with DAG("ui_stream", schedule=None, start_date=START, catchup=False):

    @task(task_id="serve", **gpu_task("realtime_inference", gpus=1, gpu_types=["a100"], estimate=60.0, priority=5.0))
    def serve(**context) -> None:
        time.sleep(float(context["dag_run"].conf.get("sleep", 5)))

    serve()

with DAG("ui_batch", schedule=None, start_date=START, catchup=False):

    @task(task_id="score", **gpu_task("batch_inference", gpus=2, estimate=20.0, priority=3.0, deadline=600.0))
    def score() -> None:
        time.sleep(2)

    score()
