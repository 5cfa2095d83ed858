"""The provider's DB manager: ``airflow db migrate`` creates and upgrades the plan tables.

Registered under ``db-managers`` in :func:`~airflow_gpu_scheduler.get_provider_info.get_provider_info`,
so Airflow's ``RunDBManager`` discovers it; it keeps its own alembic history in
``migrations/`` and its own version table, separate from Airflow's.
"""

from __future__ import annotations

from pathlib import Path

from airflow.utils.db_manager import BaseDBManager

from airflow_gpu_scheduler.db.models import metadata

_MIGRATIONS = Path(__file__).parent / "migrations"


class GpuSchedulerDBManager(BaseDBManager):
    """Manages the ``gpu_sched_plan`` and ``gpu_sched_plan_job`` tables."""

    metadata = metadata
    migration_dir = str(_MIGRATIONS)
    alembic_file = str(_MIGRATIONS / "alembic.ini")
    version_table_name = "alembic_version_gpu_sched"
    supports_table_dropping = True
