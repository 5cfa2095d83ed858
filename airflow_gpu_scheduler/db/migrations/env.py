"""Alembic environment for the provider's own tables (separate version table from Airflow's)."""

from __future__ import annotations

from airflow import settings
from alembic import context

from airflow_gpu_scheduler.db.manager import GpuSchedulerDBManager
from airflow_gpu_scheduler.db.models import metadata

version_table = GpuSchedulerDBManager.version_table_name


def run_migrations_offline() -> None:
    context.configure(
        url=settings.SQL_ALCHEMY_CONN,
        target_metadata=metadata,
        literal_binds=True,
        version_table=version_table,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = context.config.attributes.get("connection", None) or settings.engine
    assert connectable is not None  # Airflow configures its engine before it runs the migrations
    with connectable.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            version_table=version_table,
            render_as_batch=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
