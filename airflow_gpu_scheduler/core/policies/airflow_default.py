"""What Airflow does today: one pool per GPU type, priority weights, no plan.

Each job sits in the pool of one GPU type chosen when the DAG was written (the
largest pool it may use) with ``priority_weight`` = its priority. Airflow's
dispatch then starts, in weight order, whatever fits; a gang that does not fit is
skipped and smaller, later jobs take the GPUs (apache/airflow#29474).
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.levers import Assignment, Levers, default_levers, pool_name
from airflow_gpu_scheduler.core.policies.base import ClusterState, Decision
from airflow_gpu_scheduler.core.workload import Cluster, Job, allowed_types


def static_pool(job: Job, cluster: Cluster) -> str:
    """The pool a DAG author would hard-code: the largest (then fastest) GPU type the job may use."""
    gpu_type = max(allowed_types(job, cluster), key=lambda t: (t.count >= job.gpus, t.count, t.speed))
    return pool_name(gpu_type.name)


def airflow_weight(priority: float) -> int:
    """Airflow weights are integers; keep two decimals of the declared priority."""
    return round(priority * 100)


class AirflowDefaultPolicy:
    name = "airflow"
    cadence_s: float | None = None

    def decide(self, state: ClusterState) -> Decision:
        assignments = {
            job.job_id: Assignment(static_pool(job, state.cluster), airflow_weight(job.priority))
            for job in state.waiting
        }
        return Decision(Levers(default_levers(state.cluster), assignments))
