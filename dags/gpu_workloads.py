"""Example GPU workloads, one DAG per kind of GPU work.

Parameters are realistic in shape (gang sizes, priorities, which GPU types) but the time
scale is shrunk: one second of sleep stands in for several minutes of GPU work, and the
declared estimates match the sleeps so the planner's view is right. Each task is declared
with :func:`~airflow_gpu_scheduler.declare.gpu_task`: classic operators and ``@task`` alike.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

from airflow_gpu_scheduler.declare import gpu_task

START = datetime(2025, 1, 1)

# Training: a 4-GPU gang on H100s, high priority, ~40 s standing in for hours.
with DAG("example_gpu_training", schedule=None, start_date=START, catchup=False, tags=["gpu-scheduler", "example"]):
    BashOperator(
        task_id="finetune_llm",
        bash_command="echo 'fine-tuning on 4 GPUs'; sleep 40",
        **gpu_task(
            "training",
            gpus=4,
            gpu_types=["h100"],
            estimate=timedelta(seconds=42),
            priority=10.0,
            deadline=timedelta(minutes=10),
        ),
    )

# Real-time inference: must start within seconds of arriving; 1 GPU of any type.
with DAG(
    "example_gpu_realtime_inference", schedule=None, start_date=START, catchup=False, tags=["gpu-scheduler", "example"]
):

    @task(
        **gpu_task(
            "realtime_inference", gpus=1, estimate=timedelta(seconds=20), priority=5.0, max_wait=timedelta(seconds=30)
        )
    )
    def serve_burst() -> str:
        time.sleep(18)
        return "served"

    serve_burst()

# Batch inference: 2 GPUs, any type, a mapped task scoring shards.
with DAG(
    "example_gpu_batch_inference", schedule=None, start_date=START, catchup=False, tags=["gpu-scheduler", "example"]
):

    @task(**gpu_task("batch_inference", gpus=2, estimate=timedelta(seconds=15), priority=2.0))
    def score_shard(shard: int) -> int:
        time.sleep(14)
        return shard

    score_shard.expand(shard=[0, 1, 2])

# Quantization: many small 1-GPU jobs, low priority; the stream that starves big gangs.
with DAG("example_gpu_quantization", schedule=None, start_date=START, catchup=False, tags=["gpu-scheduler", "example"]):

    @task(**gpu_task("quantization", gpus=1, estimate=timedelta(seconds=10), priority=1.0))
    def quantize(model: str) -> str:
        time.sleep(9)
        return f"{model}-int4"

    quantize.expand(model=["llama-8b", "mistral-7b", "qwen-7b", "phi-3", "gemma-9b", "llama-3b"])
