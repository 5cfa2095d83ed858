"""What the hook reads from Airflow's metadata database: GPU task instances and snapshots of them.

Plain values, no I/O: the hook (:mod:`airflow_gpu_scheduler.hooks.collect`) builds them from
rows, the glue turns them into the core's jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, POOL_PREFIX


class JobKey(NamedTuple):
    """A GPU job's identity on the Airflow side: its task instance's ``(dag_id, run_id, task_id, map_index)``.

    Stable across retries and clears (the task instance's row id is not). Its string form
    :attr:`job_id` is the core's ``Job.job_id`` and the plan tables' ``job_id``. A tuple, so it
    compares equal to the plain tuple it was made of.
    """

    dag_id: str
    run_id: str
    task_id: str
    map_index: int

    @property
    def job_id(self) -> str:
        return f"{self.dag_id}/{self.run_id}/{self.task_id}/{self.map_index}"

    @property
    def group(self) -> str:
        """``dag_id.task_id``: the recurring task whose history gives estimates."""
        return f"{self.dag_id}.{self.task_id}"

    @property
    def subject(self) -> str:
        """How error messages name the task instance."""
        return f"task {self.dag_id}.{self.task_id} (run {self.run_id}, map_index {self.map_index})"


def is_gpu_pool(pool: str | None) -> bool:
    """The only pools this provider ever writes: the intake pool and ``gpu_*`` pools."""
    return pool is not None and (pool == INTAKE_POOL or pool.startswith(POOL_PREFIX))


@dataclass(frozen=True)
class GpuTaskInstance:
    """One task instance in a GPU pool, as read from the metadata database.

    :param declaration: the raw ``gpu_scheduler`` declaration of its task, or ``None`` if the
        task has none (or its serialized DAG could not be read).
    :param default_weight: the priority weight Airflow itself would give it (fail-open uses it).
    """

    key: JobKey
    state: str | None
    pool: str
    pool_slots: int
    priority_weight: int | None
    ready_s: float | None
    start_s: float | None
    end_s: float | None
    duration_s: float | None
    declaration: Any = None
    queue: str | None = None
    default_weight: int | None = None


@dataclass(frozen=True)
class GpuWorkSnapshot:
    """GPU work in Airflow at one moment: what waits, what runs, what finished recently."""

    now_s: float
    waiting: tuple[GpuTaskInstance, ...]
    running: tuple[GpuTaskInstance, ...]
    finished: tuple[GpuTaskInstance, ...]
    pool_slots: Mapping[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.waiting


@dataclass(frozen=True)
class FailOpenState:
    """What the fail-open watchdog reads: held and released work, busy GPUs, the planner's last sign of life.

    :param held: not-yet-dispatched task instances in the intake pool.
    :param released: ``scheduled`` task instances in ``gpu_*`` pools.
    :param busy_slots: slots taken per ``gpu_*`` pool by queued or running task instances.
    :param last_plan_s: when the planner last applied a plan (``None``: never).
    :param last_release_s: when work was last released without a plan (``None``: never).
    """

    now_s: float
    held: tuple[GpuTaskInstance, ...]
    released: tuple[GpuTaskInstance, ...]
    busy_slots: Mapping[str, int]
    pool_slots: Mapping[str, int]
    last_plan_s: float | None
    last_release_s: float | None

    @property
    def waiting(self) -> tuple[GpuTaskInstance, ...]:
        """Every not-yet-dispatched task instance: held ones, then released ones."""
        return (*self.held, *self.released)
