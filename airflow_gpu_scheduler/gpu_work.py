"""Re-export of :mod:`airflow_gpu_scheduler.cycle.workload` (rows -> the core's jobs)."""

from airflow_gpu_scheduler.cycle.workload import GpuWorkload, build_workload, completions, learn_estimates

__all__ = ["GpuWorkload", "build_workload", "completions", "learn_estimates"]
