"""Independent checks of a finished schedule: what anyone can verify from the schedule CSV."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_gpu_scheduler.core.simulate import Outcome
from airflow_gpu_scheduler.core.workload import Cluster, Job, runtime_s


def schedule_violations(
    cluster: Cluster, jobs: Sequence[Job], outcomes: Mapping[str, Outcome], horizon_s: float
) -> list[str]:
    """Every broken rule: capacity exceeded, start before submit, wrong runtime, wrong type, lost job."""
    problems: list[str] = []
    events: dict[str, list[tuple[float, int]]] = {t.name: [] for t in cluster.gpu_types}
    for job in jobs:
        o = outcomes.get(job.job_id)
        if o is None:
            problems.append(f"{job.job_id}: missing from the schedule")
            continue
        if o.start_s is None:
            continue
        if o.gpu_type not in events:
            problems.append(f"{job.job_id}: ran on unknown GPU type {o.gpu_type!r}")
            continue
        if job.gpu_types and o.gpu_type not in job.gpu_types:
            problems.append(f"{job.job_id}: ran on {o.gpu_type}, allowed {job.gpu_types}")
        if o.start_s < job.submit_s - 1e-6:
            problems.append(f"{job.job_id}: started at {o.start_s} before its submit time {job.submit_s}")
        expected = runtime_s(job, job.duration_s or 0.0, cluster.gpu_type(o.gpu_type))
        if o.end_s is not None and abs((o.end_s - o.start_s) - expected) > 1e-3:
            problems.append(f"{job.job_id}: ran {o.end_s - o.start_s:.1f} s, expected {expected:.1f} s")
        if o.end_s is None and o.start_s + expected <= horizon_s - 1e-3:
            problems.append(f"{job.job_id}: should have ended at {o.start_s + expected:.1f} within the horizon")
        end = o.end_s if o.end_s is not None else o.start_s + expected
        events[o.gpu_type] += [(o.start_s, job.gpus), (end, -job.gpus)]
    for name, changes in events.items():
        level = 0
        # Ends before starts at the same instant: a GPU freed at t can be reused at t.
        for t, delta in sorted(changes, key=lambda e: (e[0], e[1])):
            level += delta
            if level > cluster.gpu_type(name).count:
                problems.append(f"{name}: {level} GPUs busy at t={t:.1f}, only {cluster.gpu_type(name).count} exist")
                break
    return problems
