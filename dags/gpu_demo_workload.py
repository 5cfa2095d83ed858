"""The workload of ``gpu-scheduler demo``: each kind of GPU work twice, planned and as Airflow alone runs it.

``demo_planned_<kind>`` declares its task with :func:`~airflow_gpu_scheduler.declare.gpu_task`, so
it waits in the intake pool until the ``gpu_scheduler`` DAG's plan releases it.
``demo_alone_<kind>`` is the same task as a DAG author would write it without this provider:
in one pool with a slot per GPU (``demo_airflow_alone``), ``pool_slots`` = GPUs and the priority
as an absolute ``priority_weight``, so Airflow's own scheduler dispatches it at its best. The
demo triggers both at the same moments, so both runs share the machine. Each run works (sleeps)
for ``conf["seconds"]``; kinds, GPUs, estimates and priorities are in
:mod:`airflow_gpu_scheduler.dev.demo_workload`.
"""

from __future__ import annotations

import time
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_gpu_scheduler.declare import gpu_task
from airflow_gpu_scheduler.dev.demo_workload import ALONE_POOL, GPU_TYPE, KINDS, dag_id

START = datetime(2025, 1, 1)


def work(**context) -> float:
    """Stands in for the GPU work: holds the task's GPUs for as long as the demo says."""
    seconds = float(context["dag_run"].conf.get("seconds", 1.0))
    time.sleep(seconds)
    return seconds


for spec in KINDS.values():
    with DAG(
        dag_id(spec.kind, planned=True),
        schedule=None,
        start_date=START,
        catchup=False,
        tags=["gpu-scheduler", "demo"],
        description=f"demo: {spec.kind.value} planned by the provider",
    ):
        task(
            work,
            task_id=spec.task_id,
            **gpu_task(
                spec.kind,
                spec.gpus,
                gpu_types=[GPU_TYPE],
                estimate=spec.estimate_s,
                priority=spec.priority,
                deadline=spec.deadline_s,
                max_wait=spec.max_wait_s,
            ),
        )()

    with DAG(
        dag_id(spec.kind, planned=False),
        schedule=None,
        start_date=START,
        catchup=False,
        tags=["gpu-scheduler", "demo"],
        description=f"demo: {spec.kind.value} dispatched by Airflow alone",
    ):
        task(
            work,
            task_id=spec.task_id,
            pool=ALONE_POOL,
            pool_slots=spec.gpus,
            priority_weight=round(spec.priority * 100),
            weight_rule="absolute",
        )()
