"""Refuse to write to an Airflow metadata database whose schema the provider was not built for.

The provider reads and writes Airflow's own tables (``task_instance``, ``slot_pool``,
``dag_run``, ``dag``, ``serialized_dag``) with SQLAlchemy Core, outside Airflow's ORM. An
Airflow release that renames or drops one of those columns would make the planner write
nonsense or fail half-way, so every planning cycle and every fail-open release first checks
the installed Airflow version and that each column it uses exists. On a mismatch it raises
:class:`UnsupportedSchemaError`, naming the version and the missing columns, before anything
is written. A refused planning cycle applies no plan, so after ``fail_open_after_s`` the
fail-open watchdog hands held work back to Airflow's own order; the watchdog needs fewer
columns (:data:`FAIL_OPEN`) and refuses only when those are missing too.

``task_instance_note`` (the plan notes, :mod:`airflow_gpu_scheduler.hooks.notes`) is left out on
purpose: notes inform, they never decide, and are written under a savepoint, so a changed notes
schema costs the notes (logged, counted in the summary), never the plan.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version

from sqlalchemy import Column, MetaData, Table, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from airflow_gpu_scheduler.db.models import metadata as plan_metadata
from airflow_gpu_scheduler.hooks.connection import GpuSchedulerMetadataError
from airflow_gpu_scheduler.hooks.tables import AIRFLOW_TABLES

#: Airflow versions the provider is tested on: 3.2 reads a provider's ``db-managers`` (the plan tables).
SUPPORTED = ((3, 2), (4, 0))
SUPPORTED_TEXT = ">=3.2,<4"
#: What a planning cycle uses: every column the metadata hook declares.
PLANNING = "planning"
#: What the fail-open watchdog uses: not whether a DAG is paused, nor when a run started.
FAIL_OPEN = "fail-open"
_NOT_FOR_FAIL_OPEN = {"dag": None, "dag_run": {"queued_at", "start_date"}}

_alembic_version = Table("alembic_version", MetaData(), Column("version_num"))


class UnsupportedSchemaError(GpuSchedulerMetadataError):
    """The Airflow version or its metadata schema is not one the provider knows; nothing was written."""


def installed_airflow_version() -> str:
    for dist in ("apache-airflow-core", "apache-airflow"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


def _release(text: str) -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else ()


def required_columns(purpose: str = PLANNING) -> dict[str, set[str]]:
    """``{table: columns}`` that ``purpose`` (:data:`PLANNING` or :data:`FAIL_OPEN`) reads or writes."""
    needed = {
        t.name: {c.name for c in t.columns} for t in (*AIRFLOW_TABLES.tables.values(), *plan_metadata.tables.values())
    }
    if purpose == FAIL_OPEN:
        for table, columns in _NOT_FOR_FAIL_OPEN.items():
            if columns is None:
                needed.pop(table, None)
            else:
                needed[table] -= columns
    elif purpose != PLANNING:
        raise ValueError(f"purpose must be {PLANNING!r} or {FAIL_OPEN!r}, got {purpose!r}")
    return needed


def check_metadata_schema(hook, purpose: str = PLANNING) -> None:
    """Raise :class:`UnsupportedSchemaError` unless Airflow's version and the columns ``purpose`` uses are known.

    :param hook: a :class:`~airflow_gpu_scheduler.hooks.metadata.GpuSchedulerMetadataHook`.
    """
    airflow_version = installed_airflow_version()
    low, high = SUPPORTED
    if not low <= _release(airflow_version) < high:
        raise UnsupportedSchemaError(
            f"refusing to write: Airflow {airflow_version} is not supported by airflow-gpu-scheduler "
            f"(apache-airflow{SUPPORTED_TEXT}); nothing was written"
        )
    needed = required_columns(purpose)
    try:
        with hook.get_engine().connect() as conn:
            inspector = inspect(conn)
            present = {
                name: {c["name"] for c in columns}
                for (_, name), columns in inspector.get_multi_columns(filter_names=list(needed)).items()
            }
            revision = _revision(conn, inspector)
    except SQLAlchemyError as error:
        raise GpuSchedulerMetadataError(
            f"reading the metadata schema failed: {type(error).__name__}: {error}"
        ) from None
    missing_tables = sorted(t for t in needed if t not in present)
    missing = [f"{t}.{c}" for t in sorted(needed) if t in present for c in sorted(needed[t] - present[t])]
    database = f" (metadata database at revision {revision})" if revision else ""
    plan_tables = set(plan_metadata.tables)
    if missing_tables and set(missing_tables) <= plan_tables and not missing:
        raise UnsupportedSchemaError(
            f"refusing to write: the provider's tables {', '.join(missing_tables)} are missing on Airflow "
            f"{airflow_version}{database}; run 'airflow db migrate' (Airflow >= 3.2 creates them); nothing was written"
        )
    if missing_tables or missing:
        what = ", ".join([*(f"table {t}" for t in missing_tables), *(f"column {c}" for c in missing)])
        raise UnsupportedSchemaError(
            f"refusing to write: Airflow {airflow_version}{database} has no {what}, which the GPU scheduler's "
            f"{purpose} uses; this provider knows the schema of apache-airflow{SUPPORTED_TEXT}. Nothing was written; "
            "held GPU work is left to the fail-open watchdog"
        )


def _revision(conn, inspector) -> str | None:
    """Airflow's own alembic revision of the database (tells a database of another Airflow version apart)."""
    if not inspector.has_table("alembic_version"):
        return None
    return conn.execute(select(_alembic_version.c.version_num).limit(1)).scalar()
