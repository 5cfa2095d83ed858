"""Re-export of :mod:`airflow_gpu_scheduler.authoring.kubernetes_pod` (the path README documents)."""

from airflow_gpu_scheduler.authoring.kubernetes_pod import gpu_pod_override

__all__ = ["gpu_pod_override"]
