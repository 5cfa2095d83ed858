"""The columns of Airflow's own tables the hook reads or writes, and how their values read back.

Only the columns the scheduler uses. Timestamps are left untyped and parsed in Python
(:func:`to_epoch`): SQLite returns them as text, PostgreSQL as aware datetimes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Column, MetaData, Table

#: States in which a task instance has not been handed to an executor yet, so its pool and
#: weight still matter (``None``: upstream not done yet).
RELEASABLE_STATES = ("scheduled", "up_for_retry", "up_for_reschedule")

_airflow = MetaData()
task_instance = Table(
    "task_instance",
    _airflow,
    *(
        Column(name)
        for name in (
            "dag_id",
            "run_id",
            "task_id",
            "map_index",
            "state",
            "pool",
            "pool_slots",
            "priority_weight",
            "start_date",
            "end_date",
            "duration",
            "scheduled_dttm",
            "queued_dttm",
            "try_number",
            "dag_version_id",
            "queue",
        )
    ),
)
dag_run = Table("dag_run", _airflow, *(Column(n) for n in ("dag_id", "run_id", "state", "queued_at", "start_date")))
dag = Table("dag", _airflow, Column("dag_id"), Column("is_paused"))
serialized_dag = Table("serialized_dag", _airflow, Column("dag_version_id"), Column("data"), Column("data_compressed"))
slot_pool = Table("slot_pool", _airflow, *(Column(n) for n in ("pool", "slots", "description", "include_deferred")))
#: Airflow's tables and the columns of them the hook reads or writes (checked by ``schema_check``).
AIRFLOW_TABLES = _airflow


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
