"""Hook owning every SQL statement the GPU scheduler runs against Airflow's metadata database.

Task code cannot use Airflow's ORM session in Airflow 3, so the hook opens its own
SQLAlchemy engine from an Airflow connection (default conn id ``gpu_scheduler_metadata``)
and speaks SQLAlchemy Core to the few tables it needs. It reads GPU task instances,
their declarations (from ``serialized_dag``, plain JSON) and their history, and it
writes pool slots and task-instance pool/priority weight/queue in one short transaction.
Everything is keyed on ``(dag_id, run_id, task_id, map_index)``: a task instance's id
changes on every retry or clear.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook
from sqlalchemy import Column, MetaData, Table, and_, create_engine, func, insert, or_, select, tuple_, update
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler import config
from airflow_gpu_scheduler.core.levers import INTAKE_POOL, POOL_PREFIX, Assignment, Levers
from airflow_gpu_scheduler.declare import declarations_from_serialized_dag, default_weights_from_serialized_dag
from airflow_gpu_scheduler.hooks import connection_url
from airflow_gpu_scheduler.models import plan_job_table, plan_table

if TYPE_CHECKING:
    from airflow_gpu_scheduler.hooks.notes import TaskInstanceNotes

#: Key of the PostgreSQL advisory lock that lets one planning cycle run at a time ("GPUSCHED").
PLANNING_LOCK_KEY = 0x4750555343484544
#: Plan method recorded when held work was handed back to Airflow's own order.
FAIL_OPEN_METHOD = "fail_open"
#: States in which a task instance has not been handed to an executor yet, so its pool and
#: weight still matter (``None``: upstream not done yet).
RELEASABLE_STATES = ("scheduled", "up_for_retry", "up_for_reschedule")

# Only the columns the scheduler reads or writes. Timestamps are left untyped and parsed
# in Python: SQLite returns them as text, PostgreSQL as aware datetimes.
_airflow = MetaData()
_task_instance = Table(
    "task_instance", _airflow,
    *(Column(name) for name in (
        "dag_id", "run_id", "task_id", "map_index", "state", "pool", "pool_slots", "priority_weight",
        "start_date", "end_date", "duration", "scheduled_dttm", "queued_dttm", "try_number", "dag_version_id",
        "queue",
    )),
)
_dag_run = Table("dag_run", _airflow, *(Column(n) for n in ("dag_id", "run_id", "state", "queued_at", "start_date")))
_dag = Table("dag", _airflow, Column("dag_id"), Column("is_paused"))
_serialized_dag = Table("serialized_dag", _airflow, Column("dag_version_id"), Column("data"), Column("data_compressed"))
_slot_pool = Table("slot_pool", _airflow, *(Column(n) for n in ("pool", "slots", "description", "include_deferred")))
#: Airflow's tables and the columns of them the hook reads or writes (checked by ``schema_check``).
AIRFLOW_TABLES = _airflow


class GpuSchedulerMetadataError(RuntimeError):
    """The metadata database cannot be reached or used; the message never contains a password."""


def to_epoch(value: Any) -> float | None:
    """Epoch seconds of a timestamp as returned by SQLite (text, UTC) or PostgreSQL (datetime)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.timestamp()
    raise TypeError(f"not a timestamp: {value!r}")


def is_gpu_pool(pool: str | None) -> bool:
    """The only pools this provider ever writes: the intake pool and ``gpu_*`` pools."""
    return bool(pool) and (pool == INTAKE_POOL or pool.startswith(POOL_PREFIX))


@dataclass(frozen=True)
class TaskInstanceKey:
    """The stable identity of a task instance (its row id changes on retry and clear)."""

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


@dataclass(frozen=True)
class GpuTaskInstance:
    """One task instance in a GPU pool, as read from the metadata database.

    :param declaration: the raw ``gpu_scheduler`` declaration of its task, or ``None`` if the
        task has none (or its serialized DAG could not be read).
    """

    key: TaskInstanceKey
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


class GpuSchedulerMetadataHook(BaseHook):
    """
    Reads GPU work from, and writes plan levers to, Airflow's metadata database.

    Its connection type is ``gpu_scheduler_metadata``: Host names the SQLAlchemy driver
    (``postgresql+psycopg2://db.example.com``), Schema the database (SQLite: no Host, Schema is the
    file's absolute path), extras go to the driver (``sslmode``). ``airflow connections add
    gpu_scheduler_metadata --conn-uri "gpu-scheduler-metadata://$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"``
    makes one from Airflow's own database URL. Connections of type ``postgres``, ``mysql``,
    ``sqlite`` or a driver name (``postgresql+psycopg2``) work too, and any type may carry a full
    URL in its extra as ``{"sqlalchemy_url": "..."}``; see
    :mod:`airflow_gpu_scheduler.hooks.connection_url`.

    :param gpu_scheduler_conn_id: Airflow connection to the metadata database
        (default: ``[gpu_scheduler] metadata_conn_id``, ``gpu_scheduler_metadata``).
    :param engine_kwargs: extra keyword arguments for :func:`sqlalchemy.create_engine`.
    :param history_rows: finished GPU task instances read for estimates
        (default: ``[gpu_scheduler] history_rows``).
    """

    conn_name_attr = "gpu_scheduler_conn_id"
    default_conn_name = "gpu_scheduler_metadata"
    conn_type = connection_url.CONN_TYPE
    hook_name = "GPU Scheduler metadata database"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict:
        """The connection form: every field applies; labels say the host carries the driver."""
        return connection_url.UI_FIELD_BEHAVIOUR

    def __init__(self, gpu_scheduler_conn_id: str | None = None, engine_kwargs: dict | None = None,
                 history_rows: int | None = None) -> None:
        super().__init__()
        self.gpu_scheduler_conn_id = gpu_scheduler_conn_id or config.get_str("metadata_conn_id")
        self.engine_kwargs = engine_kwargs or {}
        self.history_rows = history_rows or config.get_int("history_rows")
        self._engine: Engine | None = None
        self._declarations: dict[Any, dict[str, Any]] = {}
        self._default_weights: dict[Any, dict[str, int]] = {}

    # ------------------------------------------------------------------ connection

    def sqlalchemy_url(self) -> URL:
        """The SQLAlchemy URL of the connection (log it only via ``render_as_string(hide_password=True)``)."""
        try:
            return connection_url.sqlalchemy_url(self.get_connection(self.gpu_scheduler_conn_id))
        except connection_url.MetadataConnectionError as error:
            raise GpuSchedulerMetadataError(str(error)) from None

    def get_engine(self) -> Engine:
        """The hook's own engine (created once); checks the database is reachable."""
        if self._engine is None:
            url = self.sqlalchemy_url()
            kwargs = dict(self.engine_kwargs)
            kwargs.setdefault("pool_pre_ping", True)
            if url.get_backend_name() == "sqlite":
                # The scheduler writes the same file; wait for its lock rather than fail.
                kwargs.setdefault("connect_args", {"timeout": 30})
            engine = create_engine(url, **kwargs)
            try:
                with engine.connect():
                    pass
            except SQLAlchemyError as error:
                engine.dispose()
                raise GpuSchedulerMetadataError(
                    f"cannot reach the metadata database of connection {self.gpu_scheduler_conn_id!r} "
                    f"({url.render_as_string(hide_password=True)}): {type(error.orig or error).__name__}: "
                    f"{str(error.orig or error).strip().splitlines()[0] if str(error.orig or error).strip() else ''}"
                ) from None
            self._engine = engine
        return self._engine

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def test_connection(self) -> tuple[bool, str]:
        """The UI's Test button: reach the database and check it is an Airflow schema the provider knows."""
        from airflow_gpu_scheduler.schema_check import check_metadata_schema

        try:
            check_metadata_schema(self)
        except GpuSchedulerMetadataError as error:
            return False, str(error)
        url = self.get_engine().url.render_as_string(hide_password=True)
        return True, f"Connection successfully tested: {url} is an Airflow metadata database with the plan tables"

    # ------------------------------------------------------------------ collect

    def collect_gpu_work(self, now_s: float | None = None) -> GpuWorkSnapshot:
        """Read GPU work in one read transaction.

        Waiting: ``scheduled`` task instances in the intake pool or a ``gpu_*`` pool, in running
        dag runs of unpaused DAGs. Task instances in state ``None`` are not planned: their
        upstream tasks have not finished, so they could not start even if GPUs were kept for
        them; they stay held in the intake pool and are planned once the scheduler marks
        them ``scheduled`` (pools are only checked at queueing, so that happens at once). Running: ``queued`` or ``running`` ones in ``gpu_*`` pools
        (they hold GPUs). Finished: the most recent ``success`` (for estimates) and the
        streaming-pool instances of the last hour (for the streaming reservation).
        """
        now_s = time.time() if now_s is None else now_s
        ti, dr = _task_instance, _dag_run
        gpu_pool = or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True))
        live = (
            select(ti, dr.c.queued_at.label("dr_queued_at"), dr.c.start_date.label("dr_start_date"))
            .join(dr, and_(dr.c.dag_id == ti.c.dag_id, dr.c.run_id == ti.c.run_id))
            .join(_dag, _dag.c.dag_id == ti.c.dag_id)
            .where(gpu_pool, ti.c.state.in_(("scheduled", "queued", "running")))
            .where(or_(ti.c.state != "scheduled", and_(dr.c.state == "running", _dag.c.is_paused == False)))
        )
        finished = (
            select(ti)
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state.in_(("success", "failed")))
            .where(ti.c.end_date.is_not(None), ti.c.start_date.is_not(None))
            .order_by(ti.c.end_date.desc())
            .limit(self.history_rows)
        )
        try:
            with self.get_engine().connect() as conn:
                live_rows = conn.execute(live).mappings().all()
                finished_rows = conn.execute(finished).mappings().all()
                versions = {r["dag_version_id"] for r in (*live_rows, *finished_rows) if r["dag_version_id"]}
                self._load_declarations(conn, versions - set(self._declarations))
                slots = dict(conn.execute(select(_slot_pool.c.pool, _slot_pool.c.slots)).all())
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
        done = [self._task_instance(row, None) for row in finished_rows
                if row["state"] == "success" or row["pool"].endswith("_streaming")]
        return GpuWorkSnapshot(now_s, tuple(waiting), tuple(running), tuple(done), slots)

    def _task_instance(self, row: Mapping[str, Any], ready_s: float | None) -> GpuTaskInstance:
        key = TaskInstanceKey(row["dag_id"], row["run_id"], row["task_id"], int(row["map_index"]))
        declaration = self._declarations.get(row["dag_version_id"], {}).get(row["task_id"])
        duration = row["duration"]
        return GpuTaskInstance(
            key=key, state=row["state"], pool=row["pool"], pool_slots=int(row["pool_slots"]),
            priority_weight=row["priority_weight"], ready_s=ready_s,
            start_s=to_epoch(row["start_date"]) or to_epoch(row["queued_dttm"]),
            end_s=to_epoch(row["end_date"]), duration_s=float(duration) if duration is not None else None,
            declaration=declaration, queue=row["queue"],
            default_weight=self._default_weights.get(row["dag_version_id"], {}).get(row["task_id"]),
        )

    def _load_declarations(self, conn, versions: Iterable[Any]) -> None:
        versions = list(versions)
        if not versions:
            return
        query = select(_serialized_dag).where(_serialized_dag.c.dag_version_id.in_(versions))
        for version, data, compressed in conn.execute(query).all():
            if data is None and compressed is not None:
                data = zlib.decompress(compressed)
            if isinstance(data, (bytes, str)):
                data = json.loads(data)
            try:
                self._declarations[version] = declarations_from_serialized_dag(data or {})
                self._default_weights[version] = default_weights_from_serialized_dag(data or {})
            except (AttributeError, TypeError, KeyError) as error:
                self.log.warning("Could not read declarations of DAG version %s: %s", version, error)
                self._declarations[version] = {}
                self._default_weights[version] = {}

    # ------------------------------------------------------------------ apply

    def apply_levers(
        self,
        levers: Levers,
        waiting: Sequence[GpuTaskInstance],
        record: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
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
        :param record: the plan's rows for ``gpu_sched_plan`` and ``gpu_sched_plan_job``; stored in
            the same transaction, so a plan is applied if and only if it is recorded.
        :param notes: the plan's task-instance notes (:mod:`airflow_gpu_scheduler.hooks.notes`), written in
            the same transaction.
        :param amend: ``(plan_id, plan values, job rows)``: instead of storing a new plan, bring stored plan
            ``plan_id`` up to date (the same solve, applied further: jobs it released since, jobs it has
            not placed yet), in the same transaction; see :meth:`amend_plan`.
        """
        bad_pools = [p for p in levers.pool_slots if not is_gpu_pool(p)]
        bad_pools += [a.pool for a in levers.assignments.values() if not is_gpu_pool(a.pool)]
        if bad_pools:
            raise ValueError(f"refusing to write pools outside the GPU pools: {sorted(set(bad_pools))}")
        by_job = {t.key.job_id: t for t in waiting}
        changes = []
        for job_id, assignment in levers.assignments.items():
            ti = by_job.get(job_id)
            if ti is None or not is_gpu_pool(ti.pool):
                continue
            if (ti.pool != assignment.pool or ti.priority_weight != assignment.weight
                    or (assignment.queue is not None and ti.queue != assignment.queue)):
                changes.append((ti, assignment))
        pools = sorted(set(levers.pool_slots) | {a.pool for _, a in changes})
        moved: list[str] = []
        skipped: list[str] = []
        plan_id = None
        try:
            with self.get_engine().begin() as conn:
                existing = _close_pools(conn, pools)
                moved, skipped = _move_task_instances(conn, changes, _task_instance.c.state == "scheduled")
                for pool, slots in levers.pool_slots.items():
                    conn.execute(update(_slot_pool).where(_slot_pool.c.pool == pool).values(slots=int(slots)))
                # Pools that were closed above but get no new value keep their old slots.
                for pool in pools:
                    if pool not in levers.pool_slots and pool in existing:
                        conn.execute(update(_slot_pool).where(_slot_pool.c.pool == pool).values(slots=existing[pool]))
                if record is not None:
                    plan_row, job_rows = record
                    plan_id = self._insert_plan(conn, {"moved": len(moved), **plan_row}, job_rows)
                if amend is not None:
                    plan_id = self._amend_plan(conn, *amend)
                if notes is not None:
                    notes.write(conn)
        except SQLAlchemyError as error:
            hint = " (are the provider tables missing? run 'airflow db migrate')" if record is not None else ""
            raise GpuSchedulerMetadataError(
                f"applying the plan failed and was rolled back, nothing was changed{hint}: "
                f"{type(error).__name__}: {error}"
            ) from error
        return ApplyResult(dict(levers.pool_slots), tuple(moved), tuple(skipped), plan_id)

    # ------------------------------------------------------------------ watch between cycles

    def gpu_work_fingerprint(self) -> tuple:
        """A cheap summary of GPU work that changes when a GPU task instance arrives, is queued, starts or ends.

        One aggregate query (a row per pool and state), so the planning task can look every second
        without reading the task instances themselves; anything it misses the next full cycle reads.
        """
        ti = _task_instance
        gpu_pool = or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True))
        query = (
            select(ti.c.pool, ti.c.state, func.count(), func.max(ti.c.scheduled_dttm), func.max(ti.c.queued_dttm),
                   func.max(ti.c.start_date))
            .where(gpu_pool, ti.c.state.in_(("scheduled", "queued", "running")))
            .group_by(ti.c.pool, ti.c.state)
        )
        try:
            with self.get_engine().connect() as conn:
                return tuple(sorted(tuple(str(v) for v in row) for row in conn.execute(query).all()))
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"reading GPU work failed: {type(error).__name__}: {error}") from error

    # ------------------------------------------------------------------ plan storage that stays bounded

    def newest_plan_id(self) -> int | None:
        """Id of the newest stored plan (``None`` before the first)."""
        with self.get_engine().connect() as conn:
            plan_id = conn.execute(select(func.max(plan_table.c.id))).scalar()
        return int(plan_id) if plan_id is not None else None

    def newest_plan(self) -> tuple[int | None, dict[str, dict[str, Any]]]:
        """Id of the newest plan and the decisions it stored for waiting jobs (``{job_id: row}``, no running ones)."""
        columns = (plan_job_table.c.job_id, plan_job_table.c.decision, plan_job_table.c.gpu_type,
                   plan_job_table.c.pool, plan_job_table.c.weight, plan_job_table.c.planned_start_s)
        with self.get_engine().connect() as conn:
            plan_id = conn.execute(select(func.max(plan_table.c.id))).scalar()
            if plan_id is None:
                return None, {}
            rows = conn.execute(select(*columns).where(plan_job_table.c.plan_id == plan_id,
                                                       plan_job_table.c.decision != "running")).mappings().all()
        return int(plan_id), {r["job_id"]: dict(r) for r in rows}

    def confirm_plan(self, plan_id: int, now_s: float) -> bool:
        """The heartbeat: mark plan ``plan_id`` as still current at ``now_s``, if it is still the newest.

        ``False`` if another plan (a fail-open release, another run) was stored since: the caller
        stores its plan instead.
        """
        try:
            with self.get_engine().begin() as conn:
                if conn.execute(select(func.max(plan_table.c.id))).scalar() != plan_id:
                    return False
                conn.execute(update(plan_table).where(plan_table.c.id == plan_id).values(checked_s=now_s))
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"confirming plan {plan_id} failed: {type(error).__name__}: {error}") \
                from error
        return True

    def prune_plans(self, older_than_s: float, keep_newest: int) -> int:
        """Delete plans made before ``older_than_s`` (and their job rows), always keeping the newest
        ``keep_newest`` (what the review page's history shows). Returns the plans deleted."""
        with self.get_engine().begin() as conn:
            newest = [r for (r,) in conn.execute(select(plan_table.c.id).order_by(plan_table.c.id.desc())
                                                 .limit(keep_newest))]
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

    # ------------------------------------------------------------------ one planner at a time

    @contextmanager
    def planning_lock(self) -> Iterator[bool]:
        """Hold the planners' lock for one cycle; yields ``False`` at once if another run holds it.

        Two runs (a manual trigger during a scheduled one, or the fail-open watchdog) must not
        interleave collect-plan-apply: the later would apply a plan made from a stale snapshot.
        PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection of its
        own, closed afterwards, so the lock dies with the connection even if unlocking fails or
        the process is killed. MySQL: ``GET_LOCK(name, 0)``. SQLite (one host by nature): an
        exclusive ``flock`` on a file beside the database, released by the kernel when the
        process dies. Never waits: the loser skips its cycle.
        """
        engine = self.get_engine()
        backend = engine.dialect.name
        if backend in ("postgresql", "mysql"):
            conn = engine.connect()
            try:
                if backend == "postgresql":
                    got = bool(conn.execute(select(func.pg_try_advisory_lock(PLANNING_LOCK_KEY))).scalar())
                else:
                    got = conn.execute(select(func.get_lock("airflow_gpu_scheduler", 0))).scalar() == 1
                conn.commit()  # a session lock outlives the transaction; do not sit idle in one
                yield got
            finally:
                conn.invalidate()  # closes the DB connection: the session lock goes with it
                conn.close()
            return
        database = engine.url.database
        if backend != "sqlite" or not database or database == ":memory:":
            yield True
            return
        fd = os.open(f"{database}.gpu-scheduler.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ fail-open

    def collect_fail_open_state(self, now_s: float | None = None) -> FailOpenState:
        """What the fail-open watchdog needs, in one read transaction.

        Held: task instances in the intake pool not yet handed to an executor (state ``None``,
        ``scheduled``, up for retry or reschedule). Released: ``scheduled`` ones in ``gpu_*``
        pools (they carry plan weights). Busy: GPUs taken per pool by ``queued``/``running``
        task instances. And when the planner last applied a plan, and when work was last
        released without one.
        """
        now_s = time.time() if now_s is None else now_s
        ti, dr = _task_instance, _dag_run
        not_dispatched = or_(ti.c.state.is_(None), ti.c.state.in_(RELEASABLE_STATES))
        waiting = (
            select(ti)
            .join(dr, and_(dr.c.dag_id == ti.c.dag_id, dr.c.run_id == ti.c.run_id))
            .where(dr.c.state.in_(("queued", "running")))
            .where(or_(and_(ti.c.pool == INTAKE_POOL, not_dispatched),
                       and_(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state == "scheduled")))
        )
        busy = (
            select(ti.c.pool, func.sum(ti.c.pool_slots))
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.state.in_(("queued", "running")))
            .group_by(ti.c.pool)
        )
        # A plan confirmed unchanged by a later cycle is as good as a new one: the planner is alive.
        last = select(func.max(func.coalesce(plan_table.c.checked_s, plan_table.c.created_s)))
        try:
            with self.get_engine().connect() as conn:
                rows = conn.execute(waiting).mappings().all()
                versions = {r["dag_version_id"] for r in rows if r["dag_version_id"]}
                self._load_declarations(conn, versions - set(self._declarations))
                busy_slots = {pool: int(n or 0) for pool, n in conn.execute(busy).all()}
                last_plan = conn.execute(last.where(plan_table.c.method != FAIL_OPEN_METHOD)).scalar()
                last_release = conn.execute(last.where(plan_table.c.method == FAIL_OPEN_METHOD)).scalar()
                slots = dict(conn.execute(select(_slot_pool.c.pool, _slot_pool.c.slots)).all())
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(f"reading held GPU work failed: {type(error).__name__}: {error}") from error
        held, released = [], []
        for row in rows:
            item = self._task_instance(row, to_epoch(row["scheduled_dttm"]))
            (held if row["pool"] == INTAKE_POOL else released).append(item)
        return FailOpenState(now_s, tuple(held), tuple(released), busy_slots, slots,
                             float(last_plan) if last_plan is not None else None,
                             float(last_release) if last_release is not None else None)

    def release_held(
        self,
        moves: Mapping[str, Assignment],
        task_instances: Sequence[GpuTaskInstance],
        pool_slots: Mapping[str, int],
        record: tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
    ) -> ApplyResult:
        """Fail-open: write pools and weights for held work in ONE transaction, like :meth:`apply_levers`,
        but for task instances in any not-yet-dispatched state (``None`` included), so work whose
        upstream is still running is not caught in the intake pool later.

        Only ``gpu_*`` pools are written; a task instance is moved only if it is still in the
        pool it was read in and still not dispatched.
        """
        bad = sorted({p for p in pool_slots if not is_gpu_pool(p)} | {a.pool for a in moves.values()
                                                                       if not is_gpu_pool(a.pool)})
        if bad:
            raise ValueError(f"refusing to write pools outside the GPU pools: {bad}")
        by_job = {t.key.job_id: t for t in task_instances}
        changes = []
        for job_id, assignment in moves.items():
            task = by_job.get(job_id)
            if task is not None and is_gpu_pool(task.pool) and (task.pool, task.priority_weight) != (
                    assignment.pool, assignment.weight):
                changes.append((task, assignment))
        pools = sorted(set(pool_slots) | {a.pool for a in moves.values()})
        not_dispatched = or_(_task_instance.c.state.is_(None), _task_instance.c.state.in_(RELEASABLE_STATES))
        moved: list[str] = []
        skipped: list[str] = []
        plan_id = None
        try:
            with self.get_engine().begin() as conn:
                existing = _close_pools(conn, pools)
                moved, skipped = _move_task_instances(conn, changes, not_dispatched)
                for pool in pools:
                    slots = pool_slots.get(pool, existing.get(pool, 0))
                    conn.execute(update(_slot_pool).where(_slot_pool.c.pool == pool).values(slots=int(slots)))
                if record is not None:
                    plan_id = self._insert_plan(conn, *record)
        except SQLAlchemyError as error:
            raise GpuSchedulerMetadataError(
                f"releasing held work failed and was rolled back, nothing was changed: {type(error).__name__}: {error}"
            ) from error
        return ApplyResult(dict(pool_slots), tuple(moved), tuple(skipped), plan_id)

    # ------------------------------------------------------------------ plans

    def store_plan(self, plan_row: Mapping[str, Any], job_rows: Sequence[Mapping[str, Any]]) -> int:
        """Insert one plan and its job rows (see :mod:`airflow_gpu_scheduler.models`); returns the plan id."""
        try:
            with self.get_engine().begin() as conn:
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
        have = {job_id for (job_id,) in conn.execute(
            select(plan_job_table.c.job_id).where(plan_job_table.c.plan_id == plan_id,
                                                  plan_job_table.c.job_id.in_([r["job_id"] for r in job_rows])))}
        new = []
        for row in job_rows:
            values = {c: row.get(c) for c in columns}
            if row["job_id"] in have:
                conn.execute(update(plan_job_table).where(plan_job_table.c.plan_id == plan_id,
                                                          plan_job_table.c.job_id == row["job_id"]).values(**values))
            else:
                new.append({**values, "plan_id": plan_id})
        if new:
            conn.execute(insert(plan_job_table), new)
        return plan_id

    def get_plans(self, limit: int = 20) -> list[dict[str, Any]]:
        """The most recent plans, newest first, each with its ``jobs``."""
        with self.get_engine().connect() as conn:
            plans = [dict(r) for r in conn.execute(
                select(plan_table).order_by(plan_table.c.id.desc()).limit(limit)).mappings()]
            if plans:
                jobs = conn.execute(select(plan_job_table).where(
                    plan_job_table.c.plan_id.in_([p["id"] for p in plans])).order_by(plan_job_table.c.id)).mappings()
                by_plan: dict[int, list] = {}
                for job in jobs:
                    by_plan.setdefault(job["plan_id"], []).append(dict(job))
                for plan in plans:
                    plan["jobs"] = by_plan.get(plan["id"], [])
        return plans

    # ------------------------------------------------------------------ review (the UI page)
    # Each takes an optional open connection: the review page passes the api-server's own
    # session connection, so it needs no ``gpu_scheduler_metadata`` connection.

    @contextlib.contextmanager
    def _reading(self, conn=None):
        if conn is not None:
            yield conn
        else:
            with self.get_engine().connect() as own:
                yield own

    def latest_plan(self, conn=None) -> dict[str, Any] | None:
        """The newest plan with all its job rows (in recorded order), or ``None`` before the first plan."""
        with self._reading(conn) as c:
            plan = c.execute(select(plan_table).order_by(plan_table.c.id.desc()).limit(1)).mappings().first()
            if plan is None:
                return None
            jobs = c.execute(select(plan_job_table).where(plan_job_table.c.plan_id == plan["id"])
                             .order_by(plan_job_table.c.id)).mappings().all()
        return {**dict(plan), "jobs": [dict(j) for j in jobs]}

    def previous_starts(self, conn=None) -> dict[str, float]:
        """Planned start per waiting job of the newest plan: the promises the next plan keeps when near."""
        newest = select(func.max(plan_table.c.id)).scalar_subquery()
        query = (
            select(plan_job_table.c.job_id, plan_job_table.c.planned_start_s)
            .where(plan_job_table.c.plan_id == newest, plan_job_table.c.planned_start_s.is_not(None),
                   plan_job_table.c.decision != "running")
        )
        with self._reading(conn) as c:
            return {job_id: float(start) for job_id, start in c.execute(query)}

    def plan_summaries(self, limit: int = 20, conn=None) -> list[dict[str, Any]]:
        """The most recent plans without their jobs, newest first, each with ``decisions`` (count per decision)."""
        with self._reading(conn) as c:
            plans = [dict(r) for r in c.execute(
                select(plan_table).order_by(plan_table.c.id.desc()).limit(limit)).mappings()]
            if plans:
                counts = c.execute(
                    select(plan_job_table.c.plan_id, plan_job_table.c.decision, func.count())
                    .where(plan_job_table.c.plan_id.in_([p["id"] for p in plans]))
                    .group_by(plan_job_table.c.plan_id, plan_job_table.c.decision)).all()
                by_plan: dict[int, dict[str, int]] = {}
                for plan_id, decision, n in counts:
                    by_plan.setdefault(plan_id, {})[decision] = int(n)
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
        with self._reading(conn) as c:
            return [dict(r) for r in c.execute(query).mappings()]

    def gpu_pool_intervals(self, since_s: float, conn=None, max_rows: int = 20000) -> list[dict[str, Any]]:
        """Task instances that held GPU-pool slots since ``since_s``: pool, slots, start_s, end_s (None: running).

        The most recently started ``max_rows`` are read and filtered here: timestamps are compared
        in Python because SQLite stores them as text.
        """
        ti = _task_instance
        query = (
            select(ti.c.pool, ti.c.pool_slots, ti.c.state, ti.c.start_date, ti.c.end_date)
            .where(ti.c.pool.startswith(POOL_PREFIX, autoescape=True), ti.c.pool != INTAKE_POOL)
            .where(ti.c.start_date.is_not(None))
            .order_by(ti.c.start_date.desc())
            .limit(max_rows)
        )
        out = []
        with self._reading(conn) as c:
            for row in c.execute(query).mappings():
                start, end = to_epoch(row["start_date"]), to_epoch(row["end_date"])
                if end is None and row["state"] not in ("running", "queued"):
                    continue  # never finished and not running (e.g. removed): holds nothing now
                if end is not None and end < since_s:
                    continue
                out.append({"pool": row["pool"], "gpus": int(row["pool_slots"] or 1), "start_s": start, "end_s": end})
        return out


def _close_pools(conn, pools: Sequence[str]) -> dict[str, int]:
    """Create missing GPU pools and set every one of ``pools`` to 0 slots; returns their slots before.

    Inside the apply transaction, closed pools mean the scheduler cannot dispatch from them
    while task instances are moved; the caller reopens them with the plan's slots.
    """
    existing = dict(conn.execute(select(_slot_pool.c.pool, _slot_pool.c.slots)
                                 .where(_slot_pool.c.pool.in_(pools))).all())
    for pool in pools:
        if pool not in existing:
            conn.execute(insert(_slot_pool).values(
                pool=pool, slots=0, include_deferred=False,
                description="Managed by airflow-gpu-scheduler: slots are rewritten every planning cycle.",
            ))
    if pools:
        conn.execute(update(_slot_pool).where(_slot_pool.c.pool.in_(pools)).values(slots=0))
    return existing


#: Task instances moved by one UPDATE (keys in one ``IN`` list; well within every driver's limits).
MOVE_BATCH = 500


def _move_task_instances(conn, changes: Sequence[tuple[GpuTaskInstance, Assignment]], still_waiting) -> tuple[
        list[str], list[str]]:
    """Write pool, weight and executor queue of many task instances with few statements; returns (moved, skipped) job ids.

    Task instances that get the same values from the same pool share an UPDATE keyed on
    ``(dag_id, run_id, task_id, map_index) IN (...)``, guarded by "still in the pool it was read
    in" and ``still_waiting``; RETURNING tells which rows were written, so one dispatched
    meanwhile is reported as skipped. 5,000 held task instances take a handful of statements
    instead of 5,000 round trips while the pool rows are locked. Without RETURNING (MySQL)
    each task instance gets its own statement.
    """
    ti = _task_instance
    groups: dict[tuple[str, str, int, str | None], list[TaskInstanceKey]] = {}
    for task, assignment in changes:
        groups.setdefault((task.pool, assignment.pool, assignment.weight, assignment.queue), []).append(task.key)
    returning = conn.dialect.update_returning
    moved: list[str] = []
    skipped: list[str] = []
    for (old_pool, new_pool, weight, queue), keys in groups.items():
        # A held assignment carries no queue (None): the task instance keeps its own.
        values = {"pool": new_pool, "priority_weight": weight} | ({"queue": queue} if queue is not None else {})
        for start in range(0, len(keys), MOVE_BATCH if returning else 1):
            batch = keys[start:start + (MOVE_BATCH if returning else 1)]
            statement = (
                update(ti)
                .where(tuple_(ti.c.dag_id, ti.c.run_id, ti.c.task_id, ti.c.map_index).in_(
                    [(k.dag_id, k.run_id, k.task_id, k.map_index) for k in batch]))
                .where(ti.c.pool == old_pool, still_waiting)
                .values(**values)
            )
            if returning:
                rows = conn.execute(statement.returning(ti.c.dag_id, ti.c.run_id, ti.c.task_id, ti.c.map_index)).all()
                written = {TaskInstanceKey(d, r, t, int(m)) for d, r, t, m in rows}
            else:
                written = set(batch) if conn.execute(statement).rowcount == 1 else set()
            for key in batch:
                (moved if key in written else skipped).append(key.job_id)
    return moved, skipped
