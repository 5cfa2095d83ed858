"""Re-export of :mod:`airflow_gpu_scheduler.db.manager` (the path deployments' provider info named)."""

from airflow_gpu_scheduler.db.manager import GpuSchedulerDBManager

__all__ = ["GpuSchedulerDBManager"]
