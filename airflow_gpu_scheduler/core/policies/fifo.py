"""Strict FIFO: jobs start in arrival order and the head of the queue blocks everything behind it.

This is the baseline of the published result. Expressed through Airflow's levers:
the head jobs that fit go to the pool of the fastest free GPU type they may use;
everything from the first job that does not fit onwards stays held.
"""

from __future__ import annotations

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, Assignment, Levers, default_levers, plan_weight, pool_name
from airflow_gpu_scheduler.core.policies.base import (
    ClusterState,
    Decision,
    arrival_order,
    fastest_fitting_type,
    free_gpus,
)


class FifoPolicy:
    name = "fifo"
    cadence_s: float | None = None

    def decide(self, state: ClusterState) -> Decision:
        free = free_gpus(state)
        assignments: dict[str, Assignment] = {}
        blocked = False
        for rank, job in enumerate(arrival_order(state.waiting)):
            gpu_type = None if blocked else fastest_fitting_type(job, state.cluster, free)
            if gpu_type is None:
                blocked = True
                assignments[job.job_id] = Assignment(INTAKE_POOL, 0)
                continue
            free[gpu_type.name] -= job.gpus
            assignments[job.job_id] = Assignment(pool_name(gpu_type.name), plan_weight(rank))
        return Decision(Levers(default_levers(state.cluster), assignments))
