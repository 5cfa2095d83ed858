"""The hook's reads of GPU work: one read transaction per planning cycle, per watchdog check, per cheap look."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, POOL_PREFIX
from airflow_gpu_scheduler.cycle.serialized_dag import (
    declarations_from_serialized_dag,
    default_weights_from_serialized_dag,
)
from airflow_gpu_scheduler.cycle.snapshot import FailOpenState, GpuTaskInstance, GpuWorkSnapshot, JobKey
from airflow_gpu_scheduler.db.models import plan_table
from airflow_gpu_scheduler.db.records import Method
from airflow_gpu_scheduler.hooks.connection import GpuSchedulerMetadataError
from airflow_gpu_scheduler.hooks.tables import (
    RELEASABLE_STATES,
    dag,
    dag_run,
    serialized_dag,
    slot_pool,
    task_instance,
    to_epoch,
)


class MetadataCollector:
    """Collection queries of :class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`.

    Expects ``get_engine``, ``history_rows``, ``log`` and the declaration caches ``_declarations``
    and ``_default_weights`` (by DAG version id).
    """

    history_rows: int
    _declarations: dict[Any, dict[str, Any]]
    _default_weights: dict[Any, dict[str, int]]

    def collect_gpu_work(self, now_s: float | None = None) -> GpuWorkSnapshot:
        """Read GPU work in one read transaction.

        Waiting: ``scheduled`` task instances in the intake pool or a ``gpu_*`` pool, in running
        dag runs of unpaused DAGs. Task instances in state ``None`` are not planned: their
        upstream tasks have not finished, so they could not start even if GPUs were kept for
        them; they stay held in the intake pool and are planned once the scheduler marks
        them ``scheduled`` (pools are only checked at queueing, so that happens at once).
        Running: ``queued`` or ``running`` ones in ``gpu_*`` pools (they hold GPUs). Finished:
        the ``history_rows`` most recently ended ``success`` or ``failed`` ones in ``gpu_*`` pools
        (no time filter), of which the successes teach estimates and the streaming-pool ones,
        failed too, the streaming reservation.
        """
        now_s = time.time() if now_s is None else now_s
        ti, dr = task_instance, dag_run
        gpu_pool = or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True))
        live = (
            select(ti, dr.c.queued_at.label("dr_queued_at"), dr.c.start_date.label("dr_start_date"))
            .join(dr, and_(dr.c.dag_id == ti.c.dag_id, dr.c.run_id == ti.c.run_id))
            .join(dag, dag.c.dag_id == ti.c.dag_id)
            .where(gpu_pool, ti.c.state.in_(("scheduled", "queued", "running")))
            .where(or_(ti.c.state != "scheduled", and_(dr.c.state == "running", dag.c.is_paused == False)))  # noqa: E712 - SQL, not Python
        )
        finished = (
            select(ti)
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state.in_(("success", "failed")))
            .where(ti.c.end_date.is_not(None), ti.c.start_date.is_not(None))
            .order_by(ti.c.end_date.desc())
            .limit(self.history_rows)
        )
        try:
            with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
                live_rows = conn.execute(live).mappings().all()
                finished_rows = conn.execute(finished).mappings().all()
                versions = {r["dag_version_id"] for r in (*live_rows, *finished_rows) if r["dag_version_id"]}
                self._load_declarations(conn, versions - set(self._declarations))
                slots = dict(conn.execute(select(slot_pool.c.pool, slot_pool.c.slots)).all())
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"reading GPU work failed: {type(error).__name__}: {error}") from error

        waiting, running = [], []
        for row in live_rows:
            ready = to_epoch(row["scheduled_dttm"]) or to_epoch(row["dr_start_date"]) or to_epoch(row["dr_queued_at"])
            item = self._task_instance(row, ready)
            if row["state"] == "scheduled":
                waiting.append(item)
            elif row["pool"] != INTAKE_POOL:
                running.append(item)
        done = [
            self._task_instance(row, None)
            for row in finished_rows
            if row["state"] == "success" or row["pool"].endswith("_streaming")
        ]
        return GpuWorkSnapshot(now_s, tuple(waiting), tuple(running), tuple(done), slots)

    def _task_instance(self, row: Mapping[str, Any], ready_s: float | None) -> GpuTaskInstance:
        key = JobKey(row["dag_id"], row["run_id"], row["task_id"], int(row["map_index"]))
        declaration = self._declarations.get(row["dag_version_id"], {}).get(row["task_id"])
        duration = row["duration"]
        return GpuTaskInstance(
            key=key,
            state=row["state"],
            pool=row["pool"],
            pool_slots=int(row["pool_slots"]),
            priority_weight=row["priority_weight"],
            ready_s=ready_s,
            start_s=to_epoch(row["start_date"]) or to_epoch(row["queued_dttm"]),
            end_s=to_epoch(row["end_date"]),
            duration_s=float(duration) if duration is not None else None,
            declaration=declaration,
            queue=row["queue"],
            default_weight=self._default_weights.get(row["dag_version_id"], {}).get(row["task_id"]),
        )

    def _load_declarations(self, conn, versions: Iterable[Any]) -> None:
        versions = list(versions)
        if not versions:
            return
        query = select(serialized_dag).where(serialized_dag.c.dag_version_id.in_(versions))
        for version, data, compressed in conn.execute(query).all():
            if data is None and compressed is not None:
                data = zlib.decompress(compressed)
            if isinstance(data, (bytes, str)):
                data = json.loads(data)
            try:
                self._declarations[version] = declarations_from_serialized_dag(data or {})
                self._default_weights[version] = default_weights_from_serialized_dag(data or {})
            except (AttributeError, TypeError, KeyError) as error:
                self.log.warning("Could not read declarations of DAG version %s: %s", version, error)  # type: ignore[attr-defined]
                self._declarations[version] = {}
                self._default_weights[version] = {}

    def gpu_work_fingerprint(self) -> tuple:
        """A cheap summary of GPU work that changes when a GPU task instance arrives, is queued, starts or ends.

        One aggregate query (a row per pool and state), so the planning task can look every second
        without reading the task instances themselves; anything it misses the next full cycle reads.
        """
        ti = task_instance
        gpu_pool = or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True))
        query = (
            select(
                ti.c.pool,
                ti.c.state,
                func.count(),
                func.max(ti.c.scheduled_dttm),
                func.max(ti.c.queued_dttm),
                func.max(ti.c.start_date),
            )
            .where(gpu_pool, ti.c.state.in_(("scheduled", "queued", "running")))
            .group_by(ti.c.pool, ti.c.state)
        )
        try:
            with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
                return tuple(sorted(tuple(str(v) for v in row) for row in conn.execute(query).all()))
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"reading GPU work failed: {type(error).__name__}: {error}") from error

    def collect_fail_open_state(self, now_s: float | None = None) -> FailOpenState:
        """What the fail-open watchdog needs, in one read transaction.

        Held: task instances in the intake pool not yet handed to an executor (state ``None``,
        ``scheduled``, up for retry or reschedule). Released: ``scheduled`` ones in ``gpu_*``
        pools (they carry plan weights). Busy: GPUs taken per pool by ``queued``/``running``
        task instances. And when the planner last applied a plan, and when work was last
        released without one.
        """
        now_s = time.time() if now_s is None else now_s
        ti, dr = task_instance, dag_run
        not_dispatched = or_(ti.c.state.is_(None), ti.c.state.in_(RELEASABLE_STATES))
        waiting = (
            select(ti)
            .join(dr, and_(dr.c.dag_id == ti.c.dag_id, dr.c.run_id == ti.c.run_id))
            .where(dr.c.state.in_(("queued", "running")))
            .where(
                or_(
                    and_(ti.c.pool == INTAKE_POOL, not_dispatched),
                    and_(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state == "scheduled"),
                )
            )
        )
        busy = (
            select(ti.c.pool, func.sum(ti.c.pool_slots))
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state.in_(("queued", "running")))
            .group_by(ti.c.pool)
        )
        # A plan confirmed unchanged by a later cycle is as good as a new one: the planner is alive.
        last = select(func.max(func.coalesce(plan_table.c.checked_s, plan_table.c.created_s)))
        try:
            with self.get_engine().connect() as conn:  # type: ignore[attr-defined]
                rows = conn.execute(waiting).mappings().all()
                versions = {r["dag_version_id"] for r in rows if r["dag_version_id"]}
                self._load_declarations(conn, versions - set(self._declarations))
                busy_slots = {pool: int(n or 0) for pool, n in conn.execute(busy).all()}
                last_plan = conn.execute(last.where(plan_table.c.method != Method.FAIL_OPEN.value)).scalar()
                last_release = conn.execute(last.where(plan_table.c.method == Method.FAIL_OPEN.value)).scalar()
                slots = dict(conn.execute(select(slot_pool.c.pool, slot_pool.c.slots)).all())
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"reading held GPU work failed: {type(error).__name__}: {error}") from error
        held: list[GpuTaskInstance] = []
        released: list[GpuTaskInstance] = []
        for row in rows:
            item = self._task_instance(row, to_epoch(row["scheduled_dttm"]))
            (held if row["pool"] == INTAKE_POOL else released).append(item)
        return FailOpenState(
            now_s,
            tuple(held),
            tuple(released),
            busy_slots,
            slots,
            float(last_plan) if last_plan is not None else None,
            float(last_release) if last_release is not None else None,
        )

    def gpu_pool_intervals(self, since_s: float, conn=None, max_rows: int = 20000) -> list[dict[str, Any]]:
        """Task instances that held GPU-pool slots since ``since_s``: pool, slots, start_s, end_s (None: running).

        The most recently started ``max_rows`` are read and filtered here: timestamps are compared
        in Python because SQLite stores them as text. ``conn``: the review page's session connection.
        """
        ti = task_instance
        query = (
            select(ti.c.pool, ti.c.pool_slots, ti.c.state, ti.c.start_date, ti.c.end_date)
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.pool != INTAKE_POOL)
            .where(ti.c.start_date.is_not(None))
            .order_by(ti.c.start_date.desc())
            .limit(max_rows)
        )
        out = []
        with self._reading(conn) as c:  # type: ignore[attr-defined]
            for row in c.execute(query).mappings():
                start, end = to_epoch(row["start_date"]), to_epoch(row["end_date"])
                if end is None and row["state"] not in ("running", "queued"):
                    continue  # never finished and not running (e.g. removed): holds nothing now
                if end is not None and end < since_s:
                    continue
                out.append({"pool": row["pool"], "gpus": int(row["pool_slots"] or 1), "start_s": start, "end_s": end})
        return out
