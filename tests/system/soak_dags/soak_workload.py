"""The soak's GPU work: one DAG per kind, each run one short task that sleeps ``conf["seconds"]``.

Shapes as in a real cluster (a training gang, 2-GPU batch inference, 1-GPU real-time endpoints and
quantization jobs), time shrunk to seconds so that a half-hour soak plans hundreds of jobs. The
estimate covers the sleep plus a task's start-up on a loaded machine. No retries: a task instance
that fails is counted as lost, not hidden by a second try.
"""

from __future__ import annotations

import time
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_gpu_scheduler.declare import gpu_task

START = datetime(2025, 1, 1)
STARTUP_S = 4.0
#: kind -> (dag_id, declaration without the estimate, default seconds of work)
KINDS = {
    "training": ("soak_training", {"gpus": 3, "priority": 8.0, "deadline": 600.0}, 8.0),
    "realtime_inference": ("soak_realtime_inference", {"gpus": 1, "priority": 5.0, "max_wait": 30.0}, 3.0),
    "batch_inference": ("soak_batch_inference", {"gpus": 2, "priority": 2.0}, 5.0),
    "quantization": ("soak_quantization", {"gpus": 1, "priority": 1.0}, 2.0),
}


def work(**context) -> float:
    """Stands in for the GPU work: holds the task's GPUs for the run's ``seconds``."""
    seconds = float(context["dag_run"].conf.get("seconds", 1.0))
    time.sleep(seconds)
    return seconds


for kind, (dag_id, declaration, seconds) in KINDS.items():
    with DAG(
        dag_id,
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=64,
        default_args={"retries": 0},
        tags=["gpu-scheduler", "soak"],
    ):
        task(work, task_id="work", **gpu_task(kind, estimate=seconds + STARTUP_S, **declaration))()
