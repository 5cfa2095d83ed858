"""What the planner writes in each GPU task instance's note: its plan, in the review page's words.

A held task instance's note says when the plan starts it, on which GPU type, and why it waits
(the reason :mod:`airflow_gpu_scheduler.core.waiting` gives and the plan stores); a released one
says where it goes; once it runs, the note says when it started and how long it waited. Pure
text from a cycle's plan rows and running task instances; the hook writes it
(:class:`~airflow_gpu_scheduler.hooks.notes.TaskInstanceNotes`).

A note is visible to everyone who may read its task instance, so it never names a job of
another DAG (a reason such as "GPUs reserved for training job d/r/t/-1" says "a job in another DAG").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from airflow_gpu_scheduler.core.levers import gpu_type_of_pool
from airflow_gpu_scheduler.core.waiting import clock
from airflow_gpu_scheduler.cycle.snapshot import GpuTaskInstance, JobKey
from airflow_gpu_scheduler.db.records import Decision
from airflow_gpu_scheduler.hooks.notes import MARKER, TaskInstanceNotes


def duration(seconds: float) -> str:
    """``8 s``, ``3 min 12 s``, ``2 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def gpu_count(gpus: Any) -> str:
    """``1 GPU``, ``4 GPUs``."""
    return f"{gpus} GPU" if gpus == 1 else f"{gpus} GPUs"


def private(reason: str, dag_id: str, job_ids: Iterable[str]) -> str:
    """``reason`` with every job of another DAG named only as such."""
    for job_id in job_ids:
        if job_id.split("/", 1)[0] != dag_id and job_id in reason:
            reason = reason.replace(f"job {job_id}", "job in another DAG").replace(job_id, "a job in another DAG")
    return reason


def waiting_note(row: Mapping[str, Any], job_ids: Sequence[str] = ()) -> str | None:
    """The note of a waiting task instance from its row in ``gpu_sched_plan_job`` (``None``: no note)."""
    decision = row.get("decision")
    reason = private(row.get("reason") or "", row["dag_id"], job_ids)
    gpus = row.get("gpus")
    if decision == Decision.RELEASED and row.get("released_ahead"):
        return (
            f"{MARKER} released to {row.get('gpu_type')} ({gpu_count(gpus)}), next in line: it starts as soon as "
            f"{gpu_count(gpus)} free (planned start {clock(row['planned_start_s'])})."
        )
    if decision == Decision.RELEASED:
        return (
            f"{MARKER} released to {row.get('gpu_type')} ({gpu_count(gpus)}); it starts when Airflow's "
            "scheduler queues it."
        )
    if decision == Decision.HELD:
        return (
            f"{MARKER} planned start {clock(row['planned_start_s'])} on {row.get('gpu_type')} ({gpu_count(gpus)}); "
            f"waiting because {reason or 'the plan starts it later'}."
        )
    if decision == Decision.UNPLANNED:
        return (
            f"{MARKER} not placed in the plan yet; "
            f"waiting because {reason or 'no GPU type has room for it within the planning horizon'}."
        )
    if decision == Decision.REJECTED:
        return f"{MARKER} cannot be planned, held until its declaration is fixed: {reason}"
    return None


def started_note(ti: GpuTaskInstance) -> str | None:
    """The note of a task instance that is running (``None`` while it is only queued)."""
    if ti.state != "running" or ti.start_s is None:
        return None
    waited = f", waited {duration(ti.start_s - ti.ready_s)}" if ti.ready_s is not None else ""
    return f"{MARKER} started as planned at {clock(ti.start_s)} on {gpu_type_of_pool(ti.pool)}{waited}."


def notes_for_plan(job_rows: Sequence[Mapping[str, Any]], running: Sequence[GpuTaskInstance]) -> TaskInstanceNotes:
    """The notes one cycle writes: every waiting task instance of the plan, every running one."""
    job_ids = [row["job_id"] for row in job_rows]
    plan: dict[JobKey, str] = {}
    for row in job_rows:
        if row.get("decision") == Decision.RUNNING:
            continue
        note = waiting_note(row, job_ids)
        if note is not None:
            plan[JobKey(row["dag_id"], row["run_id"], row["task_id"], int(row["map_index"]))] = note
    started = {ti.key: note for ti in running if (note := started_note(ti)) is not None}
    return TaskInstanceNotes(plan, started)
