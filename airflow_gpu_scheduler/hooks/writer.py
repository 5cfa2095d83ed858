"""The one writer of task-instance levers: pools, priority weights and executor queues, and pool slots.

Both apply paths go through :meth:`LeverWriter._write`: a planning cycle
(:meth:`~LeverWriter.apply_levers`) and the fail-open watchdog (:meth:`~LeverWriter.release_held`).
They differ only in which task instances they may still move (``scheduled`` ones, or any not yet
handed to an executor) and in what they record beside the levers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import insert, or_, select, tuple_, update
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.core.levers import Assignment, Levers
from airflow_gpu_scheduler.cycle.snapshot import GpuTaskInstance, JobKey, is_gpu_pool
from airflow_gpu_scheduler.db.records import PlanRecord
from airflow_gpu_scheduler.hooks.connection import GpuSchedulerMetadataError
from airflow_gpu_scheduler.hooks.tables import RELEASABLE_STATES, slot_pool, task_instance

if TYPE_CHECKING:
    from airflow_gpu_scheduler.hooks.notes import TaskInstanceNotes

#: Task instances moved by one UPDATE (keys in one ``IN`` list; well within every driver's limits).
MOVE_BATCH = 500


@dataclass(frozen=True)
class ApplyResult:
    """What one apply wrote.

    :param moved: task instances whose pool, weight or queue was written.
    :param skipped: task instances left alone because they were dispatched (or changed)
        between collection and apply.
    :param plan_id: id of the stored plan, if a record was given.
    """

    pool_slots: Mapping[str, int]
    moved: tuple[str, ...]
    skipped: tuple[str, ...]
    plan_id: int | None = None


class LeverWriter:
    """The writes of :class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`.

    Expects ``get_engine`` and the plan store's ``_insert_plan`` and ``_amend_plan``.
    """

    def apply_levers(
        self,
        levers: Levers,
        waiting: Sequence[GpuTaskInstance],
        record: PlanRecord | tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
        notes: TaskInstanceNotes | None = None,
        amend: tuple[int, Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
    ) -> ApplyResult:
        """Write a plan's levers in ONE short transaction: close the pools, move the task
        instances, reopen the pools with their new slots.

        Taking the pool rows first matters on PostgreSQL: the scheduler locks pool rows
        ``FOR UPDATE NOWAIT`` and task rows ``FOR UPDATE SKIP LOCKED``, so while this
        transaction runs it skips a loop instead of dispatching from a half-written plan.
        Only ``scheduled`` task instances still in the pool they were collected in are
        written, and only in GPU pools, so a task dispatched meanwhile, or any task outside
        the GPU pools, is never touched. Missing pools are created.

        :param levers: pool slots and per-job assignments from ``levers_for_plan``.
        :param waiting: the collected waiting task instances the assignments refer to.
        :param record: the plan record to store (``gpu_sched_plan`` and ``gpu_sched_plan_job``), in
            the same transaction, so a plan is applied if and only if it is recorded.
        :param notes: the plan's task-instance notes (:mod:`airflow_gpu_scheduler.hooks.notes`), written in
            the same transaction.
        :param amend: ``(plan_id, plan values, job rows)``: instead of storing a new plan, bring stored plan
            ``plan_id`` up to date (the same solve, applied further: jobs it released since, jobs it has
            not placed yet), in the same transaction; see ``_amend_plan``.
        """
        return self._write(
            levers.pool_slots,
            levers.assignments,
            waiting,
            task_instance.c.state == "scheduled",
            record=record,
            notes=notes,
            amend=amend,
            what="applying the plan",
        )

    def release_held(
        self,
        moves: Mapping[str, Assignment],
        task_instances: Sequence[GpuTaskInstance],
        pool_slots: Mapping[str, int],
        record: PlanRecord | tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
    ) -> ApplyResult:
        """Fail-open: write pools and weights for held work in ONE transaction, as :meth:`apply_levers` does,
        but for task instances in any not-yet-dispatched state (``None`` included), so work whose
        upstream is still running is not caught in the intake pool later.
        """
        not_dispatched = or_(task_instance.c.state.is_(None), task_instance.c.state.in_(RELEASABLE_STATES))
        return self._write(pool_slots, moves, task_instances, not_dispatched, record=record, what="releasing held work")

    def _write(
        self,
        pool_slots: Mapping[str, int],
        assignments: Mapping[str, Assignment],
        task_instances: Sequence[GpuTaskInstance],
        still_waiting: Any,
        *,
        record: PlanRecord | tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
        notes: TaskInstanceNotes | None = None,
        amend: tuple[int, Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
        what: str,
    ) -> ApplyResult:
        """Close the pools, move the task instances that change, reopen the pools, record: one transaction.

        Only GPU pools are written. A task instance is moved only if it was read in a GPU pool,
        its pool, weight or (given) queue changes, and it is still in the pool it was read in and
        ``still_waiting``. Pools closed but given no slots keep the slots they had.
        """
        bad = sorted(
            {p for p in pool_slots if not is_gpu_pool(p)}
            | {a.pool for a in assignments.values() if not is_gpu_pool(a.pool)}
        )
        if bad:
            raise ValueError(f"refusing to write pools outside the GPU pools: {bad}")
        by_job = {t.key.job_id: t for t in task_instances}
        changes = []
        for job_id, assignment in assignments.items():
            ti = by_job.get(job_id)
            if ti is None or not is_gpu_pool(ti.pool):
                continue
            if (
                ti.pool != assignment.pool
                or ti.priority_weight != assignment.weight
                or (assignment.queue is not None and ti.queue != assignment.queue)
            ):
                changes.append((ti, assignment))
        pools = sorted(set(pool_slots) | {a.pool for _, a in changes})
        plan_id = None
        try:
            with self.get_engine().begin() as conn:  # type: ignore[attr-defined]
                existing = _close_pools(conn, pools)
                moved, skipped = _move_task_instances(conn, changes, still_waiting)
                for pool in pools:
                    slots = pool_slots.get(pool, existing.get(pool, 0))
                    conn.execute(update(slot_pool).where(slot_pool.c.pool == pool).values(slots=int(slots)))
                if record is not None:
                    plan_row, job_rows = record
                    plan_id = self._insert_plan(conn, {"moved": len(moved), **plan_row}, job_rows)  # type: ignore[attr-defined]
                if amend is not None:
                    plan_id = self._amend_plan(conn, *amend)  # type: ignore[attr-defined]
                if notes is not None:
                    notes.write(conn)
        except SQLAlchemyError as error:
            hint = " (are the provider tables missing? run 'airflow db migrate')" if record is not None else ""
            raise GpuSchedulerMetadataError(
                f"{what} failed and was rolled back, nothing was changed{hint}: {type(error).__name__}: {error}"
            ) from error
        return ApplyResult(dict(pool_slots), tuple(moved), tuple(skipped), plan_id)


def _close_pools(conn, pools: Sequence[str]) -> dict[str, int]:
    """Create missing GPU pools and set every one of ``pools`` to 0 slots; returns their slots before.

    Inside the apply transaction, closed pools mean the scheduler cannot dispatch from them
    while task instances are moved; the caller reopens them with the plan's slots.
    """
    existing = dict(conn.execute(select(slot_pool.c.pool, slot_pool.c.slots).where(slot_pool.c.pool.in_(pools))).all())
    for pool in pools:
        if pool not in existing:
            conn.execute(
                insert(slot_pool).values(
                    pool=pool,
                    slots=0,
                    include_deferred=False,
                    description="Managed by airflow-gpu-scheduler: slots are rewritten every planning cycle.",
                )
            )
    if pools:
        conn.execute(update(slot_pool).where(slot_pool.c.pool.in_(pools)).values(slots=0))
    return existing


def _move_task_instances(
    conn, changes: Sequence[tuple[GpuTaskInstance, Assignment]], still_waiting
) -> tuple[list[str], list[str]]:
    """Write pool, weight and executor queue of many task instances with few statements.

    Returns the (moved, skipped) job ids.

    Task instances that get the same values from the same pool share an UPDATE keyed on
    ``(dag_id, run_id, task_id, map_index) IN (...)``, guarded by "still in the pool it was read
    in" and ``still_waiting``; RETURNING tells which rows were written, so one dispatched
    meanwhile is reported as skipped. Thousands of held task instances take a handful of
    statements instead of one round trip each while the pool rows are locked. Without
    RETURNING (MySQL) each task instance gets its own statement.
    """
    ti = task_instance
    groups: dict[tuple[str, str, int, str | None], list[JobKey]] = {}
    for task, assignment in changes:
        groups.setdefault((task.pool, assignment.pool, assignment.weight, assignment.queue), []).append(task.key)
    returning = conn.dialect.update_returning
    moved: list[str] = []
    skipped: list[str] = []
    for (old_pool, new_pool, weight, queue), keys in groups.items():
        # A held assignment carries no queue (None): the task instance keeps its own.
        values = {"pool": new_pool, "priority_weight": weight} | ({"queue": queue} if queue is not None else {})
        for start in range(0, len(keys), MOVE_BATCH if returning else 1):
            batch = keys[start : start + (MOVE_BATCH if returning else 1)]
            statement = (
                update(ti)
                .where(
                    tuple_(ti.c.dag_id, ti.c.run_id, ti.c.task_id, ti.c.map_index).in_(
                        [(k.dag_id, k.run_id, k.task_id, k.map_index) for k in batch]
                    )
                )
                .where(ti.c.pool == old_pool, still_waiting)
                .values(**values)
            )
            if returning:
                rows = conn.execute(statement.returning(ti.c.dag_id, ti.c.run_id, ti.c.task_id, ti.c.map_index)).all()
                written = {JobKey(d, r, t, int(m)) for d, r, t, m in rows}
            else:
                written = set(batch) if conn.execute(statement).rowcount == 1 else set()
            for key in batch:
                (moved if key in written else skipped).append(key.job_id)
    return moved, skipped
