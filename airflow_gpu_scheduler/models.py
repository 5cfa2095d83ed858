"""Re-export of :mod:`airflow_gpu_scheduler.db.models` (the plan tables)."""

from airflow_gpu_scheduler.db.models import metadata, plan_job_table, plan_table

__all__ = ["metadata", "plan_job_table", "plan_table"]
