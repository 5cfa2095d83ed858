"""The hook's plan store: the provider's ``gpu_sched_plan`` and ``gpu_sched_plan_job`` tables.

Rows go in as :class:`~airflow_gpu_scheduler.db.records.PlanRecord` (plain dicts) and come back
as dicts of the same columns, each job's ``decision`` in today's vocabulary
(:func:`~airflow_gpu_scheduler.db.records.stored_decision`). The review page's reads take an optional
open connection: it passes the api-server's own session connection, so it needs no
``gpu_scheduler_metadata`` connection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.db.models import plan_job_table, plan_table
from airflow_gpu_scheduler.db.records import Decision, stored_decision
from airflow_gpu_scheduler.hooks.connection import GpuSchedulerMetadataError

_RUNNING = Decision.RUNNING.value


def _job(row: Mapping[str, Any]) -> dict[str, Any]:
    job = dict(row)
    if "decision" in job:
        job["decision"] = stored_decision(job["decision"])
    return job


class PlanStore:
    """Plan storage of the metadata hook (:class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`;
    expects ``get_engine``)."""

    def store_plan(self, plan_row: Mapping[str, Any], job_rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert one plan and its job rows (see :mod:`airflow_gpu_scheduler.db.records`); returns the plan id."""
        try:
            with self.get_engine().begin() as conn:  # type: ignore[attr-defined]
                plan_id = self._insert_plan(conn, plan_row, job_rows)
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(
                f"storing the plan failed (are the provider tables missing? run 'airflow db migrate'): "
                f"{type(error).__name__}: {error}"
            ) from error
        return int(plan_id)

    @staticmethod
    def _insert_plan(conn, plan_row: Mapping[str, Any], job_rows: Sequence[Mapping[str, Any]]) -> int:
        plan_id = conn.execute(insert(plan_table).values(**plan_row)).inserted_primary_key[0]
        if job_rows:
            # executemany needs the same keys in every row.
            columns = [c.name for c in plan_job_table.columns if c.name not in ("id", "plan_id")]
            rows = [{**{c: row.get(c) for c in columns}, "plan_id": plan_id} for row in job_rows]
            conn.execute(insert(plan_job_table), rows)
        return int(plan_id)

    @staticmethod
    def _amend_plan(conn, plan_id: int, plan_values: Mapping[str, Any], job_rows: Sequence[Mapping[str, Any]]) -> int:
        """Update stored plan ``plan_id`` in place: its summary columns, the rows of ``job_rows`` it has
        (by job id), and new rows for the jobs it has not. Rows of jobs not in ``job_rows`` stay."""
        conn.execute(update(plan_table).where(plan_table.c.id == plan_id).values(**plan_values))
        columns = [c.name for c in plan_job_table.columns if c.name not in ("id", "plan_id")]
        have = {
            job_id
            for (job_id,) in conn.execute(
                select(plan_job_table.c.job_id).where(
                    plan_job_table.c.plan_id == plan_id, plan_job_table.c.job_id.in_([r["job_id"] for r in job_rows])
                )
            )
        }
        new = []
        for row in job_rows:
            values = {c: row.get(c) for c in columns}
            if row["job_id"] in have:
                conn.execute(
                    update(plan_job_table)
                    .where(plan_job_table.c.plan_id == plan_id, plan_job_table.c.job_id == row["job_id"])
                    .values(**values)
                )
            else:
                new.append({**values, "plan_id": plan_id})
        if new:
            conn.execute(insert(plan_job_table), new)
        return plan_id

    def get_plans(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent plans, newest first, each with its ``jobs``."""
        with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
            plans = [
                dict(r)
                for r in conn.execute(select(plan_table).order_by(plan_table.c.id.desc()).limit(limit)).mappings()
            ]
            if plans:
                jobs = conn.execute(
                    select(plan_job_table)
                    .where(plan_job_table.c.plan_id.in_([p["id"] for p in plans]))
                    .order_by(plan_job_table.c.id)
                ).mappings()
                by_plan: dict[int, list] = {}
                for job in jobs:
                    by_plan.setdefault(job["plan_id"], []).append(_job(job))
                for plan in plans:
                    plan["jobs"] = by_plan.get(plan["id"], [])
        return plans

    def latest_plan(self, conn=None) -> dict[str, Any] | None:
        """The newest plan with all its job rows (in recorded order), or ``None`` before the first plan."""
        with self._reading(conn) as c:  # type: ignore[attr-defined]
            plan = c.execute(select(plan_table).order_by(plan_table.c.id.desc()).limit(1)).mappings().first()
            if plan is None:
                return None
            jobs = (
                c.execute(
                    select(plan_job_table).where(plan_job_table.c.plan_id == plan["id"]).order_by(plan_job_table.c.id)
                )
                .mappings()
                .all()
            )
        return {**dict(plan), "jobs": [_job(j) for j in jobs]}

    def previous_starts(self, conn=None) -> dict[str, float]:
        """Planned start per waiting job of the newest plan: the promises the next plan keeps when near."""
        newest = select(func.max(plan_table.c.id)).scalar_subquery()
        query = select(plan_job_table.c.job_id, plan_job_table.c.planned_start_s).where(
            plan_job_table.c.plan_id == newest,
            plan_job_table.c.planned_start_s.is_not(None),
            plan_job_table.c.decision != _RUNNING,
        )
        with self._reading(conn) as c:  # type: ignore[attr-defined]
            return {job_id: float(start) for job_id, start in c.execute(query)}

    def plan_summaries(self, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        """The most recent plans without their jobs, newest first, each with ``decisions`` (count per decision)."""
        with self._reading(conn) as c:  # type: ignore[attr-defined]
            plans = [
                dict(r) for r in c.execute(select(plan_table).order_by(plan_table.c.id.desc()).limit(limit)).mappings()
            ]
            if plans:
                counts = c.execute(
                    select(plan_job_table.c.plan_id, plan_job_table.c.decision, func.count())
                    .where(plan_job_table.c.plan_id.in_([p["id"] for p in plans]))
                    .group_by(plan_job_table.c.plan_id, plan_job_table.c.decision)
                ).all()
                by_plan: dict[int, dict[str, int]] = {}
                for plan_id, decision, n in counts:
                    per_plan = by_plan.setdefault(plan_id, {})
                    name = stored_decision(decision)
                    per_plan[name] = per_plan.get(name, 0) + int(n)
                for plan in plans:
                    plan["decisions"] = by_plan.get(plan["id"], {})
        return plans

    def job_history(self, job_id: str, limit: int = 50, conn=None) -> list[dict[str, Any]]:
        """One job's rows in the most recent plans that considered it, newest first, with the plan's time."""
        query = (
            select(plan_job_table, plan_table.c.created_s)
            .join(plan_table, plan_table.c.id == plan_job_table.c.plan_id)
            .where(plan_job_table.c.job_id == job_id)
            .order_by(plan_job_table.c.plan_id.desc())
            .limit(limit)
        )
        with self._reading(conn) as c:  # type: ignore[attr-defined]
            return [_job(r) for r in c.execute(query).mappings()]

    def newest_plan_id(self) -> int | None:
        """Id of the newest stored plan (``None`` before the first)."""
        with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
            plan_id = conn.execute(select(func.max(plan_table.c.id))).scalar()
        return int(plan_id) if plan_id is not None else None

    def newest_plan(self) -> tuple[int | None, dict[str, dict[str, Any]]]:
        """Id of the newest plan and the decisions it stored for waiting jobs (``{job_id: row}``, no running ones)."""
        columns = (
            plan_job_table.c.job_id,
            plan_job_table.c.decision,
            plan_job_table.c.gpu_type,
            plan_job_table.c.pool,
            plan_job_table.c.weight,
            plan_job_table.c.planned_start_s,
        )
        with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
            plan_id = conn.execute(select(func.max(plan_table.c.id))).scalar()
            if plan_id is None:
                return None, {}
            rows = (
                conn.execute(
                    select(*columns).where(plan_job_table.c.plan_id == plan_id, plan_job_table.c.decision != _RUNNING)
                )
                .mappings()
                .all()
            )
        return int(plan_id), {r["job_id"]: _job(r) for r in rows}

    def confirm_plan(self, plan_id: int, now_s: float) -> bool:
        """The heartbeat: mark plan ``plan_id`` as still current at ``now_s``, if it is still the newest.

        ``False`` if another plan (a fail-open release, another run) was stored since: the caller
        stores its plan instead.
        """
        try:
            with self.get_engine().begin() as conn:  # type: ignore[attr-defined]
                if conn.execute(select(func.max(plan_table.c.id))).scalar() != plan_id:
                    return False
                conn.execute(update(plan_table).where(plan_table.c.id == plan_id).values(checked_s=now_s))
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(
                f"confirming plan {plan_id} failed: {type(error).__name__}: {error}"
            ) from error
        return True

    def prune_plans(self, older_than_s: float, keep_newest: int) -> int:
        """Delete plans made before ``older_than_s`` (and their job rows), always keeping the newest
        ``keep_newest`` (what the review page's history shows). Returns the plans deleted."""
        with self.get_engine().begin() as conn:  # type: ignore[attr-defined]
            newest = [
                r for (r,) in conn.execute(select(plan_table.c.id).order_by(plan_table.c.id.desc()).limit(keep_newest))
            ]
            old = select(func.max(plan_table.c.id)).where(plan_table.c.created_s < older_than_s)
            last_old = conn.execute(old).scalar()
            if last_old is None:
                return 0
            cutoff = int(last_old)
            if keep_newest:
                if len(newest) < keep_newest:
                    return 0  # every plan is one of the newest kept
                cutoff = min(cutoff, int(newest[-1]) - 1)
            if cutoff < 1:
                return 0
            conn.execute(plan_job_table.delete().where(plan_job_table.c.plan_id <= cutoff))
            return int(conn.execute(plan_table.delete().where(plan_table.c.id <= cutoff)).rowcount or 0)
