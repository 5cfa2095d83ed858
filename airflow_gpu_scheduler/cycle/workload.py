"""From task instances to the core's jobs: the bridge between Airflow rows and the planner.

Turns a :class:`~airflow_gpu_scheduler.cycle.snapshot.GpuWorkSnapshot` (what the hook read) into
queued :class:`~airflow_gpu_scheduler.core.workload.Job` objects (with estimates), running jobs,
the streaming reservation and a reason for every task instance that cannot be planned.
Pure Python: no I/O, no Airflow imports. Each job's ``meta["key"]`` is its
:class:`~airflow_gpu_scheduler.cycle.snapshot.JobKey`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_gpu_scheduler.authoring.declare import GpuDeclaration, parse_declaration
from airflow_gpu_scheduler.core.estimates import Estimator
from airflow_gpu_scheduler.core.levers import gpu_type_of_pool
from airflow_gpu_scheduler.core.policies.base import Completion
from airflow_gpu_scheduler.core.streaming import StreamingInterval, streaming_reserve
from airflow_gpu_scheduler.core.workload import Cluster, Job, JobKind, RunningJob, WorkloadError, split_valid
from airflow_gpu_scheduler.cycle.snapshot import GpuTaskInstance, GpuWorkSnapshot


@dataclass(frozen=True)
class GpuWorkload:
    """What the planner needs, plus what it must be told it cannot have.

    :param queued: waiting jobs that can be planned, estimates filled in.
    :param running: jobs holding GPUs now.
    :param rejected: ``{job_id: reason}`` for waiting task instances that can never be planned.
    :param rejection_fields: ``{job_id: {"task", "field", "reason"}}``, the same rejections
        broken down for the XCom summary and the UI.
    :param estimate_sources: ``{job_id: "declared" | "group history" | "kind history" | "default"}``.
    :param reserve: GPUs per type to keep for real-time inference.
    :param task_instances: every waiting task instance by job id.
    :param completed: GPU tasks that succeeded recently, each with the estimate it declared,
        so the rollout samples the estimate errors this cluster shows.
    """

    queued: list[Job]
    running: list[RunningJob]
    rejected: dict[str, str]
    estimate_sources: dict[str, str]
    reserve: dict[str, int]
    task_instances: dict[str, GpuTaskInstance] = field(default_factory=dict)
    rejection_fields: dict[str, dict[str, str]] = field(default_factory=dict)
    completed: list[Completion] = field(default_factory=list)


def _declaration(ti: GpuTaskInstance) -> GpuDeclaration:
    subject = ti.key.subject
    if ti.declaration is None:
        raise WorkloadError(
            subject,
            "executor_config.gpu_scheduler",
            "task is in a GPU pool but declares no GPU work; declare it with gpu_task(...)",
            ti.key.job_id,
        )
    try:
        return parse_declaration(ti.declaration, subject)
    except WorkloadError as error:
        error.job_id = ti.key.job_id
        raise
    except Exception as error:  # a declaration nobody foresaw must not stop the cycle
        raise WorkloadError(
            subject,
            "executor_config.gpu_scheduler",
            f"unreadable declaration ({type(error).__name__}: {error})",
            ti.key.job_id,
        ) from error


def _job(ti: GpuTaskInstance, declaration: GpuDeclaration, submit_s: float) -> Job:
    return Job(
        job_id=ti.key.job_id,
        submit_s=submit_s,
        kind=declaration.kind,
        gpus=declaration.gpus,
        estimate_s=declaration.estimate_s,
        priority=declaration.priority,
        gpu_types=declaration.gpu_types,
        deadline_s=submit_s + declaration.deadline_s if declaration.deadline_s else None,
        group=ti.key.group,
        max_wait_s=declaration.max_wait_s,
        meta={"key": ti.key},
    )


def learn_estimates(snapshot: GpuWorkSnapshot, cluster: Cluster) -> Estimator:
    """Estimator fed with the successful runs of declared GPU tasks (runtime x speed of their GPU type)."""
    estimator = Estimator()
    speeds = {t.name: t.speed for t in cluster.gpu_types}
    # Oldest first, so the estimator's bounded history keeps the most recent runs.
    for ti in sorted(snapshot.finished, key=lambda t: t.end_s or 0.0):
        gpu_type = gpu_type_of_pool(ti.pool)
        if ti.state != "success" or gpu_type not in speeds or ti.declaration is None:
            continue
        duration = ti.duration_s if ti.duration_s else (ti.end_s or 0.0) - (ti.start_s or 0.0)
        try:
            kind = parse_declaration(ti.declaration).kind
        except WorkloadError:
            continue
        estimator.observe(kind, ti.key.group, duration * speeds[gpu_type])
    return estimator


def build_workload(snapshot: GpuWorkSnapshot, cluster: Cluster) -> GpuWorkload:
    """Queued and running jobs of a snapshot, validated against the cluster."""
    estimator = learn_estimates(snapshot, cluster)
    now_s = snapshot.now_s
    rejected: dict[str, str] = {}
    fields: dict[str, dict[str, str]] = {}
    tasks = {ti.key.job_id: f"{ti.key.dag_id}.{ti.key.task_id}" for ti in snapshot.waiting}

    def reject(job_id: str, error: WorkloadError) -> None:
        rejected[job_id] = str(error)
        fields[job_id] = {"task": tasks.get(job_id, job_id), "field": error.field, "reason": error.reason}

    candidates: list[Job] = []
    for ti in snapshot.waiting:
        try:
            declaration = _declaration(ti)
            if ti.pool_slots != declaration.gpus:
                raise WorkloadError(
                    f"job {ti.key.job_id!r}",
                    "pool_slots",
                    f"is {ti.pool_slots} but the task declares {declaration.gpus} GPUs; "
                    "set pool_slots through gpu_task() only",
                    ti.key.job_id,
                )
            candidates.append(_job(ti, declaration, min(ti.ready_s or now_s, now_s)))
        except WorkloadError as error:
            reject(ti.key.job_id, error)
    valid, errors = split_valid(candidates, cluster)
    for invalid in errors:
        reject(invalid.job_id or invalid.subject, invalid)

    sources: dict[str, str] = {}
    queued: list[Job] = []
    for job in valid:
        estimate, source = estimator.estimate(job)
        sources[job.job_id] = source
        queued.append(job.with_estimate(estimate))

    running: list[RunningJob] = []
    intervals: list[StreamingInterval] = []
    for ti in snapshot.running:
        gpu_type = gpu_type_of_pool(ti.pool)
        if gpu_type not in cluster.names:
            continue  # a pool of a GPU type no longer in the cluster: its GPUs are not planned
        try:
            declaration = _declaration(ti)
            job = _job(ti, declaration, ti.start_s or now_s)
        except WorkloadError:
            # Undeclared work in a GPU pool still holds GPUs: count its slots.
            kind = JobKind.REALTIME_INFERENCE if ti.pool.endswith("_streaming") else JobKind.BATCH_INFERENCE
            job = Job(
                ti.key.job_id,
                ti.start_s or now_s,
                kind,
                max(1, ti.pool_slots),
                group=ti.key.group,
                meta={"key": ti.key},
            )
        job = job.with_estimate(estimator.estimate(job)[0])
        running.append(RunningJob(job, gpu_type, min(ti.start_s or now_s, now_s)))
        if ti.pool.endswith("_streaming"):
            intervals.append(StreamingInterval(gpu_type, job.gpus, ti.start_s or now_s, None))
    for ti in snapshot.finished:
        gpu_type = gpu_type_of_pool(ti.pool)
        if ti.pool.endswith("_streaming") and gpu_type in cluster.names and ti.start_s is not None:
            intervals.append(StreamingInterval(gpu_type, ti.pool_slots, ti.start_s, ti.end_s))
    reserve = streaming_reserve(cluster, intervals, now_s)
    return GpuWorkload(
        queued,
        running,
        rejected,
        sources,
        reserve,
        {ti.key.job_id: ti for ti in snapshot.waiting},
        fields,
        completions(snapshot, cluster),
    )


def completions(snapshot: GpuWorkSnapshot, cluster: Cluster) -> list[Completion]:
    """Successful GPU task instances, oldest first, as the planner saw them: with the estimate
    they declared (an estimate learned from history is no error to learn from)."""
    out = []
    for ti in sorted(snapshot.finished, key=lambda t: t.end_s or 0.0):
        gpu_type = gpu_type_of_pool(ti.pool)
        if (
            ti.state != "success"
            or gpu_type not in cluster.names
            or ti.start_s is None
            or ti.end_s is None
            or ti.declaration is None
        ):
            continue
        try:
            job = _job(ti, parse_declaration(ti.declaration), ti.start_s)
        except WorkloadError:
            continue
        if job.is_streaming or job.estimate_s is not None:
            out.append(
                Completion(job.with_estimate(job.estimate_s or ti.end_s - ti.start_s), gpu_type, ti.start_s, ti.end_s)
            )
    return out
