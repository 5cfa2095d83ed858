"""A dispatch rule followed live: for the cycles where a rule of thumb does better than any fixed plan.

A plan fixes an order; a rule such as EASY backfill decides again at every change, from
the state alone. When runtimes stray from their estimates, re-deciding when a job ends
early or late can beat any order fixed in advance, and following the rule between solves
is then exactly what the baseline of that name does. A rule that decides from the current
state alone is also the base policy rollout's guarantee is stated for (it is sequentially
consistent: restarted from the next state it makes the same remaining choices), so the
rule is scored the same way it is applied: :func:`follow_rule` runs it forward on the
rollout's sampled futures, and :func:`rule_levers` asks it at every look at the cluster
(:meth:`~airflow_gpu_scheduler.core.replan.ReplanRule.levers`), in the simulator and in
the operator alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_gpu_scheduler.core.levers import (
    INTAKE_POOL,
    Assignment,
    Levers,
    executor_queue,
    gpu_type_of_pool,
    pool_name,
)
from airflow_gpu_scheduler.core.planner.lookahead import SampledFuture, Started
from airflow_gpu_scheduler.core.planner.projection import run_rule
from airflow_gpu_scheduler.core.workload import Cluster, Job, RunningJob, runtime_s

if TYPE_CHECKING:  # the policies import the planner: a runtime import here would be a cycle
    from airflow_gpu_scheduler.core.policies.base import Policy

#: The rules a plan may name (``Plan.rule``).
RULES = ("backfill",)


def make_rule(name: str) -> Policy:
    """A fresh instance of the dispatch rule ``name`` (a policy: ``decide(ClusterState)``)."""
    if name == "backfill":
        from airflow_gpu_scheduler.core.policies.backfill import EasyBackfillPolicy

        return EasyBackfillPolicy()
    raise ValueError(f"unknown dispatch rule {name!r}; known: {', '.join(RULES)}")


def rule_levers(
    name: str, cluster: Cluster, waiting: Sequence[Job], running: Sequence[RunningJob], now_s: float
) -> Levers:
    """What rule ``name`` starts now, through the same pools as a plan's levers.

    The rule only releases work that fits the GPUs free now, so every released job starts at
    Airflow's next scheduler loop; endpoints go to their type's streaming pool, batch work to
    the batch pool, and the streaming pool holds exactly what endpoints hold and are given
    (the rule keeps no reservation, as the baseline keeps none).
    """
    from airflow_gpu_scheduler.core.policies.base import ClusterState

    decision = make_rule(name).decide(ClusterState(now_s, cluster, tuple(waiting), tuple(running)))
    streaming = dict.fromkeys(cluster.names, 0)
    for r in running:
        if r.job.is_streaming:
            streaming[r.gpu_type] += r.job.gpus
    assignments: dict[str, Assignment] = {}
    for job in waiting:
        given = decision.levers.assignments.get(job.job_id)
        gpu_type = None if given is None else gpu_type_of_pool(given.pool)
        if given is None or gpu_type is None:
            assignments[job.job_id] = Assignment(INTAKE_POOL, 0)
            continue
        assignments[job.job_id] = Assignment(
            pool_name(gpu_type, job.is_streaming), given.weight, executor_queue(cluster.gpu_type(gpu_type))
        )
        if job.is_streaming:
            streaming[gpu_type] += job.gpus
    slots: dict[str, int] = {INTAKE_POOL: 0}
    for gpu in cluster.gpu_types:
        held = min(gpu.count, streaming[gpu.name])
        slots[pool_name(gpu.name)] = gpu.count - held
        slots[pool_name(gpu.name, streaming=True)] = held
    return Levers(slots, assignments)


def follow_rule(
    name: str,
    cluster: Cluster,
    waiting: Sequence[Job],
    running: Sequence[RunningJob],
    now_s: float,
    until_s: float,
    future: SampledFuture,
) -> list[Started]:
    """The waiting jobs (and the future's endpoints) that rule ``name`` starts before ``until_s``
    when jobs take ``future``'s times; the rule is asked again at every start, end and arrival,
    and sees estimates only, as it does when it runs for real."""
    speeds = {t.name: t.speed for t in cluster.gpu_types}

    def sampled(job: Job, gpu_type: str) -> float:
        return runtime_s(job, job.planning_estimate_s * future.ratio.get(job.job_id, 1.0), cluster.gpu_type(gpu_type))

    ran = run_rule(
        make_rule(name), cluster, waiting, running, future.running_end, now_s, until_s, sampled, future.arrivals
    )
    return [Started(job, gpu_type, t, runtime, speeds[gpu_type]) for t, job, gpu_type, runtime in ran]
