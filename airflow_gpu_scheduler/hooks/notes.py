"""Task-instance notes written by the planner: the plan, where data teams look (Grid view, task instance page).

Airflow 3.3 keeps one note per task instance in ``task_instance_note`` (``ti_id`` -> ``task_instance.id``,
``content`` up to 1000 characters, ``user_id`` of whoever wrote it; the UI and the REST API set it to
the person's id). The planner writes its own notes with ``user_id`` :data:`PLANNER_USER` and
content starting with :data:`MARKER`, and only ever changes a note that still carries that user:
once a person edits or writes a note, it is theirs and is never overwritten. A note a person
deletes is written again by the next cycle (it is the plan's, not theirs).

Written inside the plan's apply transaction (see ``GpuSchedulerMetadataHook.apply_levers``), in
a handful of statements whatever the number of task instances: one read of the live GPU task
instances with their notes, then inserts and updates in batches, skipping every note whose
text has not changed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import Column, DateTime, MetaData, Table, and_, case, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.core.levers import INTAKE_POOL, POOL_PREFIX
from airflow_gpu_scheduler.cycle.snapshot import JobKey

if TYPE_CHECKING:  # the notes' SQL needs no Airflow: the plan's note text (cycle.notes) imports this module
    from airflow_gpu_scheduler.hooks.metadata import GpuSchedulerMetadataHook

log = logging.getLogger(__name__)

#: ``user_id`` of the planner's notes: not a login any auth manager hands out (it has a space).
PLANNER_USER = "gpu-scheduler (planner)"
#: How every planner note begins, so people can tell it from their own.
MARKER = "GPU plan:"
#: ``task_instance_note.content`` is a VARCHAR(1000).
NOTE_LIMIT = 1000
#: Notes changed by one UPDATE (two bound parameters each, well inside SQLite's limit).
UPDATE_BATCH = 200

_meta = MetaData()
_task_instance = Table(
    "task_instance", _meta, *(Column(n) for n in ("id", "dag_id", "run_id", "task_id", "map_index", "state", "pool"))
)
_note = Table(
    "task_instance_note",
    _meta,
    Column("ti_id"),
    Column("user_id"),
    Column("content"),
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
)


def fit(text: str) -> str:
    """The note as stored: cut to the column's size, saying so."""
    return text if len(text) <= NOTE_LIMIT else text[: NOTE_LIMIT - 1] + "…"


@dataclass
class NoteCounts:
    """What one write did: notes inserted, updated, left as they were, people's notes kept, and how long it took."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    kept: int = 0
    wall_s: float = 0.0
    error: str | None = None

    def as_dict(self) -> dict[str, int | float | str | None]:
        return {
            "inserted": self.inserted,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "kept": self.kept,
            "wall_s": round(self.wall_s, 3),
            "error": self.error,
        }


@dataclass
class TaskInstanceNotes:
    """The notes one cycle wants on its task instances.

    :param plan: notes for waiting task instances: written where there is no note, and
        replacing the planner's own.
    :param started: notes for task instances that started: they only replace the planner's
        own note (a task the planner never noted gets none).
    """

    plan: Mapping[JobKey, str] = field(default_factory=dict)
    started: Mapping[JobKey, str] = field(default_factory=dict)
    counts: NoteCounts = field(default_factory=NoteCounts)

    def __bool__(self) -> bool:
        return bool(self.plan or self.started)

    def write(self, conn: Connection) -> NoteCounts:
        """Write the notes on ``conn``, inside the caller's transaction; returns (and keeps) the counts.

        Notes inform, they never decide: they are written under a savepoint, and if a notes
        statement fails only the notes are rolled back (and the error logged and counted); the
        plan is applied anyway. A lost connection still fails the whole apply.
        """
        self.counts = NoteCounts()
        if not self:
            return self.counts
        started = time.perf_counter()
        try:
            with conn.begin_nested():
                self._write(conn, self.counts)
        except SQLAlchemyError as error:
            if getattr(error, "connection_invalidated", False):
                raise  # the connection is gone: the whole apply rolls back, as for any of its writes
            self.counts = NoteCounts(error=f"{type(error).__name__}: {str(error).splitlines()[0]}")
            log.warning("Task-instance notes were not written (the plan is applied): %s", self.counts.error)
        self.counts.wall_s = time.perf_counter() - started
        return self.counts

    def _write(self, conn: Connection, counts: NoteCounts) -> None:
        ti = _task_instance
        live = (
            select(
                ti.c.id,
                ti.c.dag_id,
                ti.c.run_id,
                ti.c.task_id,
                ti.c.map_index,
                _note.c.ti_id.label("noted"),
                _note.c.user_id,
                _note.c.content,
            )
            .outerjoin(_note, _note.c.ti_id == ti.c.id)
            .where(or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True)))
            .where(ti.c.state.in_(("scheduled", "queued", "running")))
        )
        now = datetime.now(timezone.utc)
        inserts: list[dict] = []
        updates: list[tuple[object, str]] = []
        for row in conn.execute(live).mappings():
            key = JobKey(row["dag_id"], row["run_id"], row["task_id"], int(row["map_index"]))
            wanted = self.plan.get(key)
            if wanted is None:
                wanted = self.started.get(key)
                if wanted is None or row["noted"] is None:
                    continue
            wanted = fit(wanted)
            if row["noted"] is None:
                inserts.append(
                    {
                        "ti_id": row["id"],
                        "user_id": PLANNER_USER,
                        "content": wanted,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
            elif row["user_id"] != PLANNER_USER:
                counts.kept += 1
            elif row["content"] == wanted:
                counts.unchanged += 1
            else:
                updates.append((row["id"], wanted))
        if inserts:
            # A person may add a note between our read and this insert: theirs stays.
            counts.inserted = conn.execute(_insert_if_absent(conn), inserts).rowcount
            if counts.inserted < 0:  # drivers that cannot count an executemany
                counts.inserted = len(inserts)
        for start in range(0, len(updates), UPDATE_BATCH):
            batch = dict(updates[start : start + UPDATE_BATCH])
            # One statement per batch; the user check in the WHERE keeps a note a person
            # took over since the read.
            done = conn.execute(
                update(_note)
                .where(and_(_note.c.ti_id.in_(list(batch)), _note.c.user_id == PLANNER_USER))
                .values(content=case(batch, value=_note.c.ti_id), updated_at=now)
            )
            counts.updated += done.rowcount


def write_notes(hook: GpuSchedulerMetadataHook, notes: TaskInstanceNotes) -> NoteCounts:
    """Write notes in a transaction of their own, for a cycle that applies no plan."""
    if not notes:
        return notes.counts
    try:
        with hook.get_engine().begin() as conn:
            return notes.write(conn)
    except SQLAlchemyError as error:  # e.g. the database went away: the next cycle writes them
        log.warning("Task-instance notes were not written: %s: %s", type(error).__name__, error)
        return notes.counts


def _insert_if_absent(conn: Connection):
    dialect = conn.dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(_note).on_conflict_do_nothing(index_elements=["ti_id"])
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(_note).on_conflict_do_nothing(index_elements=["ti_id"])
    if dialect == "mysql":
        return insert(_note).prefix_with("IGNORE")
    return insert(_note)


def gpu_task_notes(conn: Connection) -> dict[JobKey, tuple[str | None, str | None]]:
    """Every note on a live GPU task instance: ``{key: (user_id, content)}`` (for tests and reports)."""
    ti = _task_instance
    query = (
        select(ti.c.dag_id, ti.c.run_id, ti.c.task_id, ti.c.map_index, _note.c.user_id, _note.c.content)
        .join(_note, _note.c.ti_id == ti.c.id)
        .where(or_(ti.c.pool == INTAKE_POOL, ti.c.pool.startswith(POOL_PREFIX, autoescape=True)))
    )
    return {JobKey(d, r, t, int(m)): (u, c) for d, r, t, m, u, c in conn.execute(query)}
